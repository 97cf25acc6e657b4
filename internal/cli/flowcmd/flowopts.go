package flowcmd

import (
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/cli/session"
)

// flowOptions are flow start's flow-level options (E34).
type flowOptions struct {
	startDelay                                    time.Duration
	retryMaxAttempts                              int
	retryInitial, retryMaxInterval, retryMaxTotal time.Duration
	handler                                       string
	handlerDeadline                               time.Duration
}

func addFlowOptionFlags(fs *pflag.FlagSet, o *flowOptions) {
	fs.DurationVar(&o.startDelay, "start-delay", 0, "create the flow now and run its start step after `DURATION` (durable; the timeout counts from then)")
	fs.IntVar(&o.retryMaxAttempts, "retry-max-attempts", 0, "retry the flow when it fails, up to `N` runs in all (0: no flow retry unless another --retry flag is given, then unlimited)")
	fs.DurationVar(&o.retryInitial, "retry-initial", 0, "the flow retry's first backoff, `DURATION` (default 1s, doubling)")
	fs.DurationVar(&o.retryMaxInterval, "retry-max-interval", 0, "cap the flow retry's backoff at `DURATION` (default 100s)")
	fs.DurationVar(&o.retryMaxTotal, "retry-max-total", 0, "start no flow retry later than `DURATION` after the first run's start")
	fs.StringVar(&o.handler, "timeout-handler", "", "on --timeout-after run the step `STEP_TYPE`, which decides how the flow closes (timeout policy handler)")
	fs.DurationVar(&o.handlerDeadline, "timeout-handler-deadline", 0, "fail the flow if the timeout handler has not closed it `DURATION` after the timeout (default 1m)")
}

// apply sets the flow-level options on req.
func (o *flowOptions) apply(req *dexpb.StartFlowRequest) error {
	switch {
	case o.startDelay < 0:
		return session.Usagef("--start-delay must not be negative")
	case o.startDelay > 0:
		req.StartDelay = durationpb.New(o.startDelay)
	}
	if o.retryMaxAttempts < 0 || o.retryInitial < 0 || o.retryMaxInterval < 0 || o.retryMaxTotal < 0 {
		return session.Usagef("the --retry flags must not be negative")
	}
	if o.retryMaxAttempts > 0 || o.retryInitial > 0 || o.retryMaxInterval > 0 || o.retryMaxTotal > 0 {
		rp := &dexpb.RetryPolicy{}
		if o.retryMaxAttempts > 0 {
			n := uint32(o.retryMaxAttempts)
			rp.MaximumAttempts = &n
		}
		if o.retryInitial > 0 {
			rp.InitialInterval = durationpb.New(o.retryInitial)
		}
		if o.retryMaxInterval > 0 {
			rp.MaximumInterval = durationpb.New(o.retryMaxInterval)
		}
		if o.retryMaxTotal > 0 {
			rp.MaximumTotalDuration = durationpb.New(o.retryMaxTotal)
		}
		req.RetryPolicy = rp
	}
	switch {
	case o.handler == "" && o.handlerDeadline != 0:
		return session.Usagef("--timeout-handler-deadline needs --timeout-handler")
	case o.handler == "":
		return nil
	case req.FlowTimeout == nil:
		return session.Usagef("--timeout-handler needs --timeout-after")
	case o.handlerDeadline < 0:
		return session.Usagef("--timeout-handler-deadline must not be negative")
	}
	req.FlowTimeoutPolicy = dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_HANDLER
	req.TimeoutHandler = &dexpb.TimeoutHandler{StepType: o.handler}
	if o.handlerDeadline > 0 {
		req.TimeoutHandler.Deadline = durationpb.New(o.handlerDeadline)
	}
	return nil
}
