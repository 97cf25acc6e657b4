package serving

import (
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
)

// walkNode reaches values in every way the walk follows: a field, a
// pointer (to its own type: a recursive plan), a map of slices, an
// interface, an embedded pointer, and a map of values.
type walkNode struct {
	V    engine.Value
	Next *walkNode
	Kids map[string][]walkNode
	Any  any
	*WalkExtra
	hidden engine.Value // unexported: not walked
}

type WalkExtra struct{ Vals map[string]engine.Value }

func TestMapEngineValues_ReachesEveryKindOfPlace(t *testing.T) {
	ref := func(s string) engine.Value { return engine.Value{Type: "t", Ref: s, Size: 1} }
	in := &walkNode{V: ref("top"),
		Next:      &walkNode{V: ref("next"), Next: &walkNode{Any: ref("deep")}},
		Kids:      map[string][]walkNode{"k": {{}, {V: ref("kid")}}},
		Any:       &walkNode{V: ref("any")},
		WalkExtra: &WalkExtra{Vals: map[string]engine.Value{"a": ref("extra"), "b": {Type: "t", Data: []byte("b")}}},
		hidden:    ref("hidden"),
	}
	var seen []string
	out, err := mapEngineValues(in, func(v engine.Value) (engine.Value, bool, error) {
		if v.Ref == "" {
			return v, false, nil
		}
		seen = append(seen, v.Ref)
		v.Data = []byte(v.Ref)
		return v, true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 6 {
		t.Fatalf("the walk found %v, want the 6 exported references", seen)
	}
	got := []string{string(out.V.Data), string(out.Next.V.Data), string(out.Next.Next.Any.(engine.Value).Data),
		string(out.Kids["k"][1].V.Data), string(out.Any.(*walkNode).V.Data), string(out.Vals["a"].Data)}
	want := []string{"top", "next", "deep", "kid", "any", "extra"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("value %d: %q, want %q", i, got[i], want[i])
		}
	}
	if in.V.Data != nil || in.Next.V.Data != nil || in.Kids["k"][1].V.Data != nil || in.Vals["a"].Data != nil ||
		in.Any.(*walkNode).V.Data != nil || in.Next.Next.Any.(engine.Value).Data != nil {
		t.Error("the walk modified its input")
	}
	if string(out.Vals["b"].Data) != "b" {
		t.Error("an unchanged map entry was lost")
	}
}

// The walk of a state that names no object, as every read of an ordinary
// flow's state pays (Core.Flow, WaitForFlow), as tasks and records do.
// Same machine, one after the other: 24.6 µs/op before tier 2 (f3d6faa),
// 29.0 µs/op with tier 2's fields (42bb124, every exported field visited,
// a sync.Map lookup each), 3.7 µs/op and one allocation planned per type.
func BenchmarkMapEngineValues_StateWithoutObjects(b *testing.B) {
	now := time.Unix(1_700_000_000, 0)
	v := func(s string) engine.Value { return engine.Value{Type: "json:number", Data: []byte(s)} }
	st := &engine.FlowState{FlowID: "f", RunID: "r", FlowType: "chain", Status: engine.StatusRunning,
		Attributes: map[string]engine.Value{"a": v("1"), "b": v("2")}}
	for i := range 3 {
		st.Steps = append(st.Steps, &engine.StepExec{ID: "s" + string(rune('0'+i)), Type: "step", Input: v("1")})
	}
	for i := range 12 {
		st.History = append(st.History, &engine.HistoryEvent{ID: i + 1, At: now, Type: engine.EventExecuteCompleted, Decision: &engine.Decision{Output: v("3")}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := mapEngineValues(st, func(v engine.Value) (engine.Value, bool, error) { return v, false, nil }); err != nil {
			b.Fatal(err)
		}
	}
}
