package node

// One lease period, from the acquired lease to the end of serving: renew
// the lease from the start; open the local store, replay and fence, writer
// under Supervise, Recover, serve, stop. dev and local (RunLocal) and serve
// (RunServe) differ only in how they get the durable store and the lease.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// leasePeriod is one period of holding the lease, with everything the
// process set up before it acquired it.
type leasePeriod struct {
	cfg    *config.Config
	log    *slog.Logger
	blobs  blob.Store
	layout wal.Layout
	// inst is the serving instance the period serves in; addr is the
	// process's API address.
	inst   *apiPhase
	addr   net.Addr
	holder *lease.Holder
	// stateDir is the local store's directory; open opens it.
	stateDir string
	open     func(dir string) (flowstore.Store, error)
	// openNew opens the directory's store anew (open may hand over the
	// store a hot standby kept open): rebuild uses it.
	openNew func(dir string) (flowstore.Store, error)
	ready   func(net.Addr)
	// onServing, when set, is called once the period serves.
	onServing func()
	// endStandby, when set, is called as the gate opens: it closes the
	// connections the process accepted as a standby
	// (apiSurface.endStandbyPhases).
	endStandby func()
	abandon    <-chan struct{}
	metrics    *metrics.Metrics
	// values is the process's value object cache (lifecycle.values).
	values *wal.ValueCache
	// stopping is closed when the process's API stops.
	stopping <-chan struct{}
	// boot restores the local store from the newest snapshot when it is
	// empty or behind a truncated log; nil never restores.
	boot *bootstrapper
}

