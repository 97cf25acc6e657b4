package dextest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dextest"
)

// unknownCurrency fails every attempt with an error no retry can fix.
type unknownCurrency struct{ dex.Step[string] }

func (unknownCurrency) Execute(_ dex.Context, cur string) (dex.Decision, error) {
	return nil, dex.NonRetryable(errors.New("unknown currency " + cur))
}

var currencyFlow = dex.NewFlow("currency").Start(unknownCurrency{})

// A step whose error is marked dex.NonRetryable fails the flow at its first
// attempt, although the default retry policy allows unlimited attempts;
// before, it retried for ever while the flow looked healthy (issue 13).
//
// Covers: E9, E14
func TestNonRetryable_FailsTheFlowAtOnce(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, currencyFlow)
	ctx, c := ctxT(t), env.Client()
	if _, err := c.StartFlow(ctx, currencyFlow, "pay-1", "XXX"); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, "pay-1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dex.StatusFailed || res.Error == nil || !strings.Contains(res.Error.Message, "non-retryable") ||
		!strings.Contains(res.Error.Message, "unknown currency XXX") {
		t.Fatalf("result = %+v (error %+v); want FAILED by the non-retryable error", res, res.Error)
	}
	if fails := executeFailures(history(ctx, t, c, "pay-1"), "unknownCurrency"); len(fails) != 1 {
		t.Fatalf("%d failed attempts, want 1", len(fails))
	}
}
