package server

import (
	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// flowOptionsIn converts a start's flow-level options (E34): the start
// delay, the flow retry policy and the timeout handler. The engine checks
// their values.
func flowOptionsIn(req *dexpb.StartFlowRequest, c *engine.StartFlow) error {
	delay, err := optDuration("startDelay", req.GetStartDelay())
	if err != nil {
		return err
	}
	if delay != nil {
		c.StartDelay = *delay
	}
	if c.Retry, err = retryIn("retryPolicy", req.GetRetryPolicy()); err != nil {
		return err
	}
	if h := req.GetTimeoutHandler(); h != nil {
		dl, err := optDuration("timeoutHandler.deadline", h.GetDeadline())
		if err != nil {
			return err
		}
		c.TimeoutHandler = &engine.TimeoutHandler{StepType: h.GetStepType()}
		if dl != nil {
			c.TimeoutHandler.Deadline = *dl
		}
	}
	return nil
}
