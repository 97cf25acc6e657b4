package wal

import (
	"context"
	"errors"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
)

// LogWriteLimit is how long the durable store has to accept a batch, counted
// from its first attempt (L10). It is fixed and does not depend on the lease
// duration. Reads of the log during a fence use the same limit per object.
const LogWriteLimit = 10 * time.Second

// DefaultAttemptTimeout cuts off one request to the store so that a hung
// connection is retried well before LogWriteLimit.
const DefaultAttemptTimeout = 2 * time.Second

// Backoff between attempts: starts at minBackoff, doubles, capped at
// maxBackoff, and never sleeps past the deadline. No jitter: there is one
// writer per node, so retries do not stampede.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
)

// errDeadline is returned by retry when the deadline passed; it wraps the
// last store error.
type errDeadline struct{ last error }

func (e *errDeadline) Error() string {
	if e.last == nil {
		return "deadline passed"
	}
	return "deadline passed, last error: " + e.last.Error()
}

func (e *errDeadline) Unwrap() error { return e.last }

// retrier runs one store operation until it returns something other than a
// transient error, until the deadline, or until ctx ends.
type retrier struct {
	deadline       time.Time
	attemptTimeout time.Duration
	backoff        time.Duration
	onRetry        func(err error, wait time.Duration) // may be nil
}

func newRetrier(limit, attemptTimeout time.Duration, onRetry func(error, time.Duration)) *retrier {
	if attemptTimeout <= 0 {
		attemptTimeout = DefaultAttemptTimeout
	}
	return &retrier{deadline: time.Now().Add(limit), attemptTimeout: attemptTimeout, onRetry: onRetry}
}

// do runs op. It returns op's first non-transient outcome (nil included), a
// context error if ctx ends, or an *errDeadline wrapping the last transient
// error once the deadline has passed. Each attempt gets a context cut off
// after the attempt timeout or at the deadline, whichever comes first.
func (r *retrier) do(ctx context.Context, op func(ctx context.Context) error) error {
	var last error
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		remaining := time.Until(r.deadline)
		if remaining <= 0 {
			return &errDeadline{last: last}
		}
		actx, cancel := context.WithTimeout(ctx, min(r.attemptTimeout, remaining))
		err := op(actx)
		cancel()
		if !isTransient(err) {
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		last = err
		// The attempt may have ended past the deadline (the process was
		// stopped, SIGSTOP, during it): give up now rather than report and
		// sleep a negative backoff.
		remaining = time.Until(r.deadline)
		if remaining <= 0 {
			return &errDeadline{last: last}
		}
		r.backoff = min(max(2*r.backoff, minBackoff), maxBackoff)
		wait := min(r.backoff, remaining)
		if r.onRetry != nil {
			r.onRetry(err, wait)
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ours lists this package's outcomes; blob.Classify would call them
// transient because they are not store errors.
var ours = []error{
	ErrCorrupt, ErrFenced, ErrLogWriteTimeout, ErrLogConflict, ErrStopped,
	ErrRecordTooLarge, ErrNoBatch, ErrTruncated, ErrConditionalWritesIgnored,
}

// isTransient reports whether err is worth retrying: a store error
// classified transient (or of unknown origin), never one of ours.
func isTransient(err error) bool {
	if err == nil {
		return false
	}
	for _, o := range ours {
		if errors.Is(err, o) {
			return false
		}
	}
	return blob.Classify(err) == blob.ErrTransient
}

func isDeadline(err error) bool {
	var d *errDeadline
	return errors.As(err, &d)
}
