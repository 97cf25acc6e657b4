package dextest_test

import (
	"strings"
	"testing"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dextest"
)

type polishIn struct{ N int }

type polishStart struct{ dex.Step[polishIn] }

func (polishStart) Execute(ctx dex.Context, in polishIn) (dex.Decision, error) {
	if in.N > 0 {
		polishCount.Set(ctx, 0) // set, to the zero value
	}
	return dex.GracefulComplete(in.N), nil
}

type polishOther struct{ dex.Step[polishIn] }

func (polishOther) Execute(dex.Context, polishIn) (dex.Decision, error) {
	return dex.GracefulComplete(0), nil
}

type polishAny struct{ dex.Step[any] }

func (polishAny) Execute(_ dex.Context, in any) (dex.Decision, error) {
	return dex.GracefulComplete(in), nil
}

var (
	polishCount   = dex.DefineAttribute[int]("count")
	polishFlow    = dex.NewFlow("polish").Start(polishStart{}).Steps(polishOther{}).Attributes(polishCount)
	polishAnyFlow = dex.NewFlow("polish-any").Start(polishAny{})
)

// dex.Start checks the input's type at compile time (an Order for a step of
// Order) and the start step at run time; dex.LookupAttribute tells an
// attribute never set from one set to its zero value.
//
// Covers: E2, E21
func TestStartAndLookupAttribute(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, polishFlow, polishAnyFlow)
	ctx, c := ctxT(t), env.Client()

	if _, err := dex.Start[polishOther](ctx, c, polishFlow, "p-0", polishIn{}); err == nil ||
		!strings.Contains(err.Error(), `step "polishOther" is not the start step of flow "polish" ("polishStart")`) {
		t.Fatalf("Start with a step that is not the start step: %v", err)
	}
	for id, n := range map[string]int{"p-unset": 0, "p-zero": 1} {
		if _, err := dex.Start[polishStart](ctx, c, polishFlow, id, polishIn{N: n}); err != nil {
			t.Fatal(err)
		}
		if res, err := c.WaitForFlow(ctx, id); err != nil || res.Status != dex.StatusCompleted {
			t.Fatalf("%s: %+v, %v", id, res, err)
		}
	}
	if v, ok, err := dex.LookupAttribute(ctx, c, "p-unset", polishCount); err != nil || ok || v != 0 {
		t.Errorf("never set: %d, %t, %v; want 0, false", v, ok, err)
	}
	if v, ok, err := dex.LookupAttribute(ctx, c, "p-zero", polishCount); err != nil || !ok || v != 0 {
		t.Errorf("set to 0: %d, %t, %v; want 0, true", v, ok, err)
	}
	// A step of an interface type takes any value that implements it.
	if _, err := dex.Start[polishAny](ctx, c, polishAnyFlow, "p-any", any("x")); err != nil {
		t.Fatalf("Start with an interface input: %v", err)
	}
	if _, err := c.StopFlow(ctx, "p-any", dex.StopDefault, "done"); err != nil && !strings.Contains(err.Error(), "FailedPrecondition") {
		t.Errorf("StopFlow with StopDefault: %v", err)
	}
}
