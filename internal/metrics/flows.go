package metrics

import (
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

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

var (
	flowsStartedDesc = desc("dexzd_flows_started_total", "Flow runs this process started.")
	flowsClosedDesc  = desc("dexzd_flows_completed_total", "Flow runs this process closed, by terminal status.", "status")
	attemptsDesc     = desc("dexzd_step_attempts_total",
		"Step attempts (WaitFor and Execute) that ended while this process was active, by outcome.", "outcome")
)

func flowDescribe(ch chan<- *prometheus.Desc) {
	ch <- flowsStartedDesc
	ch <- flowsClosedDesc
	ch <- attemptsDesc
}

// collect exports the flow counters: every status but other (exported
// once it occurred) and every outcome, even while 0.
func (f *flowMetrics) collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(flowsStartedDesc, f.started.Load())
	for i, label := range serving.CloseStatusLabels {
		if n := f.closed[i].Load(); n > 0 || i != serving.CloseOther {
			counter(flowsClosedDesc, n, label)
		}
	}
	for i, label := range serving.AttemptOutcomeLabels {
		counter(attemptsDesc, f.attempts[i].Load(), label)
	}
}

// CountRefused implements serving.FlowCounter; a nil *Metrics records
// nothing.
func (m *Metrics) CountRefused(limit string) {
	if m == nil {
		return
	}
	if i := slices.Index(serving.RefusalLimits, limit); i >= 0 {
		m.refused[i].Inc()
	}
}