// run serves the period: renew the lease from the start (the period's one
// renewal loop, L2), open the local store, restore it from a snapshot if
// needed, replay the log from its applied position and write the fence (T1,
// G2), start the writer under Supervise, Recover (T2-T5), open the gate
// (only with a valid lease, H2), then serve until ctx ends (the graceful
// stop: drain, flush, release; K2, L12), a step down (drain, flush,
// release; A3, A4: it returns the steppedDown the hold-off continues from),
// a fatal stop (lease lost, log write limit, fenced: that error; L7, L9,
// L10, G4) or abandon (ErrAbandoned: nothing drained, flushed or released,
// like a crash).
//
// The recovery may take longer than the lease (a snapshot restore, a cold
// replay of thousands of batches); the renewal keeps the lease meanwhile. A
// lease that stops during the recovery (lost, not renewed in time: L7, L9)
// ends it at once: run returns the lease's error and releases nothing (the
// process exits 1, L11). Any other failure before the gate opens releases
// the lease, so that another process can take over at once, and returns
// the error (S9; the process exits 1).
func (p *leasePeriod) run(ctx context.Context) (sd *steppedDown, err error) {
	renewing := renew(ctx, p.holder)
	defer renewing.stop()
	log := p.log.With("epoch", p.holder.Epoch())
	p.metrics.SetEpoch(p.holder.Epoch())
	p.metrics.SetStandbyState(metrics.StandbyNotStandby)
	served := false
	defer func() {
		if err == nil || served || errors.Is(err, ErrAbandoned) {
			return
		}
		if lerr := p.holder.Err(); lerr != nil {
			// The lease stopped (L7, L9): that ended the recovery, the
			// error is the lease's, and there is nothing to release.
			if err != lerr {
				log.Info("recovery ended by the lease's stop", "err", err)
				err = lerr
			}
			return
		}
		if errors.Is(err, lease.ErrNotValid) {
			return // ran out before the renewal noticed (a freeze): nothing to release either
		}
		p.releaseAfterFailure(log, err)
	}()
	// The recovery runs under rctx, which ends when the lease stops.
	rctx, endRecovery := renewing.guard(ctx)
	defer endRecovery()

	store, err := p.open(p.stateDir)
	if err != nil {
		return nil, fmt.Errorf("open local store %s: %w", p.stateDir, err)
	}
	// After a step down the store closes in the background: a task stuck
	// on it must not stop the process from answering the step down (A7).
	// The snapshots stop first.
	stopSnapshots := func() {}
	storeClosed := make(chan struct{})
	closeStore := func() {
		stopSnapshots()
		if store != nil {
			_ = store.Close()
		}
		close(storeClosed)
	}
	defer func() {
		if sd == nil {
			closeStore()
		}
	}()
	// An empty local store starts from the newest snapshot, if any.
	if _, ok := store.Applied(); !ok && p.boot != nil {
		if store, err = p.boot.bootstrap(rctx, store, false); err != nil {
			return nil, err
		}
	}
	flowstore.LimitStateCache(store, p.cfg.Limits.StateCacheBytes) // before the replay fills it
	var from uint64
	if seq, ok := store.Applied(); ok {
		from = seq + 1
	}
	next, err := wal.Fence(rctx, p.blobs, p.layout, p.holder.Epoch(), from, serving.ReplayWhile(rctx, store))
	if errors.Is(err, wal.ErrTruncated) && p.boot != nil {
		// The log was truncated past the store (a process that was away
		// for long): restore the newest snapshot and replay its tail.
		log.Warn("the log was truncated past the local store; restoring the newest snapshot", "from", from)
		if store, err = p.boot.bootstrap(rctx, store, true); err != nil {
			return nil, err
		}
		flowstore.LimitStateCache(store, p.cfg.Limits.StateCacheBytes)
		seq, _ := store.Applied()
		from = seq + 1
		next, err = wal.Fence(rctx, p.blobs, p.layout, p.holder.Epoch(), from, serving.ReplayWhile(rctx, store))
	}
	if errors.Is(err, wal.ErrLocalAhead) {
		// The local store applied batches the log no longer holds (a host
		// crash lost the tail of a log written without fsync): the log is
		// the truth. Rebuild the store from it; fencing after the store's
		// position would leave a gap that readers take for the log's end.
		log.Warn("the local store is ahead of the log; rebuilding it from the log", "err", err)
		if store, err = p.rebuild(rctx, store); err != nil {
			return nil, err
		}
		from = 0
		if seq, ok := store.Applied(); ok {
			from = seq + 1
		}
		next, err = wal.Fence(rctx, p.blobs, p.layout, p.holder.Epoch(), from, serving.ReplayWhile(rctx, store))
	}
	if err != nil {
		return nil, fmt.Errorf("replay and fence the log: %w", err)
	}
	log.Info("log replayed and fenced", "from", from, "fence", next-1)

	srv := p.inst.srv
	eng := engine.New(engine.Config{MaxPayloadBytes: p.cfg.Limits.MaxPayloadBytes,
		MaxRequestBytes: p.cfg.Limits.MaxRequestBytes, MaxFlowAttributeBytes: p.cfg.Limits.MaxFlowAttributeBytes,
		ContinueAsNewHistoryEvents: p.cfg.Limits.ContinueAsNewHistoryEvents})
	// A log record holds the records of one request: never refuse one the
	// engine accepted (engine.MaxDecisionBytes).
	maxBatch := max(2*srv.MaxMessageBytes(), eng.MaxDecisionBytes()) + (1 << 20)
	// fatal carries a store error the core met outside the writer (a value
	// object refused as permanent): it ends the period as the writer's
	// own stop does.
	fatal := make(chan error, 1)
	core := serving.NewCore(serving.CoreConfig{
		NodeID: p.cfg.NodeID, ProcessID: p.holder.ProcessID(), Epoch: p.holder.Epoch(), Store: store,
		Engine: eng,
		Lease:  p.holder, Logger: log, MaxRecordBytes: maxBatch - 8, Metrics: p.metrics,
		Admission: serving.AdmissionLimits{MaxPendingRequests: p.cfg.Limits.MaxPendingRequests,
			MaxPendingBytes: p.cfg.Limits.MaxPendingBytes, MaxQueuedTasks: p.cfg.Limits.MaxQueuedTasks,
			MaxFlowWaiters: p.cfg.Limits.MaxFlowWaiters},
		Values:           &wal.Values{Store: p.blobs, Layout: p.layout, Cache: p.values},
		ValueObjectBytes: p.cfg.Limits.ValueObjectBytes,
		Fatal: func(err error) {
			select {
			case fatal <- err:
			default:
			}
		},
	})
	// maxBatch is the largest record; group commit gathers records into
	// batches of up to wal.DefaultMaxBatchBytes, sized to be written within
	// the store's attempt timeout, and a larger record is written alone.
	w, err := wal.NewWriter(wal.WriterConfig{Store: p.blobs, Layout: p.layout, Epoch: p.holder.Epoch(), NextSeq: next,
		OnDurable: core.OnDurable, OnBatch: p.metrics.WriterHook(), MaxRecordBytes: maxBatch, Logger: log,
		Tracer: srv.Tracer(), StoreName: p.cfg.Storage.Backend})
	if err != nil {
		return nil, err
	}
	core.SetWriter(w)
	p.metrics.SetWriter(w)
	defer p.metrics.EndWriter(w)
	supCtx, cancelSup := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSup()
	supDone := make(chan error, 1)
	go func() { supDone <- Supervise(supCtx, p.holder, w) }()
	core.Start(supCtx)
	err = core.Recover(rctx)
	if err == nil && !p.holder.Valid() {
		// Never open the gate or report ready on a lease that is not
		// valid (H2); a stop of the renewal is the error returned.
		err = fmt.Errorf("recovered, then found the lease of epoch %d: %w", p.holder.Epoch(), lease.ErrNotValid)
	}
	if err != nil {
		core.Stop()
		_ = w.Stop()
		if serr := <-supDone; serr != nil {
			log.Error("supervise", "err", serr)
		}
		return nil, err
	}
	served = true
	snapCtx, cancelSnapshots := context.WithCancel(supCtx)
	snapDone := make(chan struct{})
	go func() {
		defer close(snapDone)
		sn := &snapshotter{blobs: p.blobs, layout: p.layout, store: store, holder: p.holder, every: p.cfg.Snapshots.EveryBatches,
			keep: p.cfg.Snapshots.Keep, log: log, next: w.NextSeq,
			written: func() uint64 { return w.Stats().Bytes }, metrics: p.metrics}
		sn.run(snapCtx, next)
	}()
	stopSnapshots = func() { cancelSnapshots(); <-snapDone }
	requests := make(chan *stepDownRequest, 1)
	srv.SetStepDown(stepDownFunc(requests))
	srv.SetBackend(core)
	if p.endStandby != nil {
		p.endStandby()
	}
	p.metrics.SetNotServingReason("")
	p.metrics.SetActive(core)
	defer p.metrics.SetActive(nil)
	log.Info("serving", "addr", p.addr.String())
	if p.ready != nil {
		p.ready(p.addr)
	}
	if p.onServing != nil {
		p.onServing()
	}

	select {
	case <-ctx.Done():
		return nil, shutdown(log, p.cfg, srv, p.inst.g, core, w, p.holder, supDone)
	case req := <-requests:
		sd, err := p.stepDown(log, req, core, w, supDone)
		if sd != nil {
			go closeStore()
			sd.storeClosed = storeClosed
		}
		return sd, err
	case err := <-supDone:
		// Stop renewing (the process stops, L11), refuse at once (the
		// gate is closed: UNAVAILABLE, NOT_SERVING; L15), end the
		// streams, and let the calls already read get that answer before
		// the connections close.
		renewing.stop()
		core.Fail(err)
		srv.Close()
		core.Stop()
		stopGRPC(p.inst.g, time.Second)
		return nil, err
	case err := <-fatal:
		// The same end, for a store failure outside the writer; the
		// writer is stopped with it (nothing more is acknowledged).
		renewing.stop()
		core.Fail(err)
		srv.Close()
		core.Stop()
		cancelSup()
		if werr := <-supDone; werr != nil {
			log.Info("the writer stopped", "err", werr)
		}
		stopGRPC(p.inst.g, time.Second)
		return nil, err
	case <-p.abandon:
		srv.Close()
		p.inst.g.Stop()
		core.Stop()
		cancelSup()     // aborts the writer
		renewing.stop() // and no more renewals: like a crash
		if err := <-supDone; err != nil {
			log.Info("abandoned", "err", err)
		}
		return nil, ErrAbandoned
	}
}

