package dex

import (
	"errors"
	"fmt"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Flow-level start options (E34): a start delay, a flow retry policy and
// a timeout handler step.

type flowOptions struct {
	startDelay      time.Duration
	retry           *RetryPolicy
	handler         StepRef
	handlerDeadline time.Duration
	handlerSet      bool
}

// WithStartDelay creates the flow now and runs its start step after d: the
// flow is RUNNING at once (its attributes readable, RPCs accepted), and
// the delay is durable (a restart or a failover during it still runs the
// step at the right time). The flow timeout counts from the end of the
// delay. The flow needs a start step; d is at most 365 days.
func WithStartDelay(d time.Duration) StartOption {
	return startFunc(func(o *startOptions) { o.startDelay = d })
}

// WithFlowRetry retries the flow when it fails: a run that closes FAILED
// by itself (a step out of retries, a FailFlow decision, a FAIL flow
// timeout, a timeout handler that fails or misses its deadline) starts a
// new run of the same flow ID with the same input, attributes and start
// options, its start step delayed by the policy's backoff. MaximumAttempts
// counts the runs, MaximumTotalDuration bounds the time from the first
// run's start; unset fields take the step retry defaults (1 s, x2, capped
// at 100 s, unlimited). A StopFlow is never retried, nor a CANCEL flow
// timeout. WaitForFlow without WithRunID follows the retries to the last
// run.
func WithFlowRetry(p RetryPolicy) StartOption {
	return startFunc(func(o *startOptions) { o.retry = &p })
}

// WithTimeoutHandler bounds the flow by timeout and runs the handler step
// when it expires: the flow's active steps end, the handler (a step the
// flow declares, named with dex.Ref) runs its Execute with its input's
// zero value, and decides how the flow closes (complete, fail, or move on
// to steps that close it). Unless the flow closes within deadline of the
// timeout (0: one minute), it fails with FLOW_TIMEOUT.
//
//	dex.WithTimeoutHandler(24*time.Hour, dex.Ref[Escalate](), 5*time.Minute)
func WithTimeoutHandler(timeout time.Duration, handler StepRef, deadline time.Duration) StartOption {
	return startFunc(func(o *startOptions) {
		o.timeout, o.timeoutPolicy = timeout, TimeoutHandle
		o.handler, o.handlerDeadline, o.handlerSet = handler, deadline, true
	})
}

// apply sets the flow-level options on req, checking what the client can.
func (o flowOptions) apply(d *flowDef, req *dexpb.StartFlowRequest) error {
	if o.startDelay < 0 {
		return fmt.Errorf("start delay %v is negative", o.startDelay)
	}
	if o.startDelay > 0 {
		req.StartDelay = durationpb.New(o.startDelay)
	}
	if o.retry != nil {
		req.RetryPolicy = o.retry.proto()
	}
	if o.handlerSet {
		name := o.handler.Name()
		if name == "" {
			return errors.New("WithTimeoutHandler: name the handler step with dex.Ref")
		}
		if _, ok := d.steps[name]; !ok {
			return fmt.Errorf("WithTimeoutHandler: step %q is not a step of flow %q", name, d.name)
		}
		h := &dexpb.TimeoutHandler{StepType: name}
		if o.handlerDeadline > 0 {
			h.Deadline = durationpb.New(o.handlerDeadline)
		}
		req.TimeoutHandler = h
	}
	return nil
}
