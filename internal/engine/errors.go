package engine

import (
	"errors"
	"fmt"
)

// Code classifies an error the way the API reports it (E28). The server maps
// codes to gRPC codes in one place.
type Code int

// Error codes (E28).
const (
	CodeUnknown Code = iota
	CodeInvalidArgument
	CodeAlreadyExists
	CodeNotFound
	CodeFailedPrecondition
	CodeResourceExhausted
	// CodeAborted: a lock the request needs is held (E30); retry later.
	CodeAborted
)

func (c Code) String() string {
	switch c {
	case CodeInvalidArgument:
		return "INVALID_ARGUMENT"
	case CodeAlreadyExists:
		return "ALREADY_EXISTS"
	case CodeNotFound:
		return "NOT_FOUND"
	case CodeFailedPrecondition:
		return "FAILED_PRECONDITION"
	case CodeResourceExhausted:
		return "RESOURCE_EXHAUSTED"
	case CodeAborted:
		return "ABORTED"
	default:
		return "UNKNOWN"
	}
}

// Error is every error Decide returns. Field names the offending request
// field for INVALID_ARGUMENT and RESOURCE_EXHAUSTED. Reason, when set, is a
// sentinel callers branch on with errors.Is. Limit, for a
// RESOURCE_EXHAUSTED a size limit refused, is its configuration key
// ("limits.maxRequestBytes").
type Error struct {
	Code    Code
	Field   string
	Message string
	Reason  error
	Limit   string
}

func (e *Error) Error() string {
	msg := e.Code.String()
	if e.Field != "" {
		msg += ": " + e.Field
	}
	return msg + ": " + e.Message
}

// Unwrap returns the reason sentinel.
func (e *Error) Unwrap() error { return e.Reason }

// Reasons Decide reports; test with errors.Is.
var (
	// ErrStaleToken: a worker result or TaskStarted names an attempt that
	// is not current: an older epoch, a cancelled or ended step execution,
	// a superseded attempt, a closed run (W2, E23). Nothing is committed.
	ErrStaleToken = errors.New("stale task token")
	// ErrFlowClosed: the run is not active.
	ErrFlowClosed = errors.New("flow is not running")
	// ErrTimerNotPending: the timer already fired, was never armed, or
	// belongs to a wait that is over (E19, and stale TimerFired commands).
	ErrTimerNotPending = errors.New("timer is not pending")
	// ErrTimerNotDue: TimerFired arrived before the timer's fire time.
	ErrTimerNotDue = errors.New("timer is not due yet")
	// ErrInvalidUserCode: an RPC's result is invalid (E22, E28); reported to
	// the caller as FAILED_PRECONDITION with INVALID_USER_FLOW_CODE detail.
	ErrInvalidUserCode = errors.New(string(ErrInvalidUserFlowCode))
	// ErrLockHeld: an attempt or RPC call needs a lock that another one
	// holds, or that an earlier waiting attempt is due to take (E30).
	ErrLockHeld = errors.New("lock held")
)

// CodeOf returns err's code, CodeUnknown when err is not an *Error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeUnknown
}

func invalidArg(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

func tooLarge(field string, size, limit int) *Error {
	return &Error{Code: CodeResourceExhausted, Field: field, Limit: "limits.maxPayloadBytes",
		Message: fmt.Sprintf("payload of %d bytes exceeds the limit of %d bytes (limits.maxPayloadBytes)", size, limit)}
}

func staleErr(format string, args ...any) *Error {
	return &Error{Code: CodeFailedPrecondition, Message: fmt.Sprintf(format, args...), Reason: ErrStaleToken}
}

func closedErr(st *FlowState) *Error {
	return &Error{Code: CodeFailedPrecondition, Reason: ErrFlowClosed,
		Message: fmt.Sprintf("flow %q run %s is not running (%s)", st.FlowID, st.RunID, st.Status)}
}

func notFound(flowID string) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("flow %q not found", flowID)}
}
