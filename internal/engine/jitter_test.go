package engine

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestRetryJitter_Bounds: the jitter of a retry stays within ±RetryJitter,
// the jittered backoff never exceeds the policy's maximum interval (nor
// MaxRetryInterval) and is never negative or zero, whatever the policy.
// Covers: E9
func TestRetryJitter_Bounds(t *testing.T) {
	t.Parallel()
	const maxDur = time.Duration(math.MaxInt64)
	policies := []RetryPolicy{
		DefaultOptions().Execute.Retry,
		{InitialInterval: time.Second, Coefficient: 2, MaxInterval: 3 * time.Second},
		{InitialInterval: time.Nanosecond, Coefficient: 1, MaxInterval: maxDur},
		{InitialInterval: maxDur, Coefficient: 2, MaxInterval: maxDur},
		{InitialInterval: time.Second, Coefficient: math.MaxFloat64},
	}
	for pi, p := range policies {
		limit := MaxRetryInterval
		if p.MaxInterval > 0 {
			limit = min(limit, p.MaxInterval)
		}
		for n := 1; n <= 60; n++ {
			for _, j := range []float64{-RetryJitter, 0, RetryJitter, retryJitter("f", "r", "A-1", MethodExecute, n), math.NaN(), -5, 5} {
				got := p.jitteredBackoff(n, j)
				if got <= 0 || got > limit {
					t.Fatalf("policy %d, attempt %d, jitter %v: backoff %v, want in (0, %v]", pi, n, j, got, limit)
				}
				base := p.Backoff(n)
				lo := time.Duration(float64(base)*(1-RetryJitter)) - time.Millisecond
				hi := time.Duration(float64(base)*(1+RetryJitter)) + time.Millisecond
				if !math.IsNaN(j) && base >= 10*time.Millisecond && (got < lo || got > hi) {
					t.Fatalf("policy %d, attempt %d, jitter %v: backoff %v, want within ±20 %% of %v", pi, n, j, got, base)
				}
			}
		}
	}
	for i := range 10000 {
		j := retryJitter(fmt.Sprintf("flow-%d", i), "run", "A-1", MethodExecute, i%7+1)
		if j < -RetryJitter || j >= RetryJitter {
			t.Fatalf("jitter %v out of [-%v, %v)", j, RetryJitter, RetryJitter)
		}
	}
}

// TestRetryJitter_SpreadsLockstepFailures replays what issue 11 found: a
// poison task and the tasks lost with it fail at the same instant, and
// with the same policy used to retry at the same instant, again and again.
// Now 21 flows failing together at attempt 1 retry at different times
// spread over the ±20 % band, and each flow's retry time is the same every
// time it is decided (deterministic: the same state and command give the
// same records) and survives replay from the log.
// Covers: E9
func TestRetryJitter_SpreadsLockstepFailures(t *testing.T) {
	t.Parallel()
	failAt := base.Add(3 * time.Second)
	distinct := map[time.Time]bool{}
	var lo, hi time.Duration = time.Hour, 0
	for i := range 21 {
		n := &node{t: t, e: New(Config{})}
		n.must(StartFlow{FlowID: fmt.Sprintf("o-%02d", i), FlowType: "order", RunID: "r1", StartStep: "Reserve",
			Input: Value{Data: []byte("42")}, Definition: orderDef()}, base)
		n.must(TaskStarted{Token: tok(n.st, "Reserve-1", 1)}, base)
		cmd := TaskFailed{Token: tok(n.st, "Reserve-1", 1), Failure: Failure{Type: "Poison", Message: "stream broke"}}
		before := n.st.Clone()
		n.must(cmd, failAt)
		at := n.st.Step("Reserve-1").Attempt.NotBefore
		if n.st.Step("Reserve-1").Attempt.Number != 2 {
			t.Fatalf("flow %d: attempt %d after the failure, want 2", i, n.st.Step("Reserve-1").Attempt.Number)
		}
		d := at.Sub(failAt)
		if d < 800*time.Millisecond || d > 1200*time.Millisecond {
			t.Fatalf("flow %d: retry after %v, want 1 s ± 20 %%", i, d)
		}
		lo, hi = min(lo, d), max(hi, d)
		distinct[at] = true

		// Deciding again from the same state gives the same time.
		recs, err := n.e.Decide(before, cmd, failAt)
		if err != nil {
			t.Fatal(err)
		}
		again := time.Time{}
		for _, r := range recs {
			if s, ok := r.Body.(AttemptScheduled); ok {
				again = s.NotBefore
			}
		}
		if !again.Equal(at) {
			t.Fatalf("flow %d: decided again, retry at %v, first %v", i, again, at)
		}
		if got := n.replay().Step("Reserve-1").Attempt.NotBefore; !got.Equal(at) {
			t.Fatalf("flow %d: replayed retry at %v, live %v", i, got, at)
		}
	}
	if len(distinct) < 18 || hi-lo < 200*time.Millisecond {
		t.Fatalf("21 flows failing together retry at %d distinct times spanning %v..%v, want them spread", len(distinct), lo, hi)
	}
	t.Logf("21 flows failing together retry at %d distinct times, %v..%v after the failure", len(distinct), lo, hi)
}
