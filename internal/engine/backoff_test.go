package engine

import (
	"errors"
	"math"
	"testing"
	"time"
)

// TestRetryPolicy_BackoffExtreme runs attempts 1..200 under policies at
// and past the limits a client can send: every backoff is positive, never
// falls, never exceeds the policy's max interval nor MaxRetryInterval, and
// the retry is never scheduled before the failure (an overflow to a
// negative duration once made every retry from about attempt 35 run at
// once).
// Covers: E9, E10
func TestRetryPolicy_BackoffExtreme(t *testing.T) {
	const maxDur = time.Duration(math.MaxInt64)
	tests := []struct {
		name   string
		policy RetryPolicy
	}{
		{"defaults", DefaultOptions().Execute.Retry},
		{"max interval of the duration range", RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: maxDur}},
		{"max interval at the documented limit", RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: MaxRetryInterval}},
		{"initial interval of the duration range", RetryPolicy{InitialInterval: maxDur, Coefficient: 2, MaxInterval: maxDur}},
		{"initial above max", RetryPolicy{InitialInterval: maxDur, Coefficient: 2, MaxInterval: time.Second}},
		{"huge coefficient", RetryPolicy{InitialInterval: time.Second, Coefficient: math.MaxFloat64, MaxInterval: maxDur}},
		{"huge coefficient, default cap", RetryPolicy{InitialInterval: time.Second, Coefficient: 1e300, MaxInterval: 100 * time.Second}},
		{"coefficient 1", RetryPolicy{InitialInterval: time.Nanosecond, Coefficient: 1, MaxInterval: maxDur}},
		{"nanosecond steps", RetryPolicy{InitialInterval: time.Nanosecond, Coefficient: 1.0000001, MaxInterval: maxDur}},
		{"no max interval", RetryPolicy{InitialInterval: time.Second, Coefficient: 2}},
	}
	now := base.Add(time.Hour)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := MaxRetryInterval
			if tt.policy.MaxInterval > 0 {
				limit = min(limit, tt.policy.MaxInterval)
			}
			prev := time.Duration(0)
			for n := 1; n <= 200; n++ {
				got := tt.policy.Backoff(n)
				if got <= 0 || got > limit || got < prev {
					t.Fatalf("backoff after attempt %d = %v (previous %v), want in [%v, %v]", n, got, prev, max(prev, 1), limit)
				}
				prev = got
				at, ok := tt.policy.nextAttempt(Attempt{Number: n, FirstAt: base}, now, nil, 0)
				if !ok || at.Sub(now) != got {
					t.Fatalf("retry after attempt %d at now%+v (ok=%v), want now+%v", n, at.Sub(now), ok, got)
				}
			}
		})
	}
	// A worker's retry-after is capped the same way (E10).
	p := DefaultOptions().Execute.Retry
	if at, ok := p.nextAttempt(Attempt{Number: 1, FirstAt: base}, now, ptr(maxDur), RetryJitter); !ok || at.Sub(now) != MaxRetryInterval {
		t.Errorf("retry-after of %v: retry at now%+v (ok=%v), want now+%v", maxDur, at.Sub(now), ok, MaxRetryInterval)
	}
}

// TestValidateOptions_IntervalLimits: intervals above MaxRetryInterval are
// refused with INVALID_ARGUMENT naming the field; the limit itself is
// accepted.
// Covers: E9, E28
func TestValidateOptions_IntervalLimits(t *testing.T) {
	none := func(string) bool { return false }
	over := MaxRetryInterval + time.Nanosecond
	years := time.Duration(math.MaxInt64)
	tests := []struct {
		o     *StepOptions
		field string
	}{
		{&StepOptions{Execute: &MethodOptions{Retry: &RetryOptions{MaxInterval: ptr(over)}}}, "m.execute.retry.maxInterval"},
		{&StepOptions{WaitFor: &MethodOptions{Retry: &RetryOptions{MaxInterval: ptr(years)}}}, "m.waitFor.retry.maxInterval"},
		{&StepOptions{Execute: &MethodOptions{Retry: &RetryOptions{InitialInterval: ptr(over)}}}, "m.execute.retry.initialInterval"},
		{&StepOptions{WaitFor: &MethodOptions{Retry: &RetryOptions{InitialInterval: ptr(years)}}}, "m.waitFor.retry.initialInterval"},
	}
	for _, tt := range tests {
		err := validateOptions("m", tt.o, none)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidArgument || e.Field != tt.field {
			t.Errorf("validateOptions: got %v, want INVALID_ARGUMENT on %s", err, tt.field)
		}
	}
	ok := &StepOptions{Execute: &MethodOptions{Retry: &RetryOptions{InitialInterval: ptr(MaxRetryInterval), MaxInterval: ptr(MaxRetryInterval),
		Coefficient: ptr(math.MaxFloat64)}}}
	if err := validateOptions("m", ok, none); err != nil {
		t.Errorf("options at the limits: %v", err)
	}
}
