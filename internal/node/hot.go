package node

// The hot standby (S3): while another process holds the lease, follow the
// node's log into the local store, and take the lease over when it is
// released or expires (S7, S8, S9).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// Backoffs of the hot standby: a follower restart after an error, and a
// takeover attempt that failed before the lease was held (S9).
const (
	hotBackoffStart = time.Second
	hotBackoffMax   = 30 * time.Second
	// hotJitter bounds the random wait of a hot standby before its lease
	// write (S8).
	hotJitter = 50 * time.Millisecond
)

// hotStandby follows the log into its local store while another process
// holds the lease. Its state (S10) is one of following, behind,
// bootstrapping (restoring the newest snapshot), restarting and failed.
type hotStandby struct {
	// store is the local store; a bootstrap replaces it (Store returns
	// the current one).
	store  flowstore.Store
	boot   *bootstrapper
	blobs  blob.Store
	layout wal.Layout
	// poll is standby.heldLeasePollInterval: the wait after a miss (G8)
	// and between lease reads.
	poll time.Duration
	// behind is standby.behindLagThreshold.
	behind time.Duration
	log    *slog.Logger

	mu   sync.Mutex
	base metrics.StandbyState // following, restarting or failed
	// caughtUp is when the follower last found no next batch after
	// applying everything before it: the lag is measured from it.
	caughtUp time.Time
	applied  uint64 // batches applied since the start
}

func newHotStandby(store flowstore.Store, blobs blob.Store, layout wal.Layout, poll, behind time.Duration, log *slog.Logger) *hotStandby {
	return &hotStandby{store: store, blobs: blobs, layout: layout, poll: poll, behind: behind, log: log,
		base: metrics.StandbyFollowing, caughtUp: time.Now()}
}

// Store returns the local store the standby follows into: the one it was
// given, or the one a bootstrap restored. Call it once follow returned.
func (h *hotStandby) Store() flowstore.Store {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.store
}

// State returns the standby state and the lag: the time since the follower
// last caught up with the end of the log. A following standby whose lag
// exceeds behindLagThreshold is behind.
func (h *hotStandby) State() (metrics.StandbyState, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	lag := time.Since(h.caughtUp)
	st := h.base
	if st == metrics.StandbyFollowing && lag > h.behind {
		st = metrics.StandbyBehind
	}
	return st, lag
}

// Hot reports whether the standby is hot: following within
// behindLagThreshold (H3, S8).
func (h *hotStandby) Hot() bool {
	st, _ := h.State()
	return st == metrics.StandbyFollowing
}

// Applied returns the number of batches the follower applied.
func (h *hotStandby) Applied() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.applied
}

func (h *hotStandby) setBase(s metrics.StandbyState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.base = s
}

// follow follows the log until ctx ends. An empty local store is first
// restored from the newest snapshot, if the node has one (bootstrapping).
// Each round starts a wal.Follower at the local store's Applied()+1 and
// applies every batch it reads with the replay's apply (no effects, T1).
// When the next batch is not there it waits one poll interval before the
// next GET (one GET per poll, G8). After any error it is restarting: it
// waits a backoff (1 s doubling to 30 s, reset by an applied batch) and
// starts a new round from the local store's position. A next batch deleted
// by truncation (wal.ErrTruncated) is bootstrapping again: the local store
// is rebuilt from the newest snapshot and following goes on from there. A
// standby that cannot restore (no bootstrapper, or the restore lost its
// store) is failed until it takes over or stops.
func (h *hotStandby) follow(ctx context.Context) {
	if _, ok := h.store.Applied(); !ok && h.boot != nil {
		h.bootstrap(ctx, false)
	}
	bo := time.Duration(0)
	for {
		if h.Store() == nil {
			<-ctx.Done()
			return
		}
		var next uint64
		if seq, ok := h.store.Applied(); ok {
			next = seq + 1
		}
		f := wal.NewFollower(h.blobs, h.layout, next)
		err := h.round(ctx, f, serving.ReplayApply(h.store), &bo)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, wal.ErrTruncated) {
			if h.boot == nil {
				h.setBase(metrics.StandbyFailed)
				h.log.Error("hot standby failed: the log was truncated past the local store's position and this local store cannot be restored from a snapshot; not following",
					"next", f.NextSeq(), "err", err)
				<-ctx.Done()
				return
			}
			h.log.Warn("hot standby: the log was truncated past the local store; restoring the newest snapshot", "next", f.NextSeq())
			if h.bootstrap(ctx, true) {
				bo = 0
				continue
			}
		}
		if h.Store() == nil {
			continue // failed: wait for the end
		}
		bo = min(hotBackoffMax, max(hotBackoffStart, 2*bo))
		h.setBase(metrics.StandbyRestarting)
		h.log.Warn("hot standby: following the log failed; restarting", "next", f.NextSeq(), "err", err, "backoff", bo)
		if !lease.Sleep(ctx, bo) {
			return
		}
		h.setBase(metrics.StandbyFollowing)
	}
}

