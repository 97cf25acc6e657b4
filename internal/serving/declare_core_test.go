package serving

import (
	"testing"
	"testing/synctest"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
)

// A declaration seeded at recovery from another run's definition can equal
// what the worker then declares; a run that a crash left without a
// definition (the earlier process died before its definition_set was
// durable) still gets it on the type's first declaration in this serving
// period, so its step runs as declared: Execute, no WaitFor.
//
// Covers: W5, E4, E13
func TestRegister_FirstDeclarationSetsRunsASeedHid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, mem.New(), 1)
		defer h.stop()
		h.start("y", "a", "S")
		synctest.Wait()
		def := *flowDef
		def.Type = "a"
		h.core.seedDefinitions(map[string]*engine.FlowState{"a": {FlowType: "a", Definition: &def}}, map[string]bool{"a": true})
		s := h.session("w1", 5, "a")
		synctest.Wait()
		got := tasks(s)
		if len(got) != 1 || got[0].Method != engine.MethodExecute {
			var ms []engine.Method
			for _, task := range got {
				ms = append(ms, task.Method)
			}
			t.Fatalf("tasks %v, want y's Execute", ms)
		}
		st, _ := h.core.cfg.Store.Flow("y")
		if st.Definition == nil || len(st.History) != 1 {
			t.Fatalf("y: definition %v, history %+v; want the declared definition and no WaitFor run", st.Definition, st.History)
		}
	})
}