// stopGRPC stops g gracefully (calls in progress finish, new ones are
// refused), and at once after timeout.
func stopGRPC(g *grpc.Server, timeout time.Duration) {
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(timeout):
		g.Stop()
	}
}

// releaseAfterFailure gives the lease up after a failure before serving
// (S9). A lease already lost or fenced stays with its new holder.
func (p *leasePeriod) releaseAfterFailure(log *slog.Logger, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.holder.Release(ctx); err != nil {
		log.Warn("lease not released after a failed takeover", "err", err, "cause", cause)
		return
	}
	log.Info("lease released after a failed takeover", "cause", cause)
}

// rebuild replaces the local store with an empty one, restored from the
// newest snapshot if the node has one, for a replay of the log from there.
func (p *leasePeriod) rebuild(ctx context.Context, store flowstore.Store) (flowstore.Store, error) {
	if err := store.Close(); err != nil {
		return nil, fmt.Errorf("rebuild the local store: close it: %w", err)
	}
	if err := wipeLocalStore(p.stateDir); err != nil {
		return nil, fmt.Errorf("rebuild the local store: %w", err)
	}
	open := p.openNew
	if open == nil {
		open = p.open
	}
	store, err := open(p.stateDir)
	if err != nil {
		return nil, fmt.Errorf("rebuild the local store: open %s: %w", p.stateDir, err)
	}
	if p.boot != nil {
		restored, err := p.boot.bootstrap(ctx, store, false)
		if err != nil {
			if restored != nil {
				_ = restored.Close()
			}
			return nil, fmt.Errorf("rebuild the local store: %w", err)
		}
		store = restored
	}
	flowstore.LimitStateCache(store, p.cfg.Limits.StateCacheBytes)
	return store, nil
}

// wipeLocalStore removes the local store's directory, and refuses when it
// holds anything of the node's durable data: the data directory's lock,
// log or log segments (a localStore.dir that names the data directory
// itself, or one of its parents). Those are the truth a rebuild replays.
func wipeLocalStore(dir string) error {
	for _, name := range []string{LockFile, "log", "log-segments", "manifest"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("refusing to remove %s: it holds %s, the node's durable data, not only the local store (point localStore.dir at a directory of its own)", dir, name)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
