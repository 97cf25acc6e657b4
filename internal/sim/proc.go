package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/node"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// proc is one simulated process of the node: a cold standby that acquires
// the lease, replays and fences the log into its local store, serves with
// a serving.Core and a wal.Writer under node.Supervise, and, when its
// period ends (lease lost, fenced, killed), starts again as a new process
// ID on the same local store (or an empty one after a kill that drops it).
type proc struct {
	id    int
	sim   *sim
	gate  gate
	store *procStore

	// hot: a hot standby (it follows the log while it waits).
	hot bool

	mu       sync.Mutex
	local    *localStore   // kept across restarts unless a kill drops it
	core     *serving.Core // non-nil while serving
	holder   *lease.Holder // the current period's lease, nil between periods
	cancel   context.CancelFunc
	done     chan struct{}
	restarts int
	// stepDown asks the serving period to step down.
	stepDown chan struct{}
	// srv is the process's API server: clients read through its
	// FlowService handlers, with the core as its backend while it serves.
	srv *server.Server

	// A host suspend stops the process's monotonic clock (its lease's
	// Config.Clock) while the others' run on: suspended is how far it
	// lags the bubble's clock, since (non-zero) when the current
	// suspend began.
	clockMu   sync.Mutex
	suspended time.Duration
	since     time.Time
}

// clock is the process's lease clock: the bubble's wall clock, and a
// monotonic clock that stood still while the host was suspended.
func (p *proc) clock() (mono, wall time.Time) {
	now := time.Now()
	p.clockMu.Lock()
	defer p.clockMu.Unlock()
	mono = now.Add(-p.suspended)
	if !p.since.IsZero() {
		mono = p.since.Add(-p.suspended)
	}
	return mono, now
}

// suspend suspends the host for d: the process is frozen (its gate) and
// its monotonic clock stops until it resumes.
func (p *proc) suspend(s *sim, d time.Duration) {
	p.clockMu.Lock()
	if p.since.IsZero() {
		p.since = time.Now()
	}
	p.clockMu.Unlock()
	p.gate.freeze()
	s.later(d, func() {
		p.clockMu.Lock()
		if !p.since.IsZero() {
			p.suspended += time.Since(p.since)
			p.since = time.Time{}
		}
		p.clockMu.Unlock()
		p.gate.resume()
	})
}

// active returns the core while the process serves.
// simValueObjectBytes is the value object threshold of the simulated
// processes: the workload's messages and the outputs and attributes that
// name a step ("A:f03", 7 bytes quoted) are objects, a chain's output
// ("f03") is not.
const simValueObjectBytes = 7

func (p *proc) active() *serving.Core {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.core
}

func (p *proc) setCore(c *serving.Core) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.core = c
	if c == nil {
		p.srv.SetBackend(nil)
	} else {
		p.srv.SetBackend(c)
	}
}

func (p *proc) setHolder(h *lease.Holder) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holder = h
}

// validLease reports the epoch of the lease the process holds and
// counts valid now (its own view, lease.Holder.Valid), or 0.
func (p *proc) validLease() uint64 {
	p.mu.Lock()
	h := p.holder
	p.mu.Unlock()
	if h != nil && h.Valid() {
		return h.Epoch()
	}
	return 0
}

// start runs the process until kill.
func (p *proc) start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return
	}
	p.gate.revive()
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	p.restarts++
	gen := p.restarts
	done := p.done
	go func() {
		defer close(done)
		p.run(ctx, gen)
	}()
}

// kill stops the process like SIGKILL: nothing is released, requests not
// yet sent are dropped, requests sent may still land. With drop the local
// store is lost too (a new host, or a wiped disk).
func (p *proc) kill(drop bool) {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.cancel = nil
	p.mu.Unlock()
	if cancel == nil {
		return
	}
	p.gate.kill()
	cancel()
	<-done
	if drop {
		p.mu.Lock()
		p.local = newLocalStore()
		p.mu.Unlock()
	}
}

