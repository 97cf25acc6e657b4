package dex

import (
	"errors"
	"fmt"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// StepOptions are a step's options. Every field left at its
// zero value inherits: a movement's options win over the step's (its
// Options method), which win over the flow's Defaults, which win over the
// server's defaults, field by field.
type StepOptions struct {
	// WaitFor holds the options of the step's WaitFor.
	WaitFor MethodOptions
	// Execute holds the options of the step's Execute.
	Execute MethodOptions
	// WaitForFailure applies when the WaitFor exhausts its retries:
	// WaitForFailFlow (the server default) or WaitForProceed, which runs
	// Execute with Results.WaitForError set.
	WaitForFailure WaitForFailurePolicy
	// ExecuteFailure applies when the Execute exhausts its retries.
	// Leave it unset when Recovery is set.
	ExecuteFailure ExecuteFailurePolicy
	// Recovery is the step scheduled with the same input when the Execute
	// exhausts its retries: dex.Ref[Refund](). Setting it implies
	// ExecuteProceedToRecovery. The flow must declare the step; the worker
	// checks that when it starts.
	Recovery StepRef
}

// MethodOptions are the options of one handler, WaitFor or Execute.
type MethodOptions struct {
	// AttemptTimeout bounds one attempt (server default 30 s).
	AttemptTimeout time.Duration
	// Retry says how failed attempts are retried; nil inherits every field.
	Retry *RetryPolicy
	// Durability says when an attempt's start is made durable.
	Durability Durability
	// Locks is the handler's lock set (E30): the attributes it reads and
	// writes exclusively of every other handler and RPC that locks them.
	// An attempt is handed to a worker only when it holds every lock (it
	// waits meanwhile, consuming no attempt) and reads the attributes
	// under them; the locks are released when its result commits, it
	// fails or it times out. A handler with locks is always
	// DurabilitySync. Nil inherits.
	Locks []AttributeDef
	// HeartbeatTimeout, when set, fails an attempt whose worker sent no
	// heartbeat for that long, with error type "HEARTBEAT", and retries
	// it by the retry policy (E38): a crashed or cut-off worker's attempt
	// is retried after this, not after AttemptTimeout. The worker
	// heartbeats every running attempt by itself, at least three times
	// per timeout; the handler adds progress with Context.Heartbeat.
	// NoHeartbeat (-1) sets "none" explicitly, overriding an inherited one.
	HeartbeatTimeout time.Duration
}

// NoHeartbeat sets MethodOptions.HeartbeatTimeout to "none" explicitly.
const NoHeartbeat = -1

// RetryPolicy says when a failed or timed-out attempt is retried. The
// delay before attempt k+1 is InitialInterval * BackoffCoefficient^(k-1),
// capped at MaximumInterval; a worker error made with RetryAfter replaces it.
// Zero fields inherit (server defaults: 1 s, 2, 100 s, unlimited, no
// bound). The server refuses an InitialInterval or MaximumInterval above
// 365 days (INVALID_ARGUMENT naming the field) and caps every delay,
// RetryAfter's included, at 365 days.
type RetryPolicy struct {
	InitialInterval    time.Duration
	BackoffCoefficient float64
	MaximumInterval    time.Duration
	// MaximumAttempts counts the first attempt. Unlimited (-1) sets
	// "unlimited" explicitly, overriding an inherited limit.
	MaximumAttempts int
	// MaximumTotalDuration bounds the whole retrying from the first attempt.
	// Unlimited (-1) sets "no bound" explicitly.
	MaximumTotalDuration time.Duration
}

// Unlimited sets RetryPolicy.MaximumAttempts or MaximumTotalDuration to "no
// limit" explicitly, overriding an inherited limit.
const Unlimited = -1

// isZero reports whether nothing is set.
func (o StepOptions) isZero() bool {
	return o.WaitFor.isZero() && o.Execute.isZero() && o.WaitForFailure == 0 && o.ExecuteFailure == 0 && o.Recovery.name == ""
}

func (o MethodOptions) isZero() bool {
	return o.AttemptTimeout == 0 && o.Retry == nil && o.Durability == 0 && len(o.Locks) == 0 && o.HeartbeatTimeout == 0
}

// validate checks the values; it does not check that Recovery is declared.
func (o StepOptions) validate() []error {
	var errs []error
	for _, m := range []struct {
		name string
		o    MethodOptions
	}{{"WaitFor", o.WaitFor}, {"Execute", o.Execute}} {
		if m.o.AttemptTimeout < 0 {
			errs = append(errs, fmt.Errorf("%s.AttemptTimeout is negative", m.name))
		}
		if m.o.HeartbeatTimeout < NoHeartbeat {
			errs = append(errs, fmt.Errorf("%s.HeartbeatTimeout is negative", m.name))
		}
		if r := m.o.Retry; r != nil {
			if r.InitialInterval < 0 || r.MaximumInterval < 0 {
				errs = append(errs, fmt.Errorf("%s.Retry: negative interval", m.name))
			}
			if r.BackoffCoefficient != 0 && r.BackoffCoefficient < 1 {
				errs = append(errs, fmt.Errorf("%s.Retry.BackoffCoefficient %v is below 1", m.name, r.BackoffCoefficient))
			}
			if r.MaximumAttempts < Unlimited {
				errs = append(errs, fmt.Errorf("%s.Retry.MaximumAttempts %d is invalid", m.name, r.MaximumAttempts))
			}
			if r.MaximumTotalDuration < Unlimited {
				errs = append(errs, fmt.Errorf("%s.Retry.MaximumTotalDuration is negative", m.name))
			}
		}
	}
	if o.ExecuteFailure == ExecuteProceedToRecovery && o.Recovery.name == "" {
		errs = append(errs, errors.New("ExecuteFailure is ExecuteProceedToRecovery but Recovery is not set"))
	}
	if o.ExecuteFailure == ExecuteFailFlow && o.Recovery.name != "" {
		errs = append(errs, fmt.Errorf("ExecuteFailure is ExecuteFailFlow but Recovery is %q", o.Recovery.name))
	}
	return errs
}

// proto converts the options; nil when nothing is set.
func (o StepOptions) proto() *dexpb.StepOptions {
	if o.isZero() {
		return nil
	}
	p := &dexpb.StepOptions{
		WaitFor:                 o.WaitFor.proto(),
		Execute:                 o.Execute.proto(),
		WaitForFailurePolicy:    dexpb.WaitForFailurePolicy(o.WaitForFailure),
		ExecuteFailurePolicy:    dexpb.ExecuteFailurePolicy(o.ExecuteFailure),
		ExecuteRecoveryStepType: o.Recovery.name,
	}
	if o.Recovery.name != "" && p.ExecuteFailurePolicy == 0 {
		p.ExecuteFailurePolicy = dexpb.ExecuteFailurePolicy(ExecuteProceedToRecovery)
	}
	return p
}

func (o MethodOptions) proto() *dexpb.StepMethodOptions {
	if o.isZero() {
		return nil
	}
	p := &dexpb.StepMethodOptions{Durability: dexpb.AttemptDurability(o.Durability), Locks: lockNames(o.Locks)}
	if o.AttemptTimeout > 0 {
		p.AttemptTimeout = durationpb.New(o.AttemptTimeout)
	}
	switch {
	case o.HeartbeatTimeout == NoHeartbeat:
		p.HeartbeatTimeout = durationpb.New(0)
	case o.HeartbeatTimeout > 0:
		p.HeartbeatTimeout = durationpb.New(o.HeartbeatTimeout)
	}
	if r := o.Retry; r != nil {
		p.RetryPolicy = r.proto()
	}
	return p
}

func (r *RetryPolicy) proto() *dexpb.RetryPolicy {
	rp := &dexpb.RetryPolicy{}
	if r.InitialInterval > 0 {
		rp.InitialInterval = durationpb.New(r.InitialInterval)
	}
	if r.BackoffCoefficient != 0 {
		rp.BackoffCoefficient = proto.Float64(r.BackoffCoefficient)
	}
	if r.MaximumInterval > 0 {
		rp.MaximumInterval = durationpb.New(r.MaximumInterval)
	}
	switch {
	case r.MaximumAttempts == Unlimited:
		rp.MaximumAttempts = proto.Uint32(0)
	case r.MaximumAttempts > 0:
		rp.MaximumAttempts = proto.Uint32(uint32(r.MaximumAttempts))
	}
	switch {
	case r.MaximumTotalDuration == Unlimited:
		rp.MaximumTotalDuration = durationpb.New(0)
	case r.MaximumTotalDuration > 0:
		rp.MaximumTotalDuration = durationpb.New(r.MaximumTotalDuration)
	}
	return rp
}
