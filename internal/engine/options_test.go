package engine

import (
	"errors"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// Covers: E13
func TestResolveOptions_Precedence(t *testing.T) {
	defaults := DefaultOptions()
	movement := &StepOptions{Execute: &MethodOptions{Retry: &RetryOptions{MaxAttempts: ptr(2)}}}
	step := &StepOptions{
		Execute:        &MethodOptions{Timeout: ptr(10 * time.Second), Retry: &RetryOptions{MaxAttempts: ptr(3), Coefficient: ptr(3.0)}},
		WaitForFailure: Proceed,
	}
	flow := &StepOptions{
		Execute:      &MethodOptions{Timeout: ptr(5 * time.Second), Retry: &RetryOptions{MaxAttempts: ptr(7), InitialInterval: ptr(2 * time.Second)}, Durability: ASYNC},
		WaitFor:      &MethodOptions{Timeout: ptr(9 * time.Second)},
		RecoveryStep: "R",
	}
	got := resolveOptions(defaults, movement, step, flow)
	tests := []struct {
		field     string
		got, want any
	}{
		{"execute.retry.maxAttempts (movement)", got.Execute.Retry.MaxAttempts, 2},
		{"execute.timeout (step)", got.Execute.Timeout, 10 * time.Second},
		{"execute.retry.coefficient (step)", got.Execute.Retry.Coefficient, 3.0},
		{"waitForFailure (step)", got.WaitForFailure, Proceed},
		{"execute.retry.initialInterval (flow)", got.Execute.Retry.InitialInterval, 2 * time.Second},
		{"execute.durability (flow)", got.Execute.Durability, ASYNC},
		{"waitFor.timeout (flow)", got.WaitFor.Timeout, 9 * time.Second},
		{"recoveryStep (flow)", got.RecoveryStep, "R"},
		{"execute.retry.maxInterval (default)", got.Execute.Retry.MaxInterval, 100 * time.Second},
		{"waitFor.retry (default)", got.WaitFor.Retry, defaults.WaitFor.Retry},
		{"waitFor.durability (PROCEED is a recovery path)", got.WaitFor.Durability, SYNC},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.field, tt.got, tt.want)
		}
	}
	// A movement can set "unlimited" back over a step's limit.
	unlimited := resolveOptions(defaults, &StepOptions{Execute: &MethodOptions{Retry: &RetryOptions{MaxAttempts: ptr(0)}}}, step)
	if unlimited.Execute.Retry.MaxAttempts != 0 {
		t.Errorf("override to unlimited attempts: got %d", unlimited.Execute.Retry.MaxAttempts)
	}
	// Engine config replaces the built-in server defaults.
	custom := DefaultOptions()
	custom.Execute.Timeout = time.Minute
	if got := (Config{Defaults: custom}).defaults(); got.Execute.Timeout != time.Minute {
		t.Errorf("configured server default ignored: %v", got.Execute.Timeout)
	}
}

// Covers: W4
func TestResolveOptions_Durability(t *testing.T) {
	syncDefaults := DefaultOptions()
	syncDefaults.WaitFor.Durability, syncDefaults.Execute.Durability = SYNC, SYNC
	tests := []struct {
		name             string
		defaults         ResolvedOptions
		layers           []*StepOptions
		waitFor, execute Durability
	}{
		{"defaults: ASYNC", DefaultOptions(), nil, ASYNC, ASYNC},
		{"recovery step: Execute SYNC", DefaultOptions(), []*StepOptions{{RecoveryStep: "R"}}, ASYNC, SYNC},
		{"PROCEED: WaitFor SYNC", DefaultOptions(), []*StepOptions{{WaitForFailure: Proceed}}, SYNC, ASYNC},
		{"explicit ASYNC beats the recovery path", DefaultOptions(),
			[]*StepOptions{{Execute: &MethodOptions{Durability: ASYNC}}, {RecoveryStep: "R"}}, ASYNC, ASYNC},
		{"explicit SYNC", DefaultOptions(), []*StepOptions{{WaitFor: &MethodOptions{Durability: SYNC}}}, SYNC, ASYNC},
		{"configured SYNC server default", syncDefaults, nil, SYNC, SYNC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolveOptions(tt.defaults, tt.layers...)
			if got.WaitFor.Durability != tt.waitFor || got.Execute.Durability != tt.execute {
				t.Errorf("durability waitFor=%s execute=%s, want %s %s", got.WaitFor.Durability, got.Execute.Durability, tt.waitFor, tt.execute)
			}
		})
	}
}

