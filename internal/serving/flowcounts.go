package serving

import "github.com/dexzd/dexzd/internal/engine"

// The flow counts are what the flow metrics count (node's
// dexzd_flows_started_total, dexzd_flows_completed_total and
// dexzd_step_attempts_total): the engine records of the batches this core
// writes. applyBatch, which decodes them anyway, counts each record into
// the batch's FlowCounts (a few array increments, no allocation, no
// decoding of its own), and Core.OnDurable hands the batch's counts to
// CoreConfig.Metrics. Replay and the hot standby apply batches too but do
// not count: the counters say what this process did while it was the
// active one.

// Close statuses: the indexes of FlowCounts.Closed and of
// CloseStatusLabels, one per terminal engine.Status (E8). CloseOther
// catches a status this list does not know yet.
const (
	CloseCompleted = iota
	CloseFailed
	CloseCanceled
	CloseTerminated
	CloseOther
	NumCloseStatuses
)

// CloseStatusLabels are the metric label values of the close statuses.
var CloseStatusLabels = [NumCloseStatuses]string{"completed", "failed", "canceled", "terminated", "other"}

func closeIndex(s engine.Status) int {
	switch s {
	case engine.StatusCompleted:
		return CloseCompleted
	case engine.StatusFailed:
		return CloseFailed
	case engine.StatusCanceled:
		return CloseCanceled
	case engine.StatusTerminated:
		return CloseTerminated
	default:
		return CloseOther
	}
}

// Attempt outcomes: the indexes of FlowCounts.Attempts and of
// AttemptOutcomeLabels. An attempt of a step method (WaitFor or Execute;
// RPCs are not steps) ends with a WaitForCompleted or ExecuteCompleted
// record (succeeded) or an AttemptFailed record, whose failure type tells
// a timeout (E9, W3) and an attempt failed on takeover (T2) from the
// worker's own failures.
const (
	AttemptSucceeded = iota
	AttemptFailed
	AttemptTimedOut
	AttemptNotCompleted
	NumAttemptOutcomes
)

// AttemptOutcomeLabels are the metric label values of the attempt outcomes.
var AttemptOutcomeLabels = [NumAttemptOutcomes]string{"succeeded", "failed", "timed_out", "not_completed"}

// FlowCounts are the flow counts of one batch.
type FlowCounts struct {
	Started  uint32
	Closed   [NumCloseStatuses]uint32
	Attempts [NumAttemptOutcomes]uint32
}

// Count counts one applied record.
func (c *FlowCounts) Count(b engine.RecordBody) {
	switch b := b.(type) {
	case engine.FlowStarted:
		if b.ContinuedFrom == "" { // a continuation goes on with the same flow (E37)
			c.Started++
		}
	case engine.FlowClosed:
		c.Closed[closeIndex(b.Status)]++
	case engine.WaitForCompleted, engine.ExecuteCompleted:
		c.Attempts[AttemptSucceeded]++
	case engine.AttemptFailed:
		switch b.Failure.Type {
		case engine.FailureTimeout:
			c.Attempts[AttemptTimedOut]++
		case engine.FailureNotCompleted:
			c.Attempts[AttemptNotCompleted]++
		default:
			c.Attempts[AttemptFailed]++
		}
	}
}

// FlowCounter receives the flow counts of every batch the core makes
// durable (metrics.Metrics). CountFlows is called on the writer goroutine,
// once per batch, in sequence order; it must not block and must not keep c.
type FlowCounter interface {
	CountFlows(c *FlowCounts)
	// CountRefused counts one call refused as overloaded at limit (its
	// configuration key, one of RefusalLimits).
	CountRefused(limit string)
}

// RefusalLimits are the configuration keys an overload refusal names.
var RefusalLimits = []string{"limits.maxPendingRequests", "limits.maxPendingBytes", "limits.maxQueuedTasks", "limits.maxFlowWaiters"}
