package metrics

import (
	"strings"
	"testing"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/serving"
)

// Each record kind lands in its counter; records that end no attempt and
// close no run count nothing.
func TestFlowCounts_CountsRecordKinds(t *testing.T) {
	t.Parallel()
	var c serving.FlowCounts
	for _, b := range []engine.RecordBody{
		engine.FlowStarted{}, engine.FlowStarted{},
		engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: engine.StatusCompleted}},
		engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: engine.StatusFailed}},
		engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: engine.StatusCanceled}},
		engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: engine.StatusTerminated}},
		engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: "SOMETHING_NEW"}},
		engine.WaitForCompleted{}, engine.ExecuteCompleted{}, engine.ExecuteCompleted{},
		engine.AttemptFailed{Failure: engine.Failure{Type: "MyError"}},
		engine.AttemptFailed{Failure: engine.Failure{Type: engine.FailureTimeout}},
		engine.AttemptFailed{Failure: engine.Failure{Type: engine.FailureNotCompleted}},
		engine.AttemptFailed{Failure: engine.Failure{Type: engine.FailureNotCompleted}},
		engine.StepCreated{}, engine.AttemptScheduled{}, engine.AttemptStarted{}, engine.RPCCompleted{},
		engine.StepEnded{}, engine.ChannelPublished{}, engine.AttributesSet{}, engine.DefinitionSet{},
		engine.ConditionSatisfied{}, engine.WaitTimerFired{},
	} {
		c.Count(b)
	}
	want := serving.FlowCounts{
		Started:  2,
		Closed:   [serving.NumCloseStatuses]uint32{serving.CloseCompleted: 1, serving.CloseFailed: 1, serving.CloseCanceled: 1, serving.CloseTerminated: 1, serving.CloseOther: 1},
		Attempts: [serving.NumAttemptOutcomes]uint32{serving.AttemptSucceeded: 3, serving.AttemptFailed: 1, serving.AttemptTimedOut: 1, serving.AttemptNotCompleted: 2},
	}
	if c != want {
		t.Fatalf("counts = %+v, want %+v", c, want)
	}
	m := New()
	m.CountFlows(&c)
	m.CountFlows(&c)
	var nilMetrics *Metrics
	nilMetrics.CountFlows(&c) // a nil *Metrics records nothing
	text := metricsText(t, m)
	for _, line := range []string{
		"dexzd_flows_started_total 4\n",
		`dexzd_flows_completed_total{status="completed"} 2` + "\n",
		`dexzd_flows_completed_total{status="terminated"} 2` + "\n",
		`dexzd_flows_completed_total{status="other"} 2` + "\n",
		`dexzd_step_attempts_total{outcome="succeeded"} 6` + "\n",
		`dexzd_step_attempts_total{outcome="not_completed"} 4` + "\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("metrics lack %q", line)
		}
	}
}
