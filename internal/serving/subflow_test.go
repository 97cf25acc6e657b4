package serving

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
)

// setAfter replaces the sequencer's subflow hook, on the sequencer.
func (h *harness) setAfter(fn func(string, *engine.FlowState, []engine.Record)) {
	h.t.Helper()
	if _, err := call(context.Background(), h.core.seq, func() bool { h.core.seq.after = fn; return true }); err != nil {
		h.t.Fatal(err)
	}
}

// The cross-flow steps a crash cuts off are completed by Recover: p1's
// child closed but the node crashed before p1 took the result; p2's Wait
// was stored but the node crashed before its child started. After the
// restart, p1's Execute runs with the child's result, p2's child starts
// (once) and p2 completes with its result.
//
// Covers: E31, T1
func TestSubFlows_RecoverCompletesWhatACrashCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		blobs := mem.New()
		h := newHarness(t, blobs, 1)
		s := h.session("w1", 8, "a")
		wait := &engine.Wait{Mode: engine.Until, Conditions: []engine.Condition{{
			SubFlow: &engine.SubFlowCondition{FlowType: "a", StartStep: "S"}}}}
		answerWaitFor := func(task *engine.Task) {
			t.Helper()
			if _, err := s.Result(ctx, task.Token, engine.WaitForResult{Token: task.Token, Wait: wait}); err != nil {
				t.Fatal(err)
			}
		}
		one := func(what string) *engine.Task {
			t.Helper()
			synctest.Wait()
			got := tasks(s)
			if len(got) != 1 {
				t.Fatalf("%s: %d tasks %v, want 1", what, len(got), got)
			}
			return got[0]
		}

		// p1: its child starts and is linked; then the hook is off, so the
		// child's close reaches no one before the crash.
		h.start("p1", "a", "W")
		answerWaitFor(one("p1 WaitFor"))
		child := one("p1's child")
		if child.FlowID != "SubFlow:p1-W-1-0" || child.StepType != "S" {
			t.Fatalf("child task %+v", child)
		}
		h.setAfter(nil)
		h.complete(s, child)
		// p2: the Wait is stored, no child is started.
		h.start("p2", "a", "W")
		answerWaitFor(one("p2 WaitFor"))
		synctest.Wait()
		if got := tasks(s); len(got) != 0 {
			t.Fatalf("before the crash: %v, want no task (no hook)", got)
		}
		if st, _ := h.core.cfg.Store.Flow("SubFlow:p2-W-1-0"); st != nil {
			t.Fatalf("p2's child exists before the crash: %+v", st.Summary())
		}
		h.stop()

		h2 := newHarness(t, blobs, 2)
		defer h2.stop()
		s = h2.session("w2", 8, "a")
		synctest.Wait()
		byFlow := map[string]*engine.Task{}
		for _, task := range tasks(s) {
			byFlow[task.FlowID] = task
		}
		p1 := byFlow["p1"]
		if p1 == nil || p1.Method != engine.MethodExecute || p1.Results == nil ||
			p1.Results.Conditions[0].SubFlow.Result == nil || p1.Results.Conditions[0].SubFlow.Result.Status != engine.StatusCompleted {
			t.Fatalf("p1 after the restart: %+v, want its Execute with the child's result", p1)
		}
		c2 := byFlow["SubFlow:p2-W-1-0"]
		if c2 == nil || len(byFlow) != 2 {
			t.Fatalf("after the restart: %v, want p1's Execute and p2's child", byFlow)
		}
		h2.complete(s, c2)
		p2 := one("p2 Execute")
		if p2.FlowID != "p2" || p2.Method != engine.MethodExecute {
			t.Fatalf("p2 task %+v", p2)
		}
		h2.complete(s, p1)
		h2.complete(s, p2)
		synctest.Wait()
		for _, id := range []string{"p1", "p2", "SubFlow:p1-W-1-0", "SubFlow:p2-W-1-0"} {
			st, _ := h2.core.cfg.Store.Flow(id)
			if st == nil || st.Status != engine.StatusCompleted {
				t.Fatalf("%s: %+v, want COMPLETED", id, st)
			}
			if st.PreviousRunID != "" {
				t.Fatalf("%s ran twice (previous run %s)", id, st.PreviousRunID)
			}
		}
	})
}
