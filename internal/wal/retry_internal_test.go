package wal

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A process stopped (SIGSTOP) in the middle of an attempt resumes past the
// write deadline: the retrier used to log and sleep a negative backoff
// (min(backoff, time.Until(deadline)) = -2s). The wait it reports must be
// the real one and never negative; past the deadline it gives up without
// waiting.
func TestRetrier_NoNegativeBackoffAfterStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var waits []time.Duration
		r := newRetrier(LogWriteLimit, DefaultAttemptTimeout, func(_ error, wait time.Duration) {
			waits = append(waits, wait)
		})
		transient := errors.New("connection reset")
		attempts := 0
		err := r.do(t.Context(), func(ctx context.Context) error {
			attempts++
			if attempts == 2 {
				// The process is stopped for 12 s during this attempt:
				// it resumes 2 s past the deadline.
				time.Sleep(LogWriteLimit + 2*time.Second)
			}
			return transient
		})
		if !isDeadline(err) || !errors.Is(err, transient) {
			t.Fatalf("do = %v; want a deadline error wrapping the last error", err)
		}
		for i, w := range waits {
			if w < 0 {
				t.Errorf("retry %d reported backoff=%v; a backoff is never negative", i+1, w)
			}
		}
		if len(waits) != 1 {
			t.Errorf("reported %d retries (%v); want 1: the attempt that ended past the deadline is not retried", len(waits), waits)
		}
	})
}

// The reported wait is the time actually slept: the backoff, cut at the
// deadline.
func TestRetrier_ReportedWaitIsSlept(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var waits []time.Duration
		r := newRetrier(3*time.Second, DefaultAttemptTimeout, func(_ error, wait time.Duration) {
			waits = append(waits, wait)
		})
		start := time.Now()
		var starts []time.Time
		err := r.do(t.Context(), func(ctx context.Context) error {
			starts = append(starts, time.Now())
			return errors.New("unavailable")
		})
		if !isDeadline(err) {
			t.Fatalf("do = %v; want a deadline error", err)
		}
		if len(starts) != len(waits)+1 && len(starts) != len(waits) {
			t.Fatalf("%d attempts, %d waits", len(starts), len(waits))
		}
		for i := 1; i < len(starts); i++ {
			if got := starts[i].Sub(starts[i-1]); got != waits[i-1] {
				t.Errorf("attempt %d started %v after the previous one; the reported backoff was %v", i+1, got, waits[i-1])
			}
		}
		for i, w := range waits {
			if w < 0 {
				t.Errorf("retry %d reported backoff=%v", i+1, w)
			}
		}
		if time.Since(start) > 3*time.Second {
			t.Errorf("retried for %v, past the 3s limit", time.Since(start))
		}
	})
}
