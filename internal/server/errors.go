package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/auth"
	"github.com/dexzd/dexzd/internal/engine"
)

// This file is the one place where errors become gRPC status codes (E28):
//
//	*engine.Error CodeInvalidArgument    INVALID_ARGUMENT, "<field>: <why>"
//	*engine.Error CodeAlreadyExists      ALREADY_EXISTS (a refused start)
//	*engine.Error CodeNotFound           NOT_FOUND (unknown flow or run)
//	*engine.Error CodeFailedPrecondition FAILED_PRECONDITION (a closed flow, a
//	                                     timer not pending); an RPC's invalid
//	                                     result carries a WorkerError detail
//	                                     of type INVALID_USER_FLOW_CODE
//	*engine.Error CodeResourceExhausted  RESOURCE_EXHAUSTED (a value, a
//	                                     request's values or a run's
//	                                     attributes above limits.maxPayloadBytes,
//	                                     maxRequestBytes, maxFlowAttributeBytes;
//	                                     the message names the key) +
//	                                     ErrorInfo (reason LIMIT_EXCEEDED,
//	                                     metadata limit=<key>), no RetryInfo
//	*OverloadError                       RESOURCE_EXHAUSTED + RetryInfo (the
//	                                     hint) + ErrorInfo (reason OVERLOADED,
//	                                     metadata limit=<key>): new work
//	                                     refused before anything was done
//	*WorkerError                         FAILED_PRECONDITION + WorkerError detail
//	ErrNotServing                        UNAVAILABLE: only when this process
//	                                     cannot serve (lease, drain, standby);
//	                                     + RetryInfo: 50 ms while it steps
//	                                     down, else 100 ms
//	*auth.UnauthenticatedError           UNAUTHENTICATED: no credentials, an
//	                                     unknown token (the message names
//	                                     the role the method needs)
//	*auth.DeniedError                    PERMISSION_DENIED: the caller's role
//	                                     lacks the method or flow type
//	ErrDataLoss                          DATA_LOSS: a value object the answer
//	                                     needs is damaged or missing
//	context.DeadlineExceeded             DEADLINE_EXCEEDED (an expired long
//	                                     poll or RPC wait)
//	context.Canceled                     CANCELLED
//	anything else                        INTERNAL

// statusOf maps err to a gRPC status error.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var oe *OverloadError
	if errors.As(err, &oe) {
		return overloadStatus(oe)
	}
	var we *WorkerError
	if errors.As(err, &we) {
		return withWorkerError(codes.FailedPrecondition, we.Error(), &dexpb.WorkerError{
			ErrorType: we.Failure.Type, Message: we.Failure.Message, Stack: we.Failure.Stack})
	}
	var (
		ee *engine.Error
		ue *auth.UnauthenticatedError
		de *auth.DeniedError
	)
	switch {
	case errors.As(err, &ue):
		return status.Error(codes.Unauthenticated, ue.Error())
	case errors.As(err, &de):
		return status.Error(codes.PermissionDenied, de.Error())
	case errors.Is(err, ErrDataLoss):
		return status.Error(codes.DataLoss, err.Error())
	case errors.Is(err, ErrNotServing):
		return status.Error(codes.Unavailable, err.Error())
	case errors.As(err, &ee):
		return engineStatus(ee)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	default:
		return status.Error(codes.Internal, err.Error())
	}
}

func engineStatus(e *engine.Error) error {
	msg := e.Message
	if e.Field != "" {
		msg = e.Field + ": " + msg
	}
	switch e.Code {
	case engine.CodeInvalidArgument:
		return status.Error(codes.InvalidArgument, msg)
	case engine.CodeAlreadyExists:
		return status.Error(codes.AlreadyExists, msg)
	case engine.CodeNotFound:
		return status.Error(codes.NotFound, msg)
	case engine.CodeFailedPrecondition:
		if errors.Is(e, engine.ErrInvalidUserCode) {
			return withWorkerError(codes.FailedPrecondition, msg, &dexpb.WorkerError{
				ErrorType: string(engine.ErrInvalidUserFlowCode), Message: msg})
		}
		return status.Error(codes.FailedPrecondition, msg)
	case engine.CodeAborted:
		return status.Error(codes.Aborted, msg)
	case engine.CodeResourceExhausted:
		if e.Limit != "" {
			return limitStatus(msg, e.Limit)
		}
		return status.Error(codes.ResourceExhausted, msg)
	default:
		return status.Error(codes.Internal, msg)
	}
}

// LimitReason is the ErrorInfo reason of the status of a request above a
// size limit (a value, a request's values, a run's attributes): its
// metadata "limit" is the limit's configuration key. It carries no
// RetryInfo: the same request is refused again.
const LimitReason = "LIMIT_EXCEEDED"

func limitStatus(msg, key string) error {
	st, err := status.New(codes.ResourceExhausted, msg).WithDetails(
		&errdetails.ErrorInfo{Reason: LimitReason, Domain: "dexzd", Metadata: map[string]string{"limit": key}})
	if err != nil {
		return status.Error(codes.ResourceExhausted, msg)
	}
	return st.Err()
}

// OverloadReason is the ErrorInfo reason of an *OverloadError's status.
const OverloadReason = "OVERLOADED"

func overloadStatus(e *OverloadError) error {
	st, err := status.New(codes.ResourceExhausted, e.Error()).WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(e.RetryAfter)},
		&errdetails.ErrorInfo{Reason: OverloadReason, Domain: "dexzd", Metadata: map[string]string{"limit": e.Limit}},
	)
	if err != nil {
		return status.Error(codes.ResourceExhausted, e.Error())
	}
	return st.Err()
}

func withWorkerError(c codes.Code, msg string, detail *dexpb.WorkerError) error {
	st, err := status.New(c, msg).WithDetails(detail)
	if err != nil {
		return status.Error(c, msg)
	}
	return st.Err()
}

// Retry hints of the UNAVAILABLE answers of a process that does not serve:
// while it steps down a standby takes over at its next lease poll; a
// standby takes over as soon as the lease is free. The SDK retries after
// the hint instead of a backoff growing towards 500 ms, so that a
// hand-over or a takeover costs the client little more than the server's
// part. A refusal is cheap: a client waiting out a crash sends about ten a
// second.
const (
	SteppingDownRetryHint = 50 * time.Millisecond
	StandbyRetryHint      = 100 * time.Millisecond
)

// unavailable is the answer of a process that cannot serve.
func (s *Server) unavailable() error {
	if msg, ok := s.steppingDown(); ok {
		return withRetryHint(codes.Unavailable, msg, SteppingDownRetryHint)
	}
	msg := ErrNotServing.Error()
	if r := s.reason.Load(); r != nil && s.backend.Load() == nil {
		msg = *r
	}
	return withRetryHint(codes.Unavailable, msg, StandbyRetryHint)
}

// withRetryHint is a status with a RetryInfo detail asking for a retry
// after d.
func withRetryHint(c codes.Code, msg string, d time.Duration) error {
	st, err := status.New(c, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		return status.Error(c, msg)
	}
	return st.Err()
}
