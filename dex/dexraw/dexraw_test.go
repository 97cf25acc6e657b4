package dexraw_test

import (
	"context"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dexraw"
	"github.com/dexzd/dexzd/dex/dextest"
	"github.com/dexzd/dexzd/examples/flows"
)

// The escape hatch returns the API's messages for a waiting flow: its full
// live state with the stored Wait, and its history events.
//
// Covers: E26
func TestFlowStateAndHistory_AreTheAPIMessages(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, flows.ApprovalFlow)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c := env.Client()
	if _, err := c.StartFlow(ctx, flows.ApprovalFlow, "req-raw", flows.Request{ID: "raw", Amount: 1}); err != nil {
		t.Fatal(err)
	}
	var waiting *dexpb.StepExecutionState
	for waiting == nil {
		st, err := dexraw.FlowState(ctx, c, "req-raw")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.GetStepExecutions() {
			if s.GetPhase() == dexpb.StepPhase_STEP_PHASE_WAITING {
				waiting = s
			}
		}
		if waiting == nil {
			select {
			case <-ctx.Done():
				t.Fatal("no step execution waits")
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	if len(waiting.GetWait().GetTimers()) != 1 || waiting.GetWait().GetTimers()[0].GetConditionId() != flows.ApprovalTimeout.ID() {
		t.Errorf("stored Wait timers = %v; want the approval timeout", waiting.GetWait().GetTimers())
	}
	h, err := dexraw.History(ctx, c, "req-raw", dex.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GetEvents()) == 0 || h.GetEvents()[0].GetFlowStarted().GetFlowType() != "approval" || h.GetRunId() == "" {
		t.Errorf("history = %v; want FlowStarted of an approval first", h)
	}
}

// Value and EncodedValue convert both ways; nil is the unset Value.
func TestValue_RoundTrips(t *testing.T) {
	t.Parallel()
	ev := &dexpb.EncodedValue{Encoding: dex.EncodingJSON, Type: "int", Data: []byte("42")}
	v := dexraw.Value(ev)
	var n int
	if err := v.Decode(&n); err != nil || n != 42 || v.Type() != "int" {
		t.Errorf("Value(%v) decodes to %d, %v (type %q)", ev, n, err, v.Type())
	}
	if dexraw.EncodedValue(v) != ev {
		t.Error("EncodedValue(Value(ev)) is not ev")
	}
	if dexraw.Value(nil).IsSet() || dexraw.EncodedValue(dex.Value{}) != nil {
		t.Error("nil is not the unset Value")
	}
}
