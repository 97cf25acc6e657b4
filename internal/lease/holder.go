package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
)

// Reasons a holder stops; a *StopError matches exactly one of them (or
// blob.ErrPermanent) with errors.Is.
var (
	// ErrLost: the lease was taken by another holder (or deleted). The
	// process must stop at once.
	ErrLost = errors.New("lease lost to another holder")
	// ErrRenewalTimeout: no renewal succeeded before the renewal cutoff.
	ErrRenewalTimeout = errors.New("lease renewal timed out")
	// ErrNotValid: Check found the holder's own validity over (expired on
	// its monotonic clock, released, or stopped).
	ErrNotValid = errors.New("lease no longer valid")
)

// StopError is why a Holder stopped renewing: Reason is ErrLost,
// ErrRenewalTimeout or blob.ErrPermanent. The node maps any of them to
// exit status 1.
type StopError struct {
	Key    string
	Epoch  uint64  // the holder's epoch
	Reason error   // ErrLost, ErrRenewalTimeout or blob.ErrPermanent
	Err    error   // the store error behind it, if any
	Found  *Record // the lease found by the read that showed the loss, if any
}

func (e *StopError) Error() string {
	msg := fmt.Sprintf("lease %q epoch %d: %v", e.Key, e.Epoch, e.Reason)
	if e.Found != nil {
		msg += fmt.Sprintf(" (found epoch %d, holder %q, released %t)", e.Found.Epoch, e.Found.Holder, e.Found.Released)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Reason and Err.
func (e *StopError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Err}
}

// errStopped is returned internally when ctx ended or Release began.
var errStopped = errors.New("stopped")

// Holder is a held lease. Run renews it; Release gives it up. Its methods
// are safe for concurrent use.
type Holder struct {
	cfg   Config
	log   *slog.Logger
	epoch uint64
	limit time.Duration // AttemptTimeout(cfg.Duration)
	// writeLock serialises the lease writes of Run and Release.
	writeLock chan struct{}
	lost      chan struct{} // closed when Run stops with an error
	releasing chan struct{} // closed when Release begins

	mu       sync.Mutex
	rec      Record       // the last write known to have landed
	version  blob.Version // its version
	lastSent instant      // when it was sent
	writes   uint64       // write numbers handed out so far
	pending  map[uint64]instant
	released bool
	running  bool
	err      error
}

// An instant is one reading of a process's clocks (Config.Clock).
type instant struct{ mono, wall time.Time }

func now(clock func() (mono, wall time.Time)) instant {
	m, w := clock()
	return instant{m, w}
}

func (i instant) add(d time.Duration) instant { return instant{i.mono.Add(d), i.wall.Add(d)} }

// before reports whether i is before t by both clocks.
func (i instant) before(t instant) bool { return i.mono.Before(t.mono) && i.wall.Before(t.wall) }

// now reads the holder's clocks.
func (h *Holder) now() instant { return now(h.cfg.Clock) }

func newHolder(cfg Config, rec Record, v blob.Version, sent instant) *Holder {
	return &Holder{
		cfg:       cfg,
		epoch:     rec.Epoch,
		log:       cfg.Logger.With("key", cfg.Key, "processId", cfg.ProcessID, "epoch", rec.Epoch),
		limit:     AttemptTimeout(cfg.Duration),
		writeLock: make(chan struct{}, 1),
		lost:      make(chan struct{}),
		releasing: make(chan struct{}),
		rec:       rec,
		version:   v,
		lastSent:  sent,
		writes:    rec.Write,
		pending:   map[uint64]instant{},
	}
}

// Epoch returns the epoch this holder acquired.
func (h *Holder) Epoch() uint64 { return h.epoch }

// ProcessID returns this holder's process ID.
func (h *Holder) ProcessID() string { return h.cfg.ProcessID }

// Key returns the lease object's key.
func (h *Holder) Key() string { return h.cfg.Key }

// Duration returns the lease duration.
func (h *Holder) Duration() time.Duration { return h.cfg.Duration }

// Record returns the last lease write known to have landed.
func (h *Holder) Record() Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rec
}