// run is the process's life: acquire, serve a period, and start again
// (as a restarted process with a new process ID) when the period ends.
func (p *proc) run(ctx context.Context, gen int) {
	// n numbers the process's restarts after an exit 1; a step down
	// keeps the process (and its process ID).
	for n := 0; ctx.Err() == nil; {
		pid := fmt.Sprintf("p%d.%d.%d", p.id, gen, n)
		cfg := lease.Config{Store: p.store, Key: p.sim.layout.LeaseKey(), NodeID: nodeID,
			ProcessID: pid, Duration: leaseDuration, PollInterval: 250 * time.Millisecond, Logger: p.sim.log, Clock: p.clock}
		var stopFollowing func()
		if p.hot {
			// A hot standby follows the log while it waits, and takes an
			// available lease after a 0-50 ms jitter (S3, S7, S8).
			fctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); p.follow(fctx) }()
			stopFollowing = func() { cancel(); <-done }
			cfg.RetryPermanent = true
			jitter := time.Duration(hash(p.sim.cfg.Seed, pid, 0)%51) * time.Millisecond
			cfg.BeforeWrite = func(ctx context.Context) error {
				if !lease.Sleep(ctx, jitter) {
					return ctx.Err()
				}
				return nil
			}
		}
		h, err := lease.Acquire(ctx, cfg)
		if stopFollowing != nil {
			stopFollowing()
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			n++
			p.sim.event("%s: acquire: %v", pid, err)
			if !lease.Sleep(ctx, time.Second) {
				return
			}
			continue
		}
		p.sim.event("%s: acquired epoch %d", pid, h.Epoch())
		if p.hot {
			applied, _ := p.local.Applied()
			p.sim.event("%s: hot standby takes over at batch %d", pid, applied)
			p.sim.count("hot standby takeovers")
		}
		p.setHolder(h)
		err = p.period(ctx, h)
		p.setHolder(nil)
		if ctx.Err() != nil {
			return
		}
		p.sim.event("%s: period of epoch %d ended: %v", pid, h.Epoch(), err)
		if errors.Is(err, errSteppedDown) {
			// The hold-off before competing again (A5), as the same
			// process.
			if !lease.Sleep(ctx, stepDownHoldOff) {
				return
			}
			continue
		}
		p.sim.periodEnded(err)
		// The process exits 1 (L11) and its supervisor starts it again.
		n++
		if !lease.Sleep(ctx, restartDelay) {
			return
		}
	}
}

// period mirrors node's leasePeriod.run without its gRPC surface: renew
// from the start, restore a snapshot if needed, replay and fence into the
// local store, writer under node.Supervise, Recover, serve (with
// snapshots) until the lease or the writer stops, a step down, or the
// process is killed.
func (p *proc) period(ctx context.Context, h *lease.Holder) error {
	rctx0, stopRenew := context.WithCancel(context.WithoutCancel(ctx))
	renewDone := make(chan struct{})
	go func() { defer close(renewDone); _ = h.Run(rctx0) }()
	defer func() { stopRenew(); <-renewDone }()

	// The recovery ends when the lease stops or the process is killed.
	rctx, endRecovery := context.WithCancel(ctx)
	defer endRecovery()
	go func() {
		select {
		case <-h.Lost():
			endRecovery()
		case <-rctx.Done():
		}
	}()

	p.mu.Lock()
	store := p.local
	p.mu.Unlock()
	// An empty local store starts from the newest snapshot, if any; so
	// does one behind a truncated log (ErrTruncated).
	restore := func() error {
		restored, ok, err := loadLatest(rctx, p.store, p.sim.layout)
		if err != nil || !ok {
			return err
		}
		seq, _ := restored.Applied()
		p.sim.event("p%d: restored snapshot %d", p.id, seq+1)
		p.sim.count("snapshot restores")
		store = restored
		p.mu.Lock()
		p.local = restored
		p.mu.Unlock()
		return nil
	}
	if _, ok := store.Applied(); !ok {
		if err := restore(); err != nil {
			return fmt.Errorf("restore the newest snapshot: %w", err)
		}
	}
	from := func() uint64 {
		if seq, ok := store.Applied(); ok {
			return seq + 1
		}
		return 0
	}
	next, err := wal.Fence(rctx, p.store, p.sim.layout, h.Epoch(), from(), serving.ReplayWhile(rctx, store))
	if errors.Is(err, wal.ErrTruncated) {
		if err := restore(); err != nil {
			return fmt.Errorf("restore the newest snapshot: %w", err)
		}
		next, err = wal.Fence(rctx, p.store, p.sim.layout, h.Epoch(), from(), serving.ReplayWhile(rctx, store))
	}
	if err != nil {
		return fmt.Errorf("replay and fence the log: %w", err)
	}
	log := p.sim.log.With("proc", p.id, "epoch", h.Epoch())
	// Value objects from simValueObjectBytes on: the workload's longer
	// values (outputs and attributes naming their flow) travel beside the
	// log, through the same faulty store.
	core := serving.NewCore(serving.CoreConfig{NodeID: nodeID, ProcessID: h.ProcessID(), Epoch: h.Epoch(),
		Store: store, Lease: h, Logger: log,
		Engine: engine.New(engine.Config{ContinueAsNewHistoryEvents: p.sim.cfg.ContinueAsNewHistoryEvents}),
		Values: &wal.Values{Store: p.store, Layout: p.sim.layout}, ValueObjectBytes: simValueObjectBytes})
	w, err := wal.NewWriter(wal.WriterConfig{Store: p.store, Layout: p.sim.layout, Epoch: h.Epoch(), NextSeq: next,
		OnDurable: core.OnDurable, Logger: log})
	if err != nil {
		return err
	}
	core.SetWriter(w)
	supCtx, cancelSup := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSup()
	supDone := make(chan error, 1)
	go func() { supDone <- node.Supervise(supCtx, h, w) }()
	core.Start(supCtx)
	err = core.Recover(rctx)
	if err == nil && !h.Valid() {
		err = fmt.Errorf("recovered, then found the lease of epoch %d: %w", h.Epoch(), lease.ErrNotValid)
	}
	if err != nil {
		core.Stop()
		_ = w.Stop()
		<-supDone //nolint:errcheck // the period's error is err
		return err
	}
	select {
	case <-p.stepDown: // asked while it did not serve: refused
	default:
	}
	p.setCore(core)
	p.sim.event("p%d: serving epoch %d from batch %d", p.id, h.Epoch(), next)
	snapCtx, stopSnapshots := context.WithCancel(supCtx)
	snapDone := make(chan struct{})
	go func() { defer close(snapDone); p.snapshots(snapCtx, h, store) }()
	defer func() { stopSnapshots(); <-snapDone }()
	select {
	case <-ctx.Done():
		// Killed: like a crash, nothing drained, flushed or released.
		p.setCore(nil)
		core.Stop()
		cancelSup()
		<-supDone //nolint:errcheck // aborted: like a crash
		return ctx.Err()
	case err := <-supDone:
		p.setCore(nil)
		core.Fail(err)
		core.Stop()
		if err == nil {
			err = errors.New("supervise ended")
		}
		return err
	case <-p.stepDown:
		stopSnapshots()
		<-snapDone
		return p.stepDownNow(core, w, h, supDone)
	}
}

