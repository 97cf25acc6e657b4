package node

import (
	"bufio"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/dexzd/dexzd/internal/serving"
)

// The flow metrics are the serving core's flow counts
// (serving.FlowCounts) of every batch it makes durable, added up over the
// process's life: Core.OnDurable hands each batch's counts to
// Metrics.CountFlows (serving.CoreConfig.Metrics).

// flowMetrics are the process's flow counters.
type flowMetrics struct {
	started  atomic.Uint64
	closed   [serving.NumCloseStatuses]atomic.Uint64
	attempts [serving.NumAttemptOutcomes]atomic.Uint64
}

var _ serving.FlowCounter = (*Metrics)(nil)

// CountFlows adds one durable batch's counts; a nil *Metrics records
// nothing.
func (m *Metrics) CountFlows(c *serving.FlowCounts) {
	if m == nil {
		return
	}
	if c.Started > 0 {
		m.flows.started.Add(uint64(c.Started))
	}
	for i, n := range c.Closed {
		if n > 0 {
			m.flows.closed[i].Add(uint64(n))
		}
	}
	for i, n := range c.Attempts {
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
	for i, label := range serving.CloseStatusLabels {
		if n := f.closed[i].Load(); n > 0 || i != serving.CloseOther {
			fmt.Fprintf(bw, "%s{status=%q} %d\n", closed, label, n)
		}
	}
	const attempts = "dexzd_step_attempts_total"
	fmt.Fprintf(bw, "# HELP %s Step attempts (WaitFor and Execute) that ended while this process was active, by outcome.\n# TYPE %s counter\n",
		attempts, attempts)
	for i, label := range serving.AttemptOutcomeLabels {
		fmt.Fprintf(bw, "%s{outcome=%q} %d\n", attempts, label, f.attempts[i].Load())
	}
}

// CountRefused implements serving.FlowCounter; a nil *Metrics records
// nothing.
func (m *Metrics) CountRefused(limit string) {
	if m == nil {
		return
	}
	if i := slices.Index(serving.RefusalLimits, limit); i >= 0 {
		m.refused[i].Add(1)
	}
}