// ValidUntil returns the end of the current lease period on this process's
// monotonic clock: the time its last successful write (acquisition or
// renewal) was sent, plus the duration.
func (h *Holder) ValidUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastSent.mono.Add(h.cfg.Duration)
}

// Valid reports whether the process may act as the lease holder now: before
// ValidUntil, not released, and Run has not stopped with an error.
//
// ValidUntil is on the monotonic clock, which does not advance while the
// host is suspended: a process resumed after a suspend longer than its
// lease would still count its lease as valid until its next renewal
// failed, and answer calls meanwhile from state that another process may
// have changed (L15). So the wall clock must also be before the end of the
// period, counted from the wall time of the same write. A wall clock
// stepped back changes nothing (the monotonic clock still ends the
// period); one stepped forward ends it early, which is only ever safe.
func (h *Holder) Valid() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	return !h.released && h.err == nil && validAt(h.lastSent.mono, h.lastSent.wall, now.mono, now.wall, h.cfg.Duration)
}

// validAt reports whether a lease period of duration d whose write was
// sent at sentMono on the monotonic clock and sentWall on the wall clock is
// still running at nowMono and nowWall: by both clocks.
func validAt(sentMono, sentWall, nowMono, nowWall time.Time, d time.Duration) bool {
	return nowMono.Before(sentMono.Add(d)) && nowWall.Before(sentWall.Add(d))
}

// Released reports whether Release was called: the holder gave the lease
// up on purpose (a graceful stop or a step down), so an action refused with
// ErrNotValid since then was cut off by the stop rather than failed.
func (h *Holder) Released() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.released
}

// Lost returns a channel closed when Run stops with an error.
func (h *Holder) Lost() <-chan struct{} { return h.lost }

// Err returns the error Run stopped with, or nil.
func (h *Holder) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *Holder) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
		close(h.lost)
	}
}

func (h *Holder) stop(reason, err error, found *Record) error {
	return &StopError{Key: h.cfg.Key, Epoch: h.epoch, Reason: reason, Err: err, Found: found}
}

// Run renews the lease until ctx ends or Release begins (it then returns
// nil) or the lease is lost (it returns a *StopError and closes Lost). It
// renews RenewalInterval after the last successful write was sent; see
// doc.go for the attempts, cut-offs and retries of one renewal. Start it
// right after the acquisition, before any recovery: the first renewal is
// due RenewalInterval after the acquisition write was sent, and a Run
// started after the renewal cutoff returns ErrRenewalTimeout at once. Run
// may be called once.
func (h *Holder) Run(ctx context.Context) error {
	h.mu.Lock()
	if h.running {
		h.mu.Unlock()
		return errors.New("lease: Run called twice")
	}
	h.running = true
	released, err := h.released, h.err
	h.mu.Unlock()
	if released {
		return nil
	}
	if err != nil {
		return err
	}
	for {
		h.mu.Lock()
		due := h.lastSent.mono.Add(RenewalInterval(h.cfg.Duration))
		h.mu.Unlock()
		if !sleep(ctx, h.releasing, due.Sub(h.now().mono)) {
			return nil
		}
		if err := h.renew(ctx); err != nil {
			if errors.Is(err, errStopped) {
				return nil
			}
			h.fail(err)
			h.log.Error("lease lost", "err", err)
			return err
		}
	}
}

