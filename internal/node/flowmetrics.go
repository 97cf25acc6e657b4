package node

import (
	"bufio"
	"fmt"
	"sync/atomic"

	"github.com/dexzd/dexzd/internal/engine"
)

// The flow metrics count the engine records of the batches this process
// writes: applyBatch, which decodes them anyway, counts each record into
// the batch's flowCounts (a few array increments, no allocation, no
// decoding of its own), and Core.OnDurable adds the batch's counts to the
// Metrics. Replay and the hot standby apply batches too but do not count:
// the counters say what this process did while it was the active one.

// Close statuses: the label values of dexzd_flows_completed_total, one per
// terminal engine.Status (E8). other catches a status this list does not
// know yet; it is exported only when not 0.
const (
	closeCompleted = iota
	closeFailed
	closeCanceled
	closeTerminated
	closeOther
	numCloseStatuses
)

var closeStatusLabels = [numCloseStatuses]string{"completed", "failed", "canceled", "terminated", "other"}

func closeIndex(s engine.Status) int {
	switch s {
	case engine.StatusCompleted:
		return closeCompleted
	case engine.StatusFailed:
		return closeFailed
	case engine.StatusCanceled:
		return closeCanceled
	case engine.StatusTerminated:
		return closeTerminated
	default:
		return closeOther
	}
}

// Attempt outcomes: the label values of dexzd_step_attempts_total. An
// attempt of a step method (WaitFor or Execute; RPCs are not steps) ends
// with a WaitForCompleted or ExecuteCompleted record (succeeded) or an
// AttemptFailed record, whose failure type tells a timeout (E9, W3) and an
// attempt failed on takeover (T2) from the worker's own failures.
const (
	attemptSucceeded = iota
	attemptFailed
	attemptTimedOut
	attemptNotCompleted
	numAttemptOutcomes
)

var attemptOutcomeLabels = [numAttemptOutcomes]string{"succeeded", "failed", "timed_out", "not_completed"}

// flowCounts are the flow metrics of one batch.
type flowCounts struct {
	started  uint32
	closed   [numCloseStatuses]uint32
	attempts [numAttemptOutcomes]uint32
}

// count counts one applied record.
func (c *flowCounts) count(b engine.RecordBody) {
	switch b := b.(type) {
	case engine.FlowStarted:
		c.started++
	case engine.FlowClosed:
		c.closed[closeIndex(b.Status)]++
	case engine.WaitForCompleted, engine.ExecuteCompleted:
		c.attempts[attemptSucceeded]++
	case engine.AttemptFailed:
		switch b.Failure.Type {
		case engine.FailureTimeout:
			c.attempts[attemptTimedOut]++
		case engine.FailureNotCompleted:
			c.attempts[attemptNotCompleted]++
		default:
			c.attempts[attemptFailed]++
		}
	}
}

// flowMetrics are the process's flow counters.
type flowMetrics struct {
	started  atomic.Uint64
	closed   [numCloseStatuses]atomic.Uint64
	attempts [numAttemptOutcomes]atomic.Uint64
}

// countFlows adds one durable batch's counts.
func (m *Metrics) countFlows(c *flowCounts) {
	if m == nil {
		return
	}
	if c.started > 0 {
		m.flows.started.Add(uint64(c.started))
	}
	for i, n := range c.closed {
		if n > 0 {
			m.flows.closed[i].Add(uint64(n))
		}
	}
	for i, n := range c.attempts {
		if n > 0 {
			m.flows.attempts[i].Add(uint64(n))
		}
	}
}

func (f *flowMetrics) writeText(bw *bufio.Writer) {
	const started = "dexzd_flows_started_total"
	fmt.Fprintf(bw, "# HELP %s Flow runs this process started.\n# TYPE %s counter\n%s %d\n",
		started, started, started, f.started.Load())
	const closed = "dexzd_flows_completed_total"
	fmt.Fprintf(bw, "# HELP %s Flow runs this process closed, by terminal status.\n# TYPE %s counter\n", closed, closed)
	for i, label := range closeStatusLabels {
		if n := f.closed[i].Load(); n > 0 || i != closeOther {
			fmt.Fprintf(bw, "%s{status=%q} %d\n", closed, label, n)
		}
	}
	const attempts = "dexzd_step_attempts_total"
	fmt.Fprintf(bw, "# HELP %s Step attempts (WaitFor and Execute) that ended while this process was active, by outcome.\n# TYPE %s counter\n",
		attempts, attempts)
	for i, label := range attemptOutcomeLabels {
		fmt.Fprintf(bw, "%s{outcome=%q} %d\n", attempts, label, f.attempts[i].Load())
	}
}