// bootstrap restores the local store from the newest snapshot (with must,
// having none is an error) while the state says bootstrapping. It reports
// whether following can go on from the store: false after an error, when
// the store is failed (lost) or kept as it was.
func (h *hotStandby) bootstrap(ctx context.Context, must bool) bool {
	h.setBase(metrics.StandbyBootstrapping)
	st, err := h.boot.bootstrap(ctx, h.Store(), must)
	h.mu.Lock()
	h.store = st
	h.mu.Unlock()
	switch {
	case err == nil:
		h.setBase(metrics.StandbyFollowing)
		return true
	case st == nil:
		h.setBase(metrics.StandbyFailed)
		h.log.Error("hot standby failed: restoring the newest snapshot failed and the local store is gone; not following (restart the process to try again)",
			"err", err)
		return false
	default:
		h.setBase(metrics.StandbyRestarting)
		h.log.Warn("hot standby: restoring the newest snapshot failed", "err", err)
		return false
	}
}

// round follows with f until an error.
func (h *hotStandby) round(ctx context.Context, f *wal.Follower, apply func(wal.Batch) error, bo *time.Duration) error {
	for {
		b, err := f.Next(ctx)
		switch {
		case err == nil:
			if err := apply(b); err != nil {
				return fmt.Errorf("apply batch %d: %w", b.Seq, err)
			}
			*bo = 0
			h.mu.Lock()
			h.applied++
			h.mu.Unlock()
			continue
		case errors.Is(err, wal.ErrNoBatch):
			h.mu.Lock()
			h.caughtUp = time.Now()
			h.mu.Unlock()
		default:
			return err
		}
		if !lease.Sleep(ctx, h.poll) {
			return ctx.Err()
		}
	}
}

// acquire waits for the lease while following, and takes it (S7, S8, S9),
// with lease.Acquire: it reads the lease every poll interval (and at its
// expiry, if sooner). A released or expired lease (Record.AvailableAt:
// expiry plus 1 s, L13) is taken after a random 0-50 ms when the standby
// is hot and after lagging (standby.laggingTakeoverDelay) when it is not
// (Config.BeforeWrite); the conditional write decides a race. A write lost
// to another process goes back to waiting; any other failure before the
// lease is held, permanent ones included, is retried after a backoff from
// 1 s to 30 s while the follower goes on (S9). A lease that names another
// node is a permanent error. It returns ctx's error when ctx ends.
func (h *hotStandby) acquire(ctx context.Context, cfg lease.Config, lagging time.Duration) (*lease.Holder, error) {
	log := h.log.With("key", cfg.Key, "processId", cfg.ProcessID)
	cfg.FailIfHeld, cfg.TakeOverHeld = false, false
	cfg.PollInterval = h.poll
	cfg.RetryStart, cfg.RetryMax, cfg.RetryPermanent = hotBackoffStart, hotBackoffMax, true
	cfg.BeforeWrite = func(ctx context.Context) error {
		st, lag := h.State()
		delay := lagging
		if st == metrics.StandbyFollowing {
			delay = rand.N(hotJitter + 1)
		}
		log.Info("lease available; taking over", "state", st, "lag", lag, "delay", delay)
		if !lease.Sleep(ctx, delay) {
			return ctx.Err()
		}
		return nil
	}
	return lease.Acquire(ctx, cfg)
}
