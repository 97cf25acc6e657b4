package server

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// A step down (A3-A8) is carried out by the node's lifecycle; the server
// only checks the request, hands it over and reports the outcome. The
// node installs a StepDownFunc on the server of each serving instance
// (SetStepDown) and marks that server, and the server of the hold-off
// that follows, as stepping down (SetSteppingDown).

// LeaseHolderAfter says who holds the lease when a step down answers
// (A12).
type LeaseHolderAfter int

// Lease holders after a step down.
const (
	// TakenOverByAnotherProcess: another process acquired the lease.
	TakenOverByAnotherProcess LeaseHolderAfter = iota + 1
	// TakenBackByThisProcess: nobody took over during the hold-off, so
	// this process took the lease back with a new epoch.
	TakenBackByThisProcess
	// HolderUnknown: the process could not tell; UnknownDetail says why.
	HolderUnknown
)

// StepDownOutcome is the result of a completed step down (A12).
type StepDownOutcome struct {
	NodeID string
	// ReleasedEpoch is the epoch of the lease the process released.
	ReleasedEpoch uint64
	// HoldOff is standby.stepDownHoldOff: how long the process waited
	// before competing for the lease again.
	HoldOff       time.Duration
	Holder        LeaseHolderAfter
	UnknownDetail string
	// ActiveEpoch and ActiveProcessID name the lease's holder now; zero
	// and empty when unknown.
	ActiveEpoch     uint64
	ActiveProcessID string
}

// ErrStepDownInProgress: a step down of the process is already in
// progress (FAILED_PRECONDITION).
var ErrStepDownInProgress = errors.New("a step down is already in progress")

// StepDownFunc steps the serving instance down and waits for the outcome
// (A3, A5, A7). It answers a second request while one is in progress with
// an error wrapping ErrStepDownInProgress. Its other errors are reported
// as INTERNAL. If ctx ends first it returns ctx's error; the step down
// goes on.
type StepDownFunc func(ctx context.Context) (StepDownOutcome, error)

// stepDownState is the step down part of Server.
type stepDownState struct {
	fn       atomic.Pointer[StepDownFunc]
	stepping atomic.Pointer[string]
}

// SetStepDown installs fn as the serving instance's step down; without
// one StepDown answers UNIMPLEMENTED once its precondition matches.
func (s *Server) SetStepDown(fn StepDownFunc) {
	if fn == nil {
		s.stepDown.fn.Store(nil)
		return
	}
	s.stepDown.fn.Store(&fn)
}

// SetSteppingDown marks the server as belonging to a process whose step
// down or hold-off is in progress: Describe and StepDown answer
// FAILED_PRECONDITION (A8), and public calls answer UNAVAILABLE with msg,
// which should say that the process stepped down and to retry on the
// active process. Empty clears the mark.
func (s *Server) SetSteppingDown(msg string) {
	if msg == "" {
		s.stepDown.stepping.Store(nil)
		return
	}
	s.stepDown.stepping.Store(&msg)
}

// steppingDown returns the stepping-down message, if the mark is set.
func (s *Server) steppingDown() (string, bool) {
	if m := s.stepDown.stepping.Load(); m != nil {
		return *m, true
	}
	return "", false
}
