package node

// The lifecycle a process runs once its durable store and API are open:
// lease periods, and between them the hold-off after a step down and the
// standby phase (A3-A8, S1-S9). RunLocal (dev, local) and RunServe share it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/wal"
)

// lifecycle is what a process keeps across its lease periods.
type lifecycle struct {
	cfg     *config.Config
	log     *slog.Logger
	blobs   blob.Store
	layout  wal.Layout
	api     *apiSurface
	metrics *metrics.Metrics
	// leaseCfg acquires the lease; its ProcessID is the process's for its
	// whole life, so a take-back is by the same holder.
	leaseCfg lease.Config
	stateDir string
	open     func(dir string) (flowstore.Store, error)
	ready    func(net.Addr)
	abandon  <-chan struct{}
	// stuckBound is A7's bound (DefaultStuckStoreBound unless a test
	// shortens it).
	stuckBound time.Duration
	// boot restores the local store from the newest snapshot.
	boot *bootstrapper
	// view records takeovers and step downs for the web UI's node page;
	// nil records nothing.
	view *webView
	// values keeps the value objects read and written last, across the
	// process's lease periods (an object never changes).
	values *wal.ValueCache
}

func (l *lifecycle) hot() bool { return l.cfg.Standby.Mode == config.StandbyHot }

// run serves lease periods from holder on until the process stops, and
// returns what the last period returned. store, when set, is the local
// store the standby kept open (hot). After a step down it holds off and
// then either serves again (a take-back, or a later takeover as a
// standby) or stops.
func (l *lifecycle) run(ctx context.Context, holder *lease.Holder, store flowstore.Store) error {
	var pending *stepDownRequest // a step down answered once the take-back serves
	var outcome server.StepDownOutcome
	if l.values == nil {
		l.values = wal.NewValueCache(l.cfg.Limits.ValueCacheBytes)
		l.metrics.SetValueCache(l.values)
	}
	for {
		open := l.open
		if store != nil {
			st := store
			open = func(string) (flowstore.Store, error) { return st, nil }
		}
		p := &leasePeriod{cfg: l.cfg, log: l.log, blobs: l.blobs, layout: l.layout, inst: l.api.serving(),
			addr: l.api.lis.Addr(), holder: holder, stateDir: l.stateDir, open: open, openNew: l.open, ready: l.ready,
			abandon: l.abandon, metrics: l.metrics, stopping: l.api.stopping, boot: l.boot, endStandby: l.api.endStandbyPhases,
			values: l.values}
		if pending != nil {
			req, out := pending, outcome
			out.Holder = server.TakenBackByThisProcess
			out.ActiveEpoch, out.ActiveProcessID = holder.Epoch(), holder.ProcessID()
			p.onServing = func() { req.reply(out, nil) }
		}
		l.view.event("took the lease", holder.Epoch(), "")
		sd, err := p.run(ctx)
		if pending != nil {
			// Only if the take-back never served.
			pending.reply(server.StepDownOutcome{}, fmt.Errorf("took the lease back (epoch %d) but could not serve: %w",
				holder.Epoch(), err))
		}
		if sd == nil {
			return err
		}
		holder, store, pending, outcome, err = l.holdOff(ctx, sd)
		if err != nil {
			return err
		}
	}
}

// standby waits for the lease as a standby (S1-S3, S7-S9): cold waits idle
// (store must be nil), hot follows the log into store (opened here when
// nil). It returns the holder and, when hot, the open local store.
func (l *lifecycle) standby(ctx context.Context, store flowstore.Store) (*lease.Holder, flowstore.Store, error) {
	ph := l.enterStandby()
	if l.hot() {
		if store == nil {
			var err error
			if store, err = l.open(l.stateDir); err != nil {
				l.metrics.SetStandbyState(metrics.StandbyNotStandby)
				return nil, nil, fmt.Errorf("open local store %s: %w", l.stateDir, err)
			}
		}
		holder, store, err := l.followUntilAcquired(ctx, ph, store)
		if err != nil {
			if store != nil {
				_ = store.Close()
			}
			l.metrics.SetStandbyState(metrics.StandbyNotStandby)
			return nil, nil, fmt.Errorf("acquire lease: %w", err)
		}
		return holder, store, nil
	}
	if store != nil {
		_ = store.Close()
	}
	holder, err := lease.Acquire(ctx, l.leaseCfg)
	if err != nil {
		l.metrics.SetStandbyState(metrics.StandbyNotStandby)
		if errors.Is(err, lease.ErrHeld) {
			return nil, nil, fmt.Errorf("lease.failIfHeld is set and another process is active: %w", err)
		}
		return nil, nil, fmt.Errorf("acquire lease: %w", err)
	}
	return holder, nil, nil
}