// renew performs one renewal: attempts with backoff until one succeeds or
// the renewal cutoff comes.
func (h *Holder) renew(ctx context.Context) error {
	h.mu.Lock()
	// The cutoff is on both clocks, like Valid: a host suspended past it
	// (its monotonic clock stood still, its wall clock did not) must not
	// renew and count its lease valid again, since what the process
	// dropped while it was not valid (tasks, timers) is not picked up
	// again by the same process (sim seed 890: a timer flow stalled).
	cutoff := h.lastSent.add(h.cfg.Duration - CutoffMargin)
	h.mu.Unlock()
	bo := backoff{limit: backoffMax}
	var lastErr error
	for {
		now := h.now()
		if !now.before(cutoff) {
			return h.stop(ErrRenewalTimeout, lastErr, nil)
		}
		// Cut the attempt off after the attempt timeout while another
		// attempt could still start before the cutoff after the backoff;
		// otherwise this is the last attempt and it may run to the cutoff.
		deadline := now.mono.Add(h.limit)
		if !deadline.Add(bo.peek()).Before(cutoff.mono) {
			deadline = cutoff.mono
		}
		select {
		case h.writeLock <- struct{}{}:
		case <-ctx.Done():
			return errStopped
		case <-h.releasing:
			return errStopped
		}
		err := h.attempt(ctx, deadline, cutoff)
		<-h.writeLock
		var stop *StopError
		if err == nil || errors.Is(err, errStopped) || errors.As(err, &stop) {
			return err
		}
		lastErr = err
		wait := bo.next()
		if !h.now().add(wait).before(cutoff) {
			return h.stop(ErrRenewalTimeout, lastErr, nil)
		}
		h.log.Warn("lease renewal attempt failed; retrying", "err", err, "backoff", wait)
		if !sleep(ctx, h.releasing, wait) {
			return errStopped
		}
	}
}

// attempt makes one renewal write, cut off at deadline. It returns nil on
// success (or adoption of an earlier attempt), a *StopError to stop,
// errStopped, or a transient error to retry.
func (h *Holder) attempt(ctx context.Context, deadline time.Time, cutoff instant) error {
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return errStopped
	}
	rec, v := h.rec, h.version
	h.writes++
	rec.Write = h.writes
	sent := h.now()
	rec.RenewedAt = wall(sent.wall)
	h.pending[rec.Write] = sent
	h.mu.Unlock()

	// deadline is on the monotonic clock: a timeout, not a wall deadline.
	actx, cancel := context.WithTimeout(ctx, deadline.Sub(h.now().mono))
	defer cancel()
	nv, err := h.cfg.Store.PutIfMatch(actx, h.cfg.Key, rec.Encode(), v)
	if err == nil {
		h.confirm(rec, nv, sent)
		h.log.Debug("lease renewed", "write", rec.Write)
		return nil
	}
	if ctx.Err() != nil {
		return errStopped
	}
	switch blob.Classify(err) {
	case blob.ErrPermanent:
		return h.stop(blob.ErrPermanent, err, nil)
	case blob.ErrPrecondition:
		return h.resolve(actx, ctx, err, cutoff)
	default:
		return err
	}
}

// resolve handles a renewal write that failed its precondition: it reads
// the lease and adopts a write of this holder's own that landed earlier
// (before the cutoff only); anything else means the lease is lost.
func (h *Holder) resolve(actx, ctx context.Context, werr error, cutoff instant) error {
	found, fv, err := Read(actx, h.cfg.Store, h.cfg.Key)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return errStopped
		case errors.Is(err, blob.ErrNotFound):
			return h.stop(ErrLost, err, nil)
		case blob.Classify(err) == blob.ErrPermanent:
			return h.stop(blob.ErrPermanent, err, nil)
		}
		return err
	}
	h.mu.Lock()
	sent, mine := h.pending[found.Write]
	h.mu.Unlock()
	if !mine || found.Holder != h.cfg.ProcessID || found.Epoch != h.epoch || found.Released {
		return h.stop(ErrLost, werr, &found)
	}
	if !h.now().before(cutoff) {
		return h.stop(ErrRenewalTimeout, errors.New("own renewal found after the renewal cutoff"), nil)
	}
	h.confirm(found, fv, sent)
	h.log.Info("lease renewal adopted", "write", found.Write)
	return nil
}

func (h *Holder) confirm(rec Record, v blob.Version, sent instant) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rec, h.version, h.lastSent = rec, v, sent
	clear(h.pending)
}

