package dex

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors. Client errors match them with errors.Is according to
// their gRPC code; status.Code still works on every client error.
var (
	// ErrInvalidFlow: a flow definition is invalid (Flow.Validate).
	ErrInvalidFlow = errors.New("dex: invalid flow definition")
	// ErrNoValue: a Value or an output is unset.
	ErrNoValue = errors.New("dex: no value")
	// ErrNotFound: the flow ID, run, step execution or timer is unknown
	// (NOT_FOUND).
	ErrNotFound = errors.New("dex: not found")
	// ErrAlreadyExists: the ID reuse policy refused a start (ALREADY_EXISTS).
	ErrAlreadyExists = errors.New("dex: already exists")
	// ErrFailedPrecondition: the flow execution is closed, the timer is not
	// pending, or an RPC handler failed (FAILED_PRECONDITION; an RPC failure
	// also matches *WorkerError with errors.As).
	ErrFailedPrecondition = errors.New("dex: failed precondition")
	// ErrInvalidArgument: the server refused a malformed request.
	ErrInvalidArgument = errors.New("dex: invalid argument")
	// ErrUnavailable: no address could serve the call (UNAVAILABLE).
	ErrUnavailable = errors.New("dex: unavailable")
	// ErrTooLarge: a value is above the server's payload limit
	// (RESOURCE_EXHAUSTED).
	ErrTooLarge = errors.New("dex: value too large")
	// ErrOutcomeUnknown: a call that changes state was sent, but no
	// definitive answer came back, so it may or may not have been applied
	// (the errors are *OutcomeUnknownError).
	ErrOutcomeUnknown = errors.New("dex: outcome unknown")
	// ErrLockHeld: an RPC's lock set could not be taken at once because
	// another RPC or step attempt holds one of its locks, or a step
	// attempt waiting for it is due (ABORTED; the message names the
	// lock). Nothing ran: call again.
	ErrLockHeld = errors.New("dex: lock held")
)

// OutcomeUnknownError is the error of a call that changes state and may
// or may not have been applied: it was sent, and then the server stopped
// answering (UnresponsiveTimeout), the connection broke or the server
// answered UNAVAILABLE (it may have lost its lease after committing), or
// the call's context ended. The SDK never sends such a call again on its
// own unless it is idempotent: StartFlow, Publish, Reset and
// ContinueAsNew carry a request ID and are retried with it until
// RetryTimeout or the context ends, and
// report this error only then, with the request ID to retry with
// (WithRequestID): a retry with it applies the call at most
// once. InvokeRPC, StopFlow and SkipTimer carry none and are sent at most
// once: read the flow's state (GetFlowSummary, GetFlowState) before
// sending them again.
//
// It matches ErrOutcomeUnknown with errors.Is, and unwraps to the error
// that ended the call (an *Error, or the context's error), so errors.Is
// with ErrUnavailable or context.DeadlineExceeded, and status.Code, work
// as before.
type OutcomeUnknownError struct {
	// Op is the call, for example "StopFlow".
	Op string
	// Address is the server the call was last sent to.
	Address string
	// RequestID is the call's request ID (StartFlow, Publish, Reset,
	// ContinueAsNew); empty for calls without one.
	RequestID string
	// Err is what ended the call.
	Err error
}

func (e *OutcomeUnknownError) Error() string {
	var hint string
	switch {
	case e.RequestID != "":
		hint = fmt.Sprintf("retry with request ID %q (dex.WithRequestID) to apply it at most once", e.RequestID)
	default:
		hint = "read the flow's state before sending it again"
	}
	return fmt.Sprintf("dex: %s: outcome unknown: the request was sent to %s but no definitive answer came back (%v); it may or may not have been applied; %s",
		e.Op, e.Address, e.Err, hint)
}

// Is matches ErrOutcomeUnknown.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Unwrap returns the error that ended the call.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// RetryAfter wraps err so that the next attempt runs after d instead of the
// retry policy's backoff; the policy's limits still apply. It also
// records the stack from its caller down, which the worker reports with
// the error.
//
//	return nil, dex.RetryAfter(5*time.Second, err)
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &retryAfterError{d: d, err: err, stack: callerStack(0)}
}