// errSteppedDown ends a period that stepped down.
var errSteppedDown = errors.New("stepped down")

// stepDownNow steps down like node's leasePeriod.stepDown (A3, A4):
// drain the attempts handed out (up to 2 s), stop the core, flush the
// writer, and release the lease so that a standby takes over at once
// (L12).
func (p *proc) stepDownNow(core *serving.Core, w *wal.Writer, h *lease.Holder, supDone <-chan error) error {
	p.sim.event("p%d: stepping down from epoch %d", p.id, h.Epoch())
	core.BeginDrain(server.DrainStepDown, 2*time.Second, "the server is stepping down")
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	idle := make(chan error, 1)
	go func() { idle <- core.WaitIdle(dctx) }()
	var supErr error
	select {
	case <-idle: //nolint:errcheck // a drain that timed out leaves the attempts to the next process (T2)
	case supErr = <-supDone:
		supDone = nil
	}
	cancel()
	p.setCore(nil)
	core.Stop()
	werr := w.Stop()
	if supDone != nil {
		supErr = <-supDone
	}
	if err := errors.Join(werr, supErr); err != nil {
		return fmt.Errorf("step down before the release: %w", err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := h.Release(rctx); err != nil {
		return fmt.Errorf("step down: release lease: %w", err)
	}
	p.sim.count("step downs")
	return errSteppedDown
}

var discard = slog.New(slog.DiscardHandler)

// follow is a hot standby's follower: it applies every batch of the log
// to the local store as it appears (wal.Follower, one GET per poll, G8),
// restores the newest snapshot when truncation passed it, and starts over
// from the local store's position after an error.
func (p *proc) follow(ctx context.Context) {
	for ctx.Err() == nil {
		p.mu.Lock()
		store := p.local
		p.mu.Unlock()
		var next uint64
		if seq, ok := store.Applied(); ok {
			next = seq + 1
		}
		f := wal.NewFollower(p.store, p.sim.layout, next)
		err := f.Follow(ctx, 250*time.Millisecond, serving.ReplayApply(store))
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, wal.ErrTruncated) {
			restored, ok, rerr := loadLatest(ctx, p.store, p.sim.layout)
			if rerr == nil && ok {
				seq, _ := restored.Applied()
				p.sim.event("p%d: hot standby restored snapshot %d", p.id, seq+1)
				p.sim.count("snapshot restores")
				p.mu.Lock()
				p.local = restored
				p.mu.Unlock()
				continue
			}
			if rerr == nil {
				rerr = errors.New("no snapshot")
			}
			err = fmt.Errorf("%w; restore: %w", err, rerr)
		}
		p.sim.event("p%d: following: %v", p.id, err)
		if !lease.Sleep(ctx, time.Second) {
			return
		}
	}
}