// enterStandby makes the process a standby: its API phase answers that
// it is one (S6, P3) and the metrics say so.
func (l *lifecycle) enterStandby() *apiPhase {
	ph := l.api.current()
	if !ph.standby {
		ph = l.api.enter(true)
	}
	reason := fmt.Sprintf("this process is a %s standby of node %q; retry on the active process",
		l.cfg.Standby.Mode, l.cfg.NodeID)
	ph.srv.SetSteppingDown("")
	ph.srv.SetNotServingReason(reason)
	l.metrics.SetNotServingReason(reason)
	l.metrics.SetEpoch(0)
	l.metrics.SetStandbyState(metrics.StandbyCold)
	return ph
}

// follower is a hot standby following the log into its local store;
// stop stops it and returns the local store (restored from a snapshot, or
// nil when a failed restore lost it).
type follower struct {
	hs   *hotStandby
	stop func() flowstore.Store
}

// follow starts following the log into store, reported on ph's
// dex.HotStandby and in the metrics (S3, S10, H3).
func (l *lifecycle) follow(ctx context.Context, ph *apiPhase, store flowstore.Store) *follower {
	hs := newHotStandby(store, l.blobs, l.layout, l.cfg.Standby.HeldLeasePollInterval, l.cfg.Standby.BehindLagThreshold,
		l.log.With("standbyMode", config.StandbyHot))
	hs.boot = l.boot
	l.metrics.SetHotStandby(hs)
	ph.srv.SetHotStandby(hs.Hot)
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); hs.follow(fctx) }()
	return &follower{hs: hs, stop: func() flowstore.Store {
		cancel()
		<-done
		ph.srv.SetHotStandby(nil)
		l.metrics.SetHotStandby(nil)
		return hs.Store()
	}}
}

// followUntilAcquired runs a hot standby (S3) until it holds the lease:
// it follows the log into store and takes the lease over when it is
// released or expires (S7, S8, S9). The follower is stopped when it
// returns, with the local store it followed into (nil if a failed restore
// lost it: the lease period then opens it anew).
func (l *lifecycle) followUntilAcquired(ctx context.Context, ph *apiPhase, store flowstore.Store) (*lease.Holder, flowstore.Store, error) {
	f := l.follow(ctx, ph, store)
	holder, err := f.hs.acquire(ctx, l.leaseCfg, l.cfg.Standby.LaggingTakeoverDelay)
	store = f.stop()
	if err != nil {
		return nil, store, err
	}
	l.log.Info("hot standby takes over", "followedBatches", f.hs.Applied())
	return holder, store, nil
}

// holdOff is the process's part of a step down after the release (A5-A8).
// It enters a standby phase whose Describe and StepDown answer
// FAILED_PRECONDITION (A8) and whose public calls answer "stepped down",
// and waits in lease.Acquire with the hold-off's rules in Config.Decide
// (holdOffPolicy): it reads the lease every standby.heldLeasePollInterval,
// and
//
//   - once another process holds it, the step down answers
//     takenOverByAnotherProcess and the process goes on as a standby (A7);
//   - after standby.stepDownHoldOff, with the old period's local store
//     closed and the lease still free, it takes the lease back with a new
//     epoch; the step down answers takenBackByThisProcess once the new
//     period serves (the caller does that: the request is returned);
//   - when it cannot tell (the lease unreadable after the hold-off, the
//     take-back write failing), the step down answers unknown with the
//     reason and the process goes on as a standby;
//   - if the old period's local store is still open stuckBound after the
//     release (a stuck task, A7), the step down answers INTERNAL unless
//     another process took over, and the process exits 1 without taking
//     the lease either way.
//
// A hot process follows the log during the hold-off (A5), from when the
// old period's local store has closed.
func (l *lifecycle) holdOff(ctx context.Context, sd *steppedDown) (*lease.Holder, flowstore.Store, *stepDownRequest,
	server.StepDownOutcome, error) {
	holdOff := l.cfg.Standby.StepDownHoldOff
	out := server.StepDownOutcome{NodeID: l.cfg.NodeID, ReleasedEpoch: sd.epoch, HoldOff: holdOff}
	log := l.log.With("releasedEpoch", sd.epoch)
	ph := l.api.enter(true)
	ph.srv.SetSteppingDown(sd.message)
	l.metrics.SetNotServingReason(sd.message)
	l.metrics.SetEpoch(0)
	l.metrics.SetStandbyState(metrics.StandbyCold)
	log.Info("stepped down; holding off before competing for the lease again", "holdOff", holdOff)
	l.view.event("stepped down", sd.epoch, "released the lease; holding off "+holdOff.String())

	var store flowstore.Store
	var f *follower
	stopFollowing := func() {
		if f != nil {
			store = f.stop()
			f = nil
		}
	}
	defer stopFollowing()
	// asStandby answers the step down and goes on as a standby.
	asStandby := func() (*lease.Holder, flowstore.Store, *stepDownRequest, server.StepDownOutcome, error) {
		sd.req.reply(out, nil)
		stopFollowing()
		h, st, err := l.standby(ctx, store)
		return h, st, nil, out, err
	}
	p := &holdOffPolicy{
		end: sd.releasedAt.Add(holdOff), stuckEnd: sd.releasedAt.Add(l.stuckBound),
		poll: l.cfg.Standby.HeldLeasePollInterval, storeClosed: sd.storeClosed,
		onClosed: func() {
			if !l.hot() {
				return
			}
			st, err := l.open(l.stateDir)
			if err != nil {
				log.Warn("step down: reopening the local store to follow the log failed; holding off without following",
					"err", err)
				return
			}
			store = st
			f = l.follow(ctx, ph, store)
		},
	}
	cfg := l.leaseCfg
	cfg.FailIfHeld, cfg.TakeOverHeld, cfg.Decide = false, false, p.decide
	h, err := lease.Acquire(ctx, cfg)
	if h != nil {
		stopFollowing()
		log.Info("step down: nobody took over during the hold-off; took the lease back", "epoch", h.Epoch())
		return h, store, sd.req, out, nil
	}
	if ctx.Err() != nil {
		out.Holder, out.UnknownDetail = server.HolderUnknown, "the process is shutting down"
		sd.req.reply(out, nil)
		stopFollowing()
		if store != nil {
			_ = store.Close()
		}
		return nil, nil, nil, out, ctx.Err()
	}
	var end *holdOffEnd
	if !errors.As(err, &end) {
		end = &holdOffEnd{unknown: fmt.Sprintf("waiting for the lease during the hold-off failed: %v", err)}
	}
	switch {
	case end.takenOver != nil:
		rec := end.takenOver
		out.Holder, out.ActiveEpoch, out.ActiveProcessID = server.TakenOverByAnotherProcess, rec.Epoch, rec.Holder
		log.Info("step down: another process took over", "holder", rec.Holder, "epoch", rec.Epoch)
		if !p.closed {
			sd.req.reply(out, nil)
			return nil, nil, nil, out, fmt.Errorf("step down: %w (a task is stuck on it); exiting without taking the lease",
				ErrStuckStore)
		}
		return asStandby()
	case end.stuck:
		sd.req.reply(server.StepDownOutcome{}, fmt.Errorf(
			"%w %s after the release (a task is stuck on it) and no other process took over; this process exits without taking the lease",
			ErrStuckStore, l.stuckBound))
		return nil, nil, nil, out, fmt.Errorf("step down: %w after %s; exiting without taking the lease", ErrStuckStore, l.stuckBound)
	}
	out.Holder, out.UnknownDetail = server.HolderUnknown, end.unknown
	log.Warn("step down: " + out.UnknownDetail)
	return asStandby()
}

