package localstore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
)

var base = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

var eng = engine.New(engine.Config{})

func orderDef() *engine.FlowDefinition {
	return &engine.FlowDefinition{Type: "order", Steps: map[string]engine.StepDef{
		"Reserve": {}, "Await": {HasWaitFor: true}, "Charge": {},
	}, Attributes: []string{"status", "customer"}, Channels: []string{"approve"}}
}

// do decides cmd against st and applies the records it returns. st is
// changed in place (except by a new run); use the returned state.
func do(t testing.TB, st *engine.FlowState, cmd engine.Command, now time.Time) *engine.FlowState {
	t.Helper()
	recs, err := eng.Decide(st, cmd, now)
	if err != nil {
		t.Fatalf("%T: %v", cmd, err)
	}
	for _, r := range recs {
		st, _ = engine.Apply(st, r)
	}
	return st
}

// start starts a run of an "order"-like flow (with a start step) at `at`.
func start(t testing.TB, prev *engine.FlowState, flowID, flowType, runID string, at time.Time) *engine.FlowState {
	t.Helper()
	def := orderDef()
	def.Type = flowType
	return do(t, prev, engine.StartFlow{FlowID: flowID, FlowType: flowType, RunID: runID,
		StartStep: "Reserve", Input: engine.Value{Type: "json", Data: []byte(`{"order":42}`)},
		Definition: def, Timeout: time.Hour, IDReusePolicy: engine.ReuseAllowIfNotRunning}, at)
}

// stop closes a running flow with the given kind.
func stop(t testing.TB, st *engine.FlowState, kind engine.StopKind, at time.Time) *engine.FlowState {
	t.Helper()
	return do(t, st.Clone(), engine.StopFlow{FlowID: st.FlowID, Kind: kind, Reason: "test"}, at)
}

func tok(st *engine.FlowState, step string, epoch uint64) engine.Token {
	s := st.Step(step)
	return engine.Token{Epoch: epoch, FlowID: st.FlowID, RunID: st.RunID, StepExecID: step,
		Method: s.Attempt.Method, Attempt: s.Attempt.Number}
}

// richFlow builds a running flow of realistic size (a few KB): steps in
// several phases, a Wait with a timer, attributes, queued messages and
// history.
func richFlow(t testing.TB, flowID string, at time.Time) *engine.FlowState {
	t.Helper()
	st := start(t, nil, flowID, "order", "run-"+flowID, at)
	payload := engine.Value{Type: "json:main.Order", Data: bytes.Repeat([]byte("x"), 256)}
	st = do(t, st, engine.TaskStarted{Token: tok(st, "Reserve-1", 1)}, at)
	st = do(t, st, engine.ExecuteResult{Token: tok(st, "Reserve-1", 1), Decision: engine.Decision{
		Kind: engine.DecideMovements, Movements: []engine.Movement{
			{StepType: "Await", Input: payload}, {StepType: "Charge", Input: payload}}}}, at)
	st = do(t, st, engine.TaskStarted{Token: tok(st, "Await-1", 1)}, at)
	d := 10 * time.Minute
	st = do(t, st, engine.WaitForResult{Token: tok(st, "Await-1", 1), Wait: &engine.Wait{Mode: engine.AnyOf,
		Conditions: []engine.Condition{{Timer: &d},
			{Channel: &engine.ChannelCondition{Channel: "approve", Bound: engine.ForOne}}}}}, at)
	st = do(t, st, engine.TaskStarted{Token: tok(st, "Charge-1", 1)}, at)
	st = do(t, st, engine.SetAttributes{FlowID: flowID, Attributes: []engine.AttributeWrite{
		{Name: "status", Value: payload}, {Name: "customer", Value: payload}}}, at)
	return st
}

// putAll applies one batch that puts the states in order.
func putAll(t testing.TB, s *Store, seq uint64, states ...*engine.FlowState) {
	t.Helper()
	err := s.Apply(seq, func(tx *Tx) error {
		for _, st := range states {
			if err := tx.PutFlow(st); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("apply %d: %v", seq, err)
	}
}

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// sameState fails unless a and b encode to the same bytes.
func sameState(t testing.TB, got, want *engine.FlowState) {
	t.Helper()
	g, err := engine.MarshalState(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.MarshalState(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Fatalf("state differs:\n got %s\nwant %s", g, w)
	}
}

func mustAppliedAt(t testing.TB, s *Store, want uint64) {
	t.Helper()
	if got, ok := s.Applied(); !ok || got != want {
		t.Fatalf("Applied() = %d, %v; want %d, true", got, ok, want)
	}
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}

func summaryString(s engine.Summary) string {
	return fmt.Sprintf("%s/%s %s %s %s", s.FlowID, s.RunID, s.FlowType, s.Status, s.StartedAt.Format(time.RFC3339Nano))
}