type retryAfterError struct {
	d     time.Duration
	err   error
	stack string
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// NonRetryable wraps err so that the step's failure policy applies at once
// (fail the flow, proceed, or the recovery step) instead of another
// attempt: for an application error that no retry can fix, like
// Temporal's non-retryable application errors. A value that does not
// decode, a value that does not encode and an invalid result are
// non-retryable without it. It records the stack from its caller down,
// which the worker reports with the error.
//
//	return nil, dex.NonRetryable(fmt.Errorf("order %s: unknown currency %q", id, cur))
func NonRetryable(err error) error {
	if err == nil {
		err = errors.New("non-retryable failure")
	}
	return &nonRetryableError{err: err, stack: callerStack(0)}
}

type nonRetryableError struct {
	err   error
	stack string
}

func (e *nonRetryableError) Error() string { return e.err.Error() }
func (e *nonRetryableError) Unwrap() error { return e.err }

// nonRetryable reports whether no further attempt can fix err: it was
// marked NonRetryable, or a value did not decode or encode, or the result
// broke the flow's declaration.
func nonRetryable(err error) bool {
	var nr *nonRetryableError
	var de *decodeError
	var ee *encodeError
	var ir *invalidResultError
	return errors.As(err, &nr) || errors.As(err, &de) || errors.As(err, &ee) || errors.As(err, &ir)
}

// ErrorTyper is implemented by errors that name their own type for the
// server (TaskFailure.error_type). Without it the worker reports the Go
// type of the most specific error in the chain.
type ErrorTyper interface {
	ErrorType() string
}

// errorTypeName names err's type: an ErrorTyper's name, else the Go type of
// the first error in the Unwrap chain that is not a plain wrapper made by
// fmt.Errorf, errors.New, errors.Join or RetryAfter, else the innermost
// error's type.
func errorTypeName(err error) string {
	var et ErrorTyper
	if errors.As(err, &et) {
		return et.ErrorType()
	}
	last := err
	for e := err; e != nil; e = errors.Unwrap(e) {
		if !isPlainWrapper(e) {
			return reflect.TypeOf(e).String()
		}
		last = e
	}
	return reflect.TypeOf(last).String()
}

func isPlainWrapper(err error) bool {
	if _, ok := err.(*retryAfterError); ok { //nolint:errorlint // one link of the chain, not the chain
		return true
	}
	if _, ok := err.(*nonRetryableError); ok { //nolint:errorlint // one link of the chain, not the chain
		return true
	}
	switch reflect.TypeOf(err).String() {
	case "*fmt.wrapError", "*fmt.wrapErrors", "*errors.errorString", "*errors.joinError":
		return true
	}
	return false
}

// decodeError: a value handed to the handler does not decode.
type decodeError struct {
	what string
	err  error
}

func (e *decodeError) Error() string     { return fmt.Sprintf("decode %s: %v", e.what, e.err) }
func (e *decodeError) Unwrap() error     { return e.err }
func (e *decodeError) ErrorType() string { return "dex.DecodeError" }

// encodeError: a value the handler returned does not encode.
type encodeError struct {
	what string
	err  error
}

func (e *encodeError) Error() string     { return fmt.Sprintf("encode %s: %v", e.what, e.err) }
func (e *encodeError) Unwrap() error     { return e.err }
func (e *encodeError) ErrorType() string { return "dex.EncodeError" }

// invalidResultError: the handler's result breaks the flow's declaration
// (an undeclared step, attribute or channel, a malformed Wait or Decision).
type invalidResultError struct{ err error }

func (e *invalidResultError) Error() string     { return e.err.Error() }
func (e *invalidResultError) Unwrap() error     { return e.err }
func (e *invalidResultError) ErrorType() string { return "dex.InvalidResult" }

// panicError is a recovered panic.
type panicError struct{ v any }

func (e *panicError) Error() string     { return fmt.Sprintf("panic: %v", e.v) }
func (e *panicError) ErrorType() string { return "dex.Panic" }

// WorkerError is the error a worker reported for an RPC handler; InvokeRPC
// returns it (inside an *Error, find it with errors.As).
type WorkerError struct {
	Type, Message, Stack string
}

func (e *WorkerError) Error() string {
	if e.Type == "" {
		return e.Message
	}
	return e.Message + " (" + e.Type + ")"
}

// Error is what client calls return for a gRPC error: the call, the code and
// the server's message. It matches the sentinel of its code with errors.Is,
// and status.Code(err) returns its code.
type Error struct {
	// Op is the call, for example "StartFlow".
	Op string
	// Code is the gRPC code.
	Code codes.Code
	// Message is the server's message.
	Message string
	// Worker is the RPC handler's error, for InvokeRPC.
	Worker *WorkerError
	st     *status.Status
}

func (e *Error) Error() string {
	if e.Worker != nil {
		return fmt.Sprintf("dex: %s: handler failed: %v", e.Op, e.Worker)
	}
	return fmt.Sprintf("dex: %s: %s: %s", e.Op, e.Code, e.Message)
}

// GRPCStatus returns the original status.
func (e *Error) GRPCStatus() *status.Status { return e.st }

// Is matches the sentinel of the error's code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == codes.NotFound
	case ErrAlreadyExists:
		return e.Code == codes.AlreadyExists
	case ErrFailedPrecondition:
		return e.Code == codes.FailedPrecondition
	case ErrInvalidArgument:
		return e.Code == codes.InvalidArgument
	case ErrUnavailable:
		return e.Code == codes.Unavailable
	case ErrTooLarge:
		return e.Code == codes.ResourceExhausted
	case ErrLockHeld:
		return e.Code == codes.Aborted
	}
	return false
}

// Unwrap exposes the worker's error, if any.
func (e *Error) Unwrap() error {
	if e.Worker != nil {
		return e.Worker
	}
	return nil
}

// wrapStatus converts a gRPC error into an *Error; other errors (context
// errors) are wrapped with the call's name.
func wrapStatus(op string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("dex: %s: %w", op, err)
	}
	e := &Error{Op: op, Code: st.Code(), Message: st.Message(), st: st}
	if st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "message larger than max") {
		// gRPC refused the whole message before the server read it: say
		// which limit that is, as the server's own refusals do.
		e.Message += " (the request is larger than the server's message limit, limits.maxRequestBytes plus 1 MiB by default: send smaller values)"
	}
	for _, d := range st.Details() {
		if we, ok := d.(*dexpb.WorkerError); ok {
			e.Worker = &WorkerError{Type: we.GetErrorType(), Message: we.GetMessage(), Stack: we.GetStack()}
		}
	}
	return e
}
