package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/blob/seglog"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// LocalOptions configures RunLocal.
type LocalOptions struct {
	Mode    config.Mode    // ModeDev or ModeLocal
	Config  *config.Config // validated, with flag overrides applied
	DataDir string
	Logger  *slog.Logger
	// Listener, when set, serves the API instead of listening on
	// Config.API.Listen.
	Listener net.Listener
	// OpenStore opens the local store in dir; nil means OpenLocalStore
	// (Pebble).
	OpenStore func(dir string) (flowstore.Store, error)
	// Ready, when set, is called with the API address once the node serves.
	Ready func(addr net.Addr)
	// Abandon, when closed, ends RunLocal the way a crash would: nothing is
	// drained, flushed or released, and RunLocal returns ErrAbandoned. Tests use
	// it to restart on the same directory.
	Abandon <-chan struct{}
	// Metrics, when set, record the process's metrics, served on
	// metrics.listen if that is set.
	Metrics *metrics.Metrics
	// StuckStoreBound replaces DefaultStuckStoreBound (A7) when set;
	// tests shorten it.
	StuckStoreBound time.Duration
	// TracerProvider, when set, traces the API calls, the log writes and
	// the applies (package tracing); nil traces nothing.
	TracerProvider trace.TracerProvider
}

// ErrAbandoned is RunLocal's result after LocalOptions.Abandon.
var ErrAbandoned = errors.New("abandoned")

// RunLocal runs a dev or local node on its data directory until ctx ends (a
// graceful shutdown: drain, flush, release the lease, return nil; K2, L12)
// or a fatal stop (lease lost, log write limit, fenced: the error; the
// caller exits with ExitCode, L11).
//
// Startup: lock DIR/dev.lock (D2, D4), refuse a directory an abrupt relaxed
// exit left (D7), open the log store in the durability mode (D5, D6), probe
// conditional writes (G6), listen, acquire the lease (taken over at once
// while the lock is held, D3), open the local store, replay the log and
// write the fence (T1, G2), start the writer under Supervise, recover
// timers and tasks (T2-T5), serve.
func RunLocal(ctx context.Context, o LocalOptions) (err error) {
	cfg := o.Config
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if !o.Mode.OnLocalDisk() {
		return fmt.Errorf("run: mode %q is not dev or local", o.Mode)
	}
	dir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	log = log.With("nodeId", cfg.NodeID)
	var cleanup []func()
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	lock, err := lockDataDir(dir)
	if err != nil {
		return err
	}
	cleanup = append(cleanup, lock.release)
	if !lock.locked {
		log.Warn("the data directory's filesystem cannot lock files; a lease held by an earlier process is waited out, not taken over",
			"lockFile", filepath.Join(dir, LockFile), "waitAtMost", cfg.Lease.Duration+lease.ExpiryMargin)
	}
	if err := checkRelaxedMarker(dir); err != nil {
		return err
	}
	durability := cfg.Dev.DurabilityMode
	abrupt := false // set when RunLocal ends the way a crash would
	if durability == config.DurabilityRelaxed {
		// Relaxed mode may buffer writes; this implementation does not (it
		// skips fsync like processCrashSafe), so every exit that runs this
		// code loses nothing and removes the marker. Only an abrupt end
		// (SIGKILL, crash, power loss) leaves it (D7).
		if err := writeRelaxedMarker(dir); err != nil {
			return err
		}
		cleanup = append(cleanup, func() {
			if !abrupt {
				if err := removeRelaxedMarker(dir); err != nil {
					log.Warn("relaxed-mode marker not removed", "err", err)
				}
			}
		})
	}
	fsMode := fs.Strict
	if durability != config.DurabilityStrict {
		fsMode = fs.ProcessCrashSafe
	}
	if fsMode == fs.Strict {
		// The data directory's own entry must be durable before the first
		// acknowledged write under it, whoever created it (D5).
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("sync the data directory's parent: %w", err)
		}
	}
	// While this process holds dev.lock, flock works on this filesystem:
	// log batches are appended to segment files (one fsync each in strict
	// mode instead of a new file and two fsyncs). Without it every batch
	// stays a file of its own.
	layout, err := wal.NewLayout("", cfg.NodeID)
	if err != nil {
		return fmt.Errorf("nodeId: %w", err)
	}
	// Value objects are fsynced in every mode: a record that survives a
	// host crash must find the object it names (written before it).
	logStore, err := OpenDataLog(dir, fsMode, lock.locked, []fs.Option{fs.SyncUnder(layout.ValuePrefix())}, seglog.WithLogger(log))
	if err != nil {
		return err
	}
	cleanup = append(cleanup, func() { _ = logStore.Close() })
	blobs := o.Metrics.MeterStore(logStore)
	if err := wal.ProbeConditionalWrites(ctx, blobs, layout); err != nil {
		return err
	}

	api, err := startAPI(cfg, o.Mode, log, o.Listener, false, o.TracerProvider)
	if err != nil {
		return err
	}
	cleanup = append(cleanup, api.stop)
	log.Info("listening", "addr", api.lis.Addr().String(), "dataDir", dir, "durability", durability, "leaseDuration", cfg.Lease.Duration)
	stopMetrics, err := startMetrics(cfg.Metrics, o.Metrics, log)
	if err != nil {
		return err
	}
	cleanup = append(cleanup, stopMetrics)
	view := &webView{cfg: cfg, mode: o.Mode, api: api, metrics: o.Metrics, started: time.Now(), leaseKey: layout.LeaseKey()}
	view.setStore(blobs)
	stopWeb, err := startWeb(ctx, view, log)
	if err != nil {
		return err
	}
	cleanup = append(cleanup, stopWeb)

	leaseCfg := lease.Config{
		Store: o.Metrics.MeterLease(blobs, layout.LeaseKey()), Key: layout.LeaseKey(), NodeID: cfg.NodeID,
		ProcessID: lease.NewProcessID(), Duration: cfg.Lease.Duration, FailIfHeld: cfg.Lease.FailIfHeld,
		TakeOverHeld: lock.locked, PollInterval: cfg.Standby.HeldLeasePollInterval, Logger: log,
	}
	view.setProcessID(leaseCfg.ProcessID)
	holder, err := lease.Acquire(ctx, leaseCfg)
	if err != nil {
		return fmt.Errorf("acquire lease: %w", err)
	}

	open, restore := o.OpenStore, restorer(nil)
	if open == nil {
		open, restore = func(dir string) (flowstore.Store, error) { return flowstore.OpenLocal(dir, log) }, restorePebble(log)
	}
	stateDir := cfg.LocalStore.Dir
	if stateDir == "" {
		stateDir = filepath.Join(dir, StateDir)
	} else if err := checkStateDir(stateDir, dir); err != nil {
		return err
	}
	l := &lifecycle{cfg: cfg, log: log, blobs: blobs, layout: layout, api: api, metrics: o.Metrics, view: view,
		leaseCfg: leaseCfg, stateDir: stateDir, open: open, ready: o.Ready, abandon: o.Abandon,
		stuckBound: cmp.Or(o.StuckStoreBound, DefaultStuckStoreBound),
		boot:       &bootstrapper{blobs: blobs, layout: layout, dir: stateDir, restore: restore, log: log}}
	err = l.run(ctx, holder, nil)
	abrupt = errors.Is(err, ErrAbandoned)
	return err
}