// Covers: E9
func TestRetryPolicy_Backoff(t *testing.T) {
	p := DefaultOptions().Execute.Retry
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 100, 100, 100}
	for i, w := range want {
		if got := p.Backoff(i + 1); got != w*time.Second {
			t.Errorf("backoff after attempt %d = %v, want %v", i+1, got, w*time.Second)
		}
	}
	if got := p.Backoff(10000); got != 100*time.Second {
		t.Errorf("backoff after many attempts = %v", got)
	}
	if got := DefaultOptions().Execute.Timeout; got != 30*time.Second {
		t.Errorf("default attempt timeout = %v, want 30s", got)
	}
}

// Covers: E9, E10
func TestRetryPolicy_NextAttempt(t *testing.T) {
	now := base.Add(10 * time.Second)
	tests := []struct {
		name       string
		policy     RetryPolicy
		attempt    int
		retryAfter *time.Duration
		want       time.Duration // from now; -1: exhausted
	}{
		{"unlimited", RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: time.Minute}, 50, nil, time.Minute},
		{"max attempts left", RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: time.Minute, MaxAttempts: 3}, 2, nil, 2 * time.Second},
		{"max attempts reached", RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: time.Minute, MaxAttempts: 3}, 3, nil, -1},
		{"max total fits", RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: time.Minute, MaxTotal: 12 * time.Second}, 2, nil, 2 * time.Second},
		{"max total exceeded", RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: time.Minute, MaxTotal: 11 * time.Second}, 2, nil, -1},
		{"retry-after replaces backoff", RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: time.Minute}, 1, ptr(7 * time.Second), 7 * time.Second},
		{"retry-after beyond max interval", RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: time.Second}, 1, ptr(90 * time.Second), 90 * time.Second},
		{"retry-after keeps max attempts", RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: time.Minute, MaxAttempts: 1}, 1, ptr(time.Second), -1},
		{"retry-after keeps max total", RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: time.Minute, MaxTotal: 15 * time.Second}, 1, ptr(6 * time.Second), -1},
		{"negative retry-after is now", RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: time.Minute}, 1, ptr(-time.Second), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, ok := tt.policy.nextAttempt(Attempt{Number: tt.attempt, FirstAt: base}, now, tt.retryAfter, 0)
			if tt.want < 0 {
				if ok {
					t.Fatalf("retry at %v, want exhausted", at.Sub(now))
				}
				return
			}
			if !ok || at.Sub(now) != tt.want {
				t.Fatalf("retry in %v (ok=%v), want %v", at.Sub(now), ok, tt.want)
			}
		})
	}
}

// Covers: E28
func TestValidateOptions_NamesField(t *testing.T) {
	none := func(string) bool { return false }
	tests := []struct {
		o     *StepOptions
		field string
	}{
		{&StepOptions{Execute: &MethodOptions{Timeout: ptr(time.Duration(0))}}, "m.execute.timeout"},
		{&StepOptions{WaitFor: &MethodOptions{Durability: "MAYBE"}}, "m.waitFor.durability"},
		{&StepOptions{Execute: &MethodOptions{Retry: &RetryOptions{Coefficient: ptr(0.5)}}}, "m.execute.retry.coefficient"},
		{&StepOptions{Execute: &MethodOptions{Retry: &RetryOptions{InitialInterval: ptr(-time.Second)}}}, "m.execute.retry.initialInterval"},
		{&StepOptions{Execute: &MethodOptions{Retry: &RetryOptions{MaxInterval: ptr(time.Duration(0))}}}, "m.execute.retry.maxInterval"},
		{&StepOptions{Execute: &MethodOptions{Retry: &RetryOptions{MaxAttempts: ptr(-1)}}}, "m.execute.retry.maxAttempts"},
		{&StepOptions{Execute: &MethodOptions{Retry: &RetryOptions{MaxTotal: ptr(-time.Second)}}}, "m.execute.retry.maxTotal"},
		{&StepOptions{WaitForFailure: "IGNORE"}, "m.waitForFailure"},
		{&StepOptions{RecoveryStep: "Ghost"}, "m.recoveryStep"},
	}
	for _, tt := range tests {
		err := validateOptions("m", tt.o, none)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidArgument || e.Field != tt.field {
			t.Errorf("validateOptions: got %v, want INVALID_ARGUMENT on %s", err, tt.field)
		}
	}
	if err := validateOptions("m", &StepOptions{}, none); err != nil {
		t.Errorf("empty options: %v", err)
	}
}
