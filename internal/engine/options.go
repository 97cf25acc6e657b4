package engine

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// DefaultMaxPayloadBytes is the default limit per value (E28).
const DefaultMaxPayloadBytes = 4 << 20

// MaxRetryInterval (365 days) is the largest initial or maximum retry
// interval a client or worker may set (E9): a larger one is
// INVALID_ARGUMENT naming the field. It also caps every backoff and a
// worker's retry-after (E10), whatever a stored policy says.
const MaxRetryInterval = 365 * 24 * time.Hour

// Config is the engine's configuration. The zero value means the defaults.
type Config struct {
	// MaxPayloadBytes limits every value (input, output, attribute,
	// message) (E28); 0 means DefaultMaxPayloadBytes.
	MaxPayloadBytes int
	// MaxRequestBytes limits the sum of the values of one request (see
	// limits.go); 0 means DefaultMaxRequestBytes, or MaxPayloadBytes
	// when that is larger.
	MaxRequestBytes int
	// MaxFlowAttributeBytes limits a run's attribute values in total after
	// a write; 0 means DefaultMaxFlowAttributeBytes, or MaxPayloadBytes
	// when that is larger.
	MaxFlowAttributeBytes int
	// Defaults are the server defaults, the last level of option
	// precedence (E13); the zero value means DefaultOptions().
	Defaults ResolvedOptions
	// ContinueAsNewHistoryEvents is the history length at which a run
	// continues as new (E37); 0 means DefaultContinueAsNewHistoryEvents.
	ContinueAsNewHistoryEvents int
}

// DefaultOptions returns the server defaults (E9, E11): attempts time out
// after 30 s; retries start at 1 s, double, are capped at 100 s, without
// attempt or duration limits; WaitFor exhaustion fails the flow; starts are
// logged ASYNC (W4), except for a method with a recovery path (see
// resolveOptions).
func DefaultOptions() ResolvedOptions {
	p := MethodPolicy{
		Timeout:    30 * time.Second,
		Retry:      RetryPolicy{InitialInterval: time.Second, Coefficient: 2, MaxInterval: 100 * time.Second},
		Durability: ASYNC,
	}
	return ResolvedOptions{WaitFor: p, Execute: p, WaitForFailure: FailFlow}
}

func (c Config) maxPayload() int {
	if c.MaxPayloadBytes > 0 {
		return c.MaxPayloadBytes
	}
	return DefaultMaxPayloadBytes
}

func (c Config) defaults() ResolvedOptions {
	if c.Defaults.equal(ResolvedOptions{}) {
		return DefaultOptions()
	}
	return c.Defaults
}

// equal reports whether two resolved options are the same.
func (r ResolvedOptions) equal(o ResolvedOptions) bool {
	return r.WaitFor == o.WaitFor && r.Execute == o.Execute &&
		r.WaitForFailure == o.WaitForFailure && r.RecoveryStep == o.RecoveryStep &&
		slices.Equal(r.MethodLocks(MethodWaitFor), o.MethodLocks(MethodWaitFor)) &&
		slices.Equal(r.MethodLocks(MethodExecute), o.MethodLocks(MethodExecute))
}

// resolveOptions resolves options field by field (E13); layers go from the
// highest precedence (per-movement override) to the lowest above the server
// defaults (the flow's config). Nil layers are skipped.
//
// Durability (W4): a method whose durability no layer sets takes the
// server default (ASYNC unless configured otherwise), except that a method
// with a recovery path is SYNC: an Execute with a recovery step (E12) and
// a WaitFor under PROCEED (E11). After a crash an ASYNC attempt whose start
// was not durable runs again without consuming a retry (T3), so its
// handler may run more often than the retry policy says before the
// recovery path is taken; a SYNC start is counted before it runs.
func resolveOptions(defaults ResolvedOptions, layers ...*StepOptions) ResolvedOptions {
	r := defaults
	hb := defaults.HeartbeatTimeouts()
	var waitForSet, executeSet bool
	wfLocks, exLocks := defaults.MethodLocks(MethodWaitFor), defaults.MethodLocks(MethodExecute)
	for i := len(layers) - 1; i >= 0; i-- {
		o := layers[i]
		if o == nil {
			continue
		}
		if o.WaitFor != nil {
			setIf(&hb.WaitFor, o.WaitFor.HeartbeatTimeout)
		}
		if o.Execute != nil {
			setIf(&hb.Execute, o.Execute.HeartbeatTimeout)
		}
		waitForSet = waitForSet || (o.WaitFor != nil && o.WaitFor.Durability != "")
		executeSet = executeSet || (o.Execute != nil && o.Execute.Durability != "")
		overlayMethod(&r.WaitFor, o.WaitFor)
		overlayMethod(&r.Execute, o.Execute)
		if o.WaitFor != nil && o.WaitFor.Locks != nil {
			wfLocks = o.WaitFor.Locks
		}
		if o.Execute != nil && o.Execute.Locks != nil {
			exLocks = o.Execute.Locks
		}
		if o.WaitForFailure != "" {
			r.WaitForFailure = o.WaitForFailure
		}
		if o.RecoveryStep != "" {
			r.RecoveryStep = o.RecoveryStep
		}
	}
	if !waitForSet && r.WaitForFailure == Proceed {
		r.WaitFor.Durability = SYNC
	}
	if !executeSet && r.RecoveryStep != "" {
		r.Execute.Durability = SYNC
	}
	// E30: a method with locks is SYNC whatever a layer says, so that its
	// lock is durable before its handler runs and its task reads the
	// previous holder's committed writes (doc.go, "Attribute locks").
	var rare Rare
	if len(wfLocks) > 0 || len(exLocks) > 0 {
		rare.Locks = &ResolvedLocks{WaitFor: wfLocks, Execute: exLocks}
	}
	if len(wfLocks) > 0 {
		r.WaitFor.Durability = SYNC
	}
	if len(exLocks) > 0 {
		r.Execute.Durability = SYNC
	}
	if hb != (HeartbeatPolicy{}) {
		h := hb
		rare.Heartbeat = &h
	}
	// Only the copies made in the branches escape: a step without rare
	// options allocates nothing here.
	r.Rare = nil
	if rare != (Rare{}) {
		p := rare
		r.Rare = &p
	}
	return r
}