// OpenDataLog opens the durable store of a dev or local data directory:
// the fs store in DIR/log (strict fsyncs, or none with fs.ProcessCrashSafe;
// fsOpts configure it),
// with the log batches appended to segment files in DIR/log-segments when
// segments is set (it needs a filesystem whose flock works; package
// seglog; opts such as seglog.WithLogger, which reports a torn tail cut
// off at open, D6). Tools and tests that read a data directory's log open
// it the same way.
func OpenDataLog(dir string, mode fs.Mode, segments bool, fsOpts []fs.Option, opts ...seglog.Option) (blob.Store, error) {
	files, err := fs.Open(filepath.Join(dir, LogDir), mode, fsOpts...)
	if err != nil {
		return nil, err
	}
	if !segments {
		return files, nil
	}
	seg, err := seglog.Open(filepath.Join(dir, SegmentDir), files, mode == fs.Strict, opts...)
	if err != nil {
		_ = files.Close()
		return nil, fmt.Errorf("open the log segments: %w", err)
	}
	return seg, nil
}

// shutdown is the graceful stop (K2, L12): stop answering public calls,
// tell workers to drain and wait up to lifecycle.attemptDrainTimeout for
// the results of running attempts, end the streams, flush the writer,
// release the lease.
func shutdown(log *slog.Logger, cfg *config.Config, srv *server.Server, g *grpc.Server, core *serving.Core,
	w *wal.Writer, holder *lease.Holder, supDone <-chan error) error {
	drain := cfg.Lifecycle.AttemptDrainTimeout
	log.Info("shutting down: draining", "attemptDrainTimeout", drain)
	core.BeginDrain(server.DrainShutdown, drain, "the server is shutting down")
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	var supErr error
	idle := make(chan error, 1)
	go func() { idle <- core.WaitIdle(dctx) }()
	select {
	case err := <-idle:
		if err != nil {
			log.Warn("drain timed out; running attempts will time out and be retried", "err", err)
		}
	case supErr = <-supDone:
		supDone = nil
	}
	cancel()
	srv.Close()
	core.Stop()
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		g.Stop()
	}
	werr := w.Stop()
	if supDone != nil {
		supErr = <-supDone
	}
	if err := errors.Join(werr, supErr); err != nil {
		return err
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := holder.Release(rctx); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	log.Info("stopped", "released", true)
	return nil
}

// syncDir fsyncs a directory, making the entries in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkStateDir refuses a local store directory that is the data
// directory or one of its parents: the store is removed and rebuilt from
// the log when it is ahead of it or restored from a snapshot, which must
// never touch the log, the segments or the lock.
func checkStateDir(stateDir, dataDir string) error {
	s, err := filepath.Abs(stateDir)
	if err != nil {
		return fmt.Errorf("localStore.dir: %w", err)
	}
	if rel, err := filepath.Rel(s, dataDir); err == nil && (rel == "." || !strings.HasPrefix(rel, "..")) {
		return fmt.Errorf("localStore.dir %s holds the data directory %s: give the local store a directory of its own (default: %s)",
			stateDir, dataDir, filepath.Join(dataDir, StateDir))
	}
	return nil
}
