package engine

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckApply_ContinuationNeedsItsCarry: a continuation's flow_started
// applies the live state that the flow_continued_as_new before it in the
// same envelope moved aside. Met in order, CheckApply lets both pass;
// met without that carry (the continued run's state read back between
// batches, another run, no state), it reports ErrNoCarry naming the
// runs, where Apply alone would start an empty run.
// Covers: E37
func TestCheckApply_ContinuationNeedsItsCarry(t *testing.T) {
	n := startedNode(t)
	recs, err := n.e.Decide(n.st, ContinueAsNew{FlowID: "o-1", RunID: "r1", Reason: "test"}, base)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Type() != "flow_continued_as_new" || recs[1].Type() != "flow_started" {
		t.Fatalf("continue-as-new wrote %v", recs)
	}
	start := recs[1]

	// In order, as one envelope: nothing to report, and the new run
	// holds the step it carried.
	st := n.st.Clone()
	for _, r := range recs {
		if err := CheckApply(st, r); err != nil {
			t.Fatalf("%s in order: %v", r.Type(), err)
		}
		st, _ = Apply(st, r)
	}
	if st.RunID != start.RunID || len(st.Steps) == 0 {
		t.Fatalf("in order: run %s with %d steps, want %s with the carried step", st.RunID, len(st.Steps), start.RunID)
	}

	// The continued run's state as a store gives it back after its batch:
	// the carry is never encoded.
	closed := n.st.Clone()
	closed, _ = Apply(closed, recs[0])
	back, err := UnmarshalState(mustMarshalState(closed))
	if err != nil {
		t.Fatal(err)
	}
	for name, prev := range map[string]*FlowState{"read back": back, "no state": nil, "started run": n.st} {
		err := CheckApply(prev, start)
		if !errors.Is(err, ErrNoCarry) {
			t.Errorf("%s: CheckApply = %v, want ErrNoCarry", name, err)
			continue
		}
		want := `run ` + start.RunID + ` of flow "o-1" continues run r1`
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q does not name the runs (%s)", name, err, want)
		}
	}
	// What the check stands in front of: Apply starts an empty run.
	if empty, _ := Apply(back, start); len(empty.Steps) != 0 {
		t.Fatalf("without the carry Apply made %d steps; the test no longer shows what CheckApply guards", len(empty.Steps))
	}
	// Every other record passes.
	for _, r := range sampleRecords() {
		if b, ok := r.Body.(FlowStarted); ok && b.ContinuedFrom != "" {
			continue
		}
		if err := CheckApply(nil, r); err != nil {
			t.Errorf("%s: %v", r.Type(), err)
		}
	}
}
