package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

type noTaskInfo struct{}

func (noTaskInfo) WorkerOf(engine.Token) string { return "" }
func (noTaskInfo) HasWorker(string) bool        { return true }

// Covers: E11
// TestWaitForFailure_CarriesLastAttemptAndTime replays a step whose
// WaitFor fails twice under PROCEED (issue 10, item 6): the Execute task
// and the step's state must report the WaitFor failure with the attempt
// that failed last (2) and when it failed, not attempt 0 and no time.
func TestWaitForFailure_CarriesLastAttemptAndTime(t *testing.T) {
	t.Parallel()
	eng := engine.New(engine.Config{})
	two := 2
	def := &engine.FlowDefinition{Type: "order", Steps: map[string]engine.StepDef{"A": {HasWaitFor: true,
		Options: &engine.StepOptions{WaitFor: &engine.MethodOptions{Retry: &engine.RetryOptions{MaxAttempts: &two}},
			WaitForFailure: engine.Proceed}}}}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var st *engine.FlowState
	decide := func(cmd engine.Command, now time.Time) {
		t.Helper()
		recs, err := eng.Decide(st, cmd, now)
		if err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
		for _, r := range recs {
			st, _ = engine.Apply(st, r)
		}
	}
	decide(engine.StartFlow{FlowID: "f1", FlowType: "order", RunID: "r1", StartStep: "A", Definition: def}, t0)
	tok := func(m engine.Method, n int) engine.Token {
		return engine.Token{Epoch: 1, FlowID: "f1", RunID: "r1", StepExecID: "A-1", Method: m, Attempt: n}
	}
	decide(engine.TaskStarted{Token: tok(engine.MethodWaitFor, 1)}, t0)
	decide(engine.TaskFailed{Token: tok(engine.MethodWaitFor, 1), Failure: engine.Failure{Type: "Boom", Message: "first"}}, t0)
	t1 := t0.Add(1200 * time.Millisecond) // the backoff (1 s) with the most jitter (+20 %)
	decide(engine.TaskStarted{Token: tok(engine.MethodWaitFor, 2)}, t1)
	t2 := t1.Add(250 * time.Millisecond)
	decide(engine.TaskFailed{Token: tok(engine.MethodWaitFor, 2), Failure: engine.Failure{Type: "Boom", Message: "second"}}, t2)

	check := func(where string, f *dexpb.AttemptFailure) {
		t.Helper()
		if f == nil {
			t.Fatalf("%s: no WaitFor failure", where)
		}
		if f.GetAttempt() != 2 || !f.GetTime().AsTime().Equal(t2) || f.GetMessage() != "second" ||
			f.GetMethod() != dexpb.TaskKind_TASK_KIND_WAIT_FOR {
			t.Errorf("%s: WaitFor failure = attempt %d at %v (%q, %v); want attempt 2 at %v (\"second\", WAIT_FOR)",
				where, f.GetAttempt(), f.GetTime().AsTime(), f.GetMessage(), f.GetMethod(), t2)
		}
	}
	s := st.Step("A-1")
	if s == nil || s.Phase != engine.PhaseExecute {
		t.Fatalf("step A-1 = %+v; want it in EXECUTE", s)
	}
	step := stepOut(st, s, noTaskInfo{}, t2)
	if !step.GetWaitForFailed() {
		t.Fatal("step state: waitForFailed is false")
	}
	check("step state", step.GetWaitForFailure())

	decide(engine.TaskStarted{Token: tok(engine.MethodExecute, 1)}, t2)
	task, err := st.Task(tok(engine.MethodExecute, 1))
	if err != nil {
		t.Fatal(err)
	}
	out := taskOut(&task)
	if !out.GetWaitForFailed() {
		t.Fatal("task: waitForFailed is false")
	}
	check("Execute task", out.GetWaitForFailure())
}

// TestWaitForFailure_OldStateDecodes: a step state stored before the
// WaitFor failure carried its attempt and time still decodes, with them
// zero.
func TestWaitForFailure_OldStateDecodes(t *testing.T) {
	t.Parallel()
	var s engine.StepExec
	if err := json.Unmarshal([]byte(`{"id":"A-1","waitForFailed":{"type":"Boom","message":"second"}}`), &s); err != nil {
		t.Fatal(err)
	}
	f := waitForFailureOut(s.WaitForFailed)
	if f.GetMessage() != "second" || f.GetErrorType() != "Boom" || f.GetAttempt() != 0 ||
		f.GetMethod() != dexpb.TaskKind_TASK_KIND_WAIT_FOR {
		t.Fatalf("old state's WaitFor failure = %v", f)
	}
}
