package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/examples/flows"
	"github.com/dexzd/dexzd/internal/testproc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testproc.Cleanup()
	os.Exit(code)
}

// The example bills three months on a dev server through the example
// worker's subscription flow: each month is billed in its own run
// (continue-as-new by decision), the attributes travel, and the first run
// is CONTINUED_AS_NEW and links to the second.
//
// Covers: E37
func TestSubscription_BillsEachMonthInANewRun(t *testing.T) {
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	p.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}}, dex.ClientOptions{}, flows.All()...)

	var out strings.Builder
	if err := run(ctx, c, &out, flows.Subscription{ID: "t", Months: 3, CentsPerMonth: 500}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("output:\n%s\nwant 5 lines", out.String())
	}
	first := strings.TrimPrefix(lines[0], "started subscription-t run ")
	for i, want := range []string{
		"month 1: BillMonth-1 waits in run " + first,
		"month 2: BillMonth-2 waits in run " + first + ".continued-1",
		"month 3: BillMonth-3 waits in run " + first + ".continued-2",
		"completed in run " + first + ".continued-2: 3 months, 1500 cents billed",
	} {
		if lines[i+1] != want {
			t.Errorf("line %d: %q, want %q", i+2, lines[i+1], want)
		}
	}
	st, err := c.GetFlowState(ctx, "subscription-t", dex.WithRunID(first))
	if err != nil {
		t.Fatal(err)
	}
	if st.Summary.Status != dex.StatusContinuedAsNew || st.ContinuedRunID != first+".continued-1" {
		t.Fatalf("first run: %v, continued as %q", st.Summary.Status, st.ContinuedRunID)
	}
}