// holdOffPolicy is the hold-off's Config.Decide for lease.Acquire: its
// rules, applied to each read of the lease (and to a failed take-back
// write), in this order:
//
//  1. a lease another process holds ends the wait (taken over);
//  2. from end on, with the old period's local store closed, a lease read
//     is left to Acquire, which takes it back (a write lost to another
//     process reads again, and rule 1 names the winner); a failed read or
//     write ends the wait (unknown);
//  3. from stuckEnd on, with the store still open, the wait ends (stuck);
//  4. otherwise it waits heldLeasePollInterval, or until end, or until
//     the store closes, whichever is first, and reads again. A failed
//     read before end is read again at the next poll.
type holdOffPolicy struct {
	end, stuckEnd time.Time
	poll          time.Duration
	storeClosed   <-chan struct{}
	// onClosed runs once, when decide first finds storeClosed closed.
	onClosed func()
	closed   bool
}

// holdOffEnd is how holdOffPolicy ends the wait.
type holdOffEnd struct {
	takenOver *lease.Record // another process holds the lease
	stuck     bool          // the local store is still open at stuckEnd
	unknown   string        // why it cannot tell who holds the lease
}

func (e *holdOffEnd) Error() string {
	switch {
	case e.takenOver != nil:
		return fmt.Sprintf("hold-off: process %q holds the lease (epoch %d)", e.takenOver.Holder, e.takenOver.Epoch)
	case e.stuck:
		return "hold-off: " + ErrStuckStore.Error()
	}
	return "hold-off: " + e.unknown
}

func (p *holdOffPolicy) decide(o lease.Observation) lease.Decision {
	if !p.closed {
		select {
		case <-p.storeClosed:
			p.closed = true
			p.onClosed()
		default:
		}
	}
	switch {
	case o.Held:
		rec := o.Record
		return lease.Decision{Stop: &holdOffEnd{takenOver: &rec}}
	case p.closed && !o.At.Before(p.end):
		switch {
		case o.Err == nil:
			return lease.Decision{}
		case o.Write:
			return lease.Decision{Stop: &holdOffEnd{unknown: fmt.Sprintf("taking the lease back after the hold-off failed: %v", o.Err)}}
		}
		return lease.Decision{Stop: &holdOffEnd{unknown: fmt.Sprintf("reading the lease after the hold-off failed: %v", o.Err)}}
	case !p.closed && !o.At.Before(p.stuckEnd):
		return lease.Decision{Stop: &holdOffEnd{stuck: true}}
	}
	d := lease.Decision{Wait: p.poll}
	if p.closed && p.end.After(o.At) {
		d.Wait = min(d.Wait, p.end.Sub(o.At))
	}
	if !p.closed {
		d.Wake = p.storeClosed
	}
	return d
}