func overlayMethod(p *MethodPolicy, o *MethodOptions) {
	if o == nil {
		return
	}
	if o.Timeout != nil {
		p.Timeout = *o.Timeout
	}
	if o.Durability != "" {
		p.Durability = o.Durability
	}
	if r := o.Retry; r != nil {
		setIf(&p.Retry.InitialInterval, r.InitialInterval)
		setIf(&p.Retry.Coefficient, r.Coefficient)
		setIf(&p.Retry.MaxInterval, r.MaxInterval)
		setIf(&p.Retry.MaxAttempts, r.MaxAttempts)
		setIf(&p.Retry.MaxTotal, r.MaxTotal)
	}
}

func setIf[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// validateOptions checks options given by a client or a worker; field
// prefixes the name of the offending field.
func validateOptions(field string, o *StepOptions, stepOK func(string) bool) error {
	if o == nil {
		return nil
	}
	for _, m := range []struct {
		name string
		o    *MethodOptions
	}{{"waitFor", o.WaitFor}, {"execute", o.Execute}} {
		if err := validateMethod(field+"."+m.name, m.o); err != nil {
			return err
		}
	}
	switch o.WaitForFailure {
	case "", FailFlow, Proceed:
	default:
		return invalidArg(field+".waitForFailure", "unknown policy %q", o.WaitForFailure)
	}
	if o.RecoveryStep != "" && !stepOK(o.RecoveryStep) {
		return invalidArg(field+".recoveryStep", "step type %q is not declared", o.RecoveryStep)
	}
	return nil
}

func validateMethod(field string, o *MethodOptions) error {
	if o == nil {
		return nil
	}
	if o.Timeout != nil && *o.Timeout <= 0 {
		return invalidArg(field+".timeout", "must be positive, got %v", *o.Timeout)
	}
	if o.HeartbeatTimeout != nil && *o.HeartbeatTimeout < 0 {
		return invalidArg(field+".heartbeatTimeout", "must not be negative, got %v", *o.HeartbeatTimeout)
	}
	switch o.Durability {
	case "", SYNC, ASYNC:
	default:
		return invalidArg(field+".durability", "unknown durability %q", o.Durability)
	}
	if err := validateLocks(field+".locks", o.Locks); err != nil {
		return err
	}
	return validateRetry(field+".retry", o.Retry)
}

// validateRetry checks a retry policy given by a client or a worker.
func validateRetry(field string, r *RetryOptions) error {
	if r == nil {
		return nil
	}
	switch {
	case r.InitialInterval != nil && *r.InitialInterval <= 0:
		return invalidArg(field+".initialInterval", "must be positive")
	case r.InitialInterval != nil && *r.InitialInterval > MaxRetryInterval:
		return invalidArg(field+".initialInterval", "must be at most %v (365 days), got %v", MaxRetryInterval, *r.InitialInterval)
	case r.Coefficient != nil && (*r.Coefficient < 1 || math.IsNaN(*r.Coefficient) || math.IsInf(*r.Coefficient, 0)):
		return invalidArg(field+".coefficient", "must be a finite number >= 1")
	case r.MaxInterval != nil && *r.MaxInterval <= 0:
		return invalidArg(field+".maxInterval", "must be positive")
	case r.MaxInterval != nil && *r.MaxInterval > MaxRetryInterval:
		return invalidArg(field+".maxInterval", "must be at most %v (365 days), got %v", MaxRetryInterval, *r.MaxInterval)
	case r.MaxAttempts != nil && *r.MaxAttempts < 0:
		return invalidArg(field+".maxAttempts", "must be >= 0")
	case r.MaxTotal != nil && *r.MaxTotal < 0:
		return invalidArg(field+".maxTotal", "must be >= 0")
	}
	return nil
}

// Backoff returns the delay before the retry that follows failed attempt n
// (n >= 1): InitialInterval * Coefficient^(n-1), capped at MaxInterval and
// at MaxRetryInterval (E9). It is computed in float64 and converted only
// once capped, so neither a huge coefficient nor intervals at the end of
// the time.Duration range overflow: the result is always in
// [min(InitialInterval, cap), cap] and never falls as n grows.
func (p RetryPolicy) Backoff(n int) time.Duration {
	limit := MaxRetryInterval
	if p.MaxInterval > 0 {
		limit = min(limit, p.MaxInterval)
	}
	d, lim := float64(p.InitialInterval), float64(limit)
	for i := 1; i < n && d < lim; i++ {
		d *= p.Coefficient
	}
	if !(d < lim) { // also NaN: a policy the validation refuses
		return limit
	}
	return max(time.Duration(d), 0)
}

// RetryJitter is the largest fraction by which a retry's backoff is moved
// (E9): the delay is Backoff(n) * (1 + j) with j in [-RetryJitter,
// +RetryJitter), so that attempts that failed together (a poison task and
// the tasks lost with it, a dependency's outage) do not retry in lockstep.
const RetryJitter = 0.2

// retryJitter returns the jitter j of the retry after attempt n of method
// m of a step execution, in [-RetryJitter, +RetryJitter). It is a hash of
// (flow ID, run ID, step execution, method, attempt), not randomness: the
// engine stays pure, a decision made again from the same state gives the
// same time, and replay reads the time from the record anyway
// (AttemptFailed.NextAttemptAt, AttemptScheduled.NotBefore).
func retryJitter(flowID, runID, stepExecID string, m Method, n int) float64 {
	// FNV-1a over the fields, each followed by a 0 byte, then the
	// splitmix64 finalizer: FNV alone barely moves its top bits when only
	// the last bytes (the attempt number) differ.
	h := uint64(14695981039346656037)
	for _, f := range []string{flowID, runID, stepExecID, string(m), strconv.Itoa(n)} {
		for i := range len(f) {
			h = (h ^ uint64(f[i])) * 1099511628211
		}
		h *= 1099511628211 // the separator: h ^ 0 is h
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	u := float64(h>>11) / (1 << 53) // [0, 1)
	return (2*u - 1) * RetryJitter
}

// jitteredBackoff is Backoff(n) moved by the fraction j (retryJitter),
// rounded to the millisecond (when at least 1 ms), and capped at the
// policy's limit (MaxInterval, MaxRetryInterval): never beyond the maximum
// interval, never negative, and at least 1 ns.
func (p RetryPolicy) jitteredBackoff(n int, j float64) time.Duration {
	limit := MaxRetryInterval
	if p.MaxInterval > 0 {
		limit = min(limit, p.MaxInterval)
	}
	if math.IsNaN(j) {
		j = 0
	}
	j = min(max(j, -RetryJitter), RetryJitter)
	d := time.Duration(float64(p.Backoff(n)) * (1 + j)) // at most 1.2 * 365 days: no overflow
	if d >= time.Millisecond {
		d = d.Round(time.Millisecond)
	}
	return min(max(d, time.Nanosecond), limit)
}

// nextAttempt decides the retry after attempt a failed at now: its start
// time, or ok=false when the policy is exhausted (E9). The delay is the
// backoff moved by jitter (retryJitter; 0: none), capped at the policy's
// limit; retryAfter, when set, replaces it, without jitter (E10).
// MaxAttempts counts the first attempt; MaxTotal bounds the time from the
// first attempt to the retry's start.
func (p RetryPolicy) nextAttempt(a Attempt, now time.Time, retryAfter *time.Duration, jitter float64) (time.Time, bool) {
	if p.MaxAttempts > 0 && a.Number >= p.MaxAttempts {
		return time.Time{}, false
	}
	delay := p.jitteredBackoff(a.Number, jitter)
	if retryAfter != nil {
		delay = min(max(*retryAfter, 0), MaxRetryInterval)
	}
	at := now.Add(delay)
	if p.MaxTotal > 0 && at.Sub(a.FirstAt) > p.MaxTotal {
		return time.Time{}, false
	}
	return at, true
}
