package node

// Supervision: what keeps a process fit to serve is a held lease that keeps
// renewing and a log writer that keeps being accepted; the way a process
// ends maps to its exit status.

import (
	"context"
	"errors"

	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/wal"
)

// renewal is the lease loop of one lease period: Holder.Run, started right
// after the acquisition and kept through the snapshot restore, the replay,
// the fence and serving, so that a recovery longer than the lease keeps it
// (L2). A period has exactly one; a release (graceful stop, step down, a
// failed takeover) ends it, and so does stop.
type renewal struct {
	h      *lease.Holder
	cancel context.CancelFunc
	done   chan struct{}
}

// renew starts renewing h. Run's stop (L7, L9) is h.Err(), and closes
// h.Lost(). The renewal does not end with ctx: a graceful stop drains
// while it renews, then releases.
func renew(ctx context.Context, h *lease.Holder) *renewal {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &renewal{h: h, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		_ = h.Run(ctx)
	}()
	return r
}

// stop stops renewing, like a crash does (the lease stays valid until its
// period ends), and waits for the loop.
func (r *renewal) stop() {
	r.cancel()
	<-r.done
}

// guard returns ctx, ended as well when the lease stops: the recovery runs
// under it, so a lease lost during a replay ends the replay.
func (r *renewal) guard(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-r.h.Lost():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Supervise starts w and watches it beside the renewal of h, which the
// caller runs (Holder.Run; a lease period runs it from the acquisition on),
// until ctx ends or one of them fails. When the lease is lost, cannot be
// renewed in time, or meets a permanent store error (L7, L9), Supervise
// aborts the writer at once, so no record submitted after that point is
// acknowledged, and returns the lease's error. When the writer fails
// (fenced, G4; not accepted within 10 s, L10; a permanent error) it returns
// the writer's error; the caller stops renewing. It returns nil when ctx
// ends. The caller exits with ExitCode of the result.
func Supervise(ctx context.Context, h *lease.Holder, w *wal.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.Start(ctx)
	select {
	case <-h.Lost():
		cancel() // abort the writer: pending submits fail, nothing is acknowledged
		<-w.Done()
		return h.Err()
	case <-w.Done():
		if err := h.Err(); err != nil && w.Err() == nil {
			return err
		}
		return w.Err()
	}
}

// ExitCode is the status a process exits with after RunLocal or RunServe returned err: 0
// for a clean stop (nil, or a cancelled context after a signal), 1 for
// every other end, which includes each stop of L7, L9, L10 and G4 (L11).
func ExitCode(err error) int {
	if err == nil || errors.Is(err, context.Canceled) {
		return 0
	}
	return 1
}