// Release gives the lease up: a conditional write of the same epoch with
// Released set, so that a successor acquires at once. Valid is false from
// the moment Release is called, and Run returns nil. Transient errors are
// retried until ctx ends, or until the lease has run out for every reader
// (ValidUntil plus ExpiryMargin): past that a successor acquires anyway,
// and a stopping process would only wait on a dead store. If another
// holder already has the lease it returns a *StopError matching ErrLost.
// Calling it again after a success does nothing.
func (h *Holder) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.ValidUntil().Add(ExpiryMargin).Sub(h.now().mono))
	defer cancel()
	h.mu.Lock()
	if !h.released {
		h.released = true
		close(h.releasing)
	} else if h.rec.Released {
		h.mu.Unlock()
		return nil
	}
	h.mu.Unlock()
	select {
	case h.writeLock <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("release lease: %w", ctx.Err())
	}
	defer func() { <-h.writeLock }()
	bo := backoff{limit: backoffMax}
	for {
		err := h.releaseOnce(ctx)
		var stop *StopError
		switch {
		case err == nil:
			h.log.Info("lease released")
			return nil
		case errors.As(err, &stop):
			return err
		case ctx.Err() != nil:
			return fmt.Errorf("release lease: %w", err)
		}
		h.log.Warn("lease release attempt failed; retrying", "err", err)
		if !sleep(ctx, nil, bo.next()) {
			return fmt.Errorf("release lease: %w", err)
		}
	}
}

func (h *Holder) releaseOnce(ctx context.Context) error {
	h.mu.Lock()
	rec, v := h.rec, h.version
	h.writes++
	rec.Write = h.writes
	rec.Released = true
	sent := h.now()
	rec.RenewedAt = wall(sent.wall)
	h.pending[rec.Write] = sent
	h.mu.Unlock()

	actx, cancel := context.WithTimeout(ctx, h.limit)
	defer cancel()
	nv, err := h.cfg.Store.PutIfMatch(actx, h.cfg.Key, rec.Encode(), v)
	if err == nil {
		h.confirm(rec, nv, sent)
		return nil
	}
	switch blob.Classify(err) {
	case blob.ErrPermanent:
		return h.stop(blob.ErrPermanent, err, nil)
	case blob.ErrPrecondition:
	default:
		return err
	}
	found, fv, rerr := Read(actx, h.cfg.Store, h.cfg.Key)
	if rerr != nil {
		switch {
		case errors.Is(rerr, blob.ErrNotFound):
			return h.stop(ErrLost, rerr, nil)
		case blob.Classify(rerr) == blob.ErrPermanent:
			return h.stop(blob.ErrPermanent, rerr, nil)
		}
		return rerr
	}
	h.mu.Lock()
	sentAt, mine := h.pending[found.Write]
	h.mu.Unlock()
	if !mine || found.Holder != h.cfg.ProcessID || found.Epoch != h.epoch {
		return h.stop(ErrLost, err, &found)
	}
	// A write of ours landed late: a release (done) or a renewal (write
	// the release over it).
	h.confirm(found, fv, sentAt)
	if found.Released {
		return nil
	}
	return errors.New("adopted a late renewal; releasing again")
}

// Check re-reads the lease and returns nil only if it is still held by this
// holder (same process and epoch, not released) and the holder is Valid.
// Call it before an action that is safe only while the lease is held, such
// as deleting log batches. It returns a *StopError matching ErrLost if
// another holder has the lease, an error matching ErrNotValid if this holder
// is no longer valid, and the store's error if the read fails.
func (h *Holder) Check(ctx context.Context) error {
	if !h.Valid() {
		return fmt.Errorf("check lease %q epoch %d: %w", h.cfg.Key, h.epoch, ErrNotValid)
	}
	rctx, cancel := context.WithTimeout(ctx, h.limit)
	defer cancel()
	found, _, err := Read(rctx, h.cfg.Store, h.cfg.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return h.stop(ErrLost, err, nil)
	}
	if err != nil {
		return fmt.Errorf("check lease: %w", err)
	}
	if found.Holder != h.cfg.ProcessID || found.Epoch != h.epoch || found.Released {
		return h.stop(ErrLost, nil, &found)
	}
	if !h.Valid() {
		return fmt.Errorf("check lease %q epoch %d: %w", h.cfg.Key, h.epoch, ErrNotValid)
	}
	return nil
}
