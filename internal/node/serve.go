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
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/open"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/wal"
)

// ServeOptions configures RunServe.
type ServeOptions struct {
	// Config is validated for config.ModeServe, with flag overrides
	// applied.
	Config *config.Config
	Logger *slog.Logger
	// Listener, when set, serves the API instead of listening on
	// Config.API.Listen.
	Listener net.Listener
	// OpenStore opens the local store in dir; nil means OpenLocalStore
	// (Pebble).
	OpenStore func(dir string) (flowstore.Store, error)
	// Ready, when set, is called with the API address once the process
	// serves as the active one.
	Ready func(addr net.Addr)
	// Standby, when set, is called with the API address when the process
	// starts waiting for the lease as a standby.
	Standby func(addr net.Addr)
	// Metrics record the process's metrics, served on metrics.listen if
	// that is set; nil means metrics.New().
	Metrics *metrics.Metrics
	// StuckStoreBound replaces DefaultStuckStoreBound (A7) when set;
	// tests shorten it.
	StuckStoreBound time.Duration
	// TracerProvider, when set, traces the API calls, the log writes and
	// the applies (package tracing); nil traces nothing.
	TracerProvider trace.TracerProvider
}

// ErrLocalStoreInUse: another process uses the local store directory.
var ErrLocalStoreInUse = errors.New("local store directory is in use by another process")

// CheckServeConfig reports what serve refuses in a configuration that
// config.Validate accepted, without reaching the durable store: a storage
// prefix the key layout refuses, a PostgreSQL DSN that does not parse or a
// table name it does not accept. The caller treats an error as a
// configuration error (exit 2), so that such a mistake is never taken for
// a store outage and waited out.
func CheckServeConfig(cfg *config.Config) error {
	if _, err := wal.NewLayout(open.Prefix(cfg.Storage), cfg.NodeID); err != nil {
		return fmt.Errorf("nodeId and storage prefix: %w", err)
	}
	return open.CheckPostgres(cfg.Storage)
}

// RunServe runs `dex-server-zd serve`: one process of a node on its durable
// store (storage.backend s3, postgres or fs), with its own local store in
// localStore.dir. It returns nil (or ctx's error) after a graceful stop and
// the fatal error otherwise; the caller exits with ExitCode (L11).
//
// Startup: lock localStore.dir (one process per local store), open the
// API (UNAVAILABLE and NOT_SERVING while not active) and the metrics
// listener, then open the durable store, read the lease key and probe
// conditional writes (G6), waiting while the store is unavailable
// (storewait.go: each attempt logged with its error and reported by
// /readyz and the UNAVAILABLE answers, 1 s doubling to 30 s apart; a
// permanent error stops startup). Then, as a
// hot standby (S3, serveHotStandby), follow the log while waiting for the
// lease; as a cold standby (S1, S2), wait while another process holds the lease,
// re-reading it every standby.heldLeasePollInterval: a released lease is
// taken at the next read (L12), an unreleased one once it has expired plus
// 1 s (L13). With lease.failIfHeld a held lease fails startup instead,
// naming the holder (L14). Holding the lease, the process serves one lease
// period exactly as dev does (leasePeriod.run: replay and fence, writer,
// Recover, serve; T1-T5); a failure before it serves releases the lease and
// returns the error (S9).
func RunServe(ctx context.Context, o ServeOptions) error {
	cfg := o.Config
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := CheckServeConfig(cfg); err != nil {
		return err
	}
	m := o.Metrics
	if m == nil {
		m = metrics.New()
	}
	log = log.With("nodeId", cfg.NodeID)

	unlock, err := lockLocalStoreDir(cfg.LocalStore.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	layout, err := wal.NewLayout(open.Prefix(cfg.Storage), cfg.NodeID)
	if err != nil {
		return fmt.Errorf("nodeId and storage prefix: %w", err)
	}
	var blobs blob.Store
	defer func() {
		if blobs != nil {
			_ = blobs.Close()
		}
	}()

	// The API and the metrics listener open first, so that probes and
	// callers get answers while the durable store is waited for: /livez
	// 200, /readyz 503 with the reason, NOT_SERVING, UNAVAILABLE.
	api, err := startAPI(cfg, config.ModeServe, log, o.Listener, true, o.TracerProvider)
	if err != nil {
		return err
	}
	defer api.stop()
	stopMetrics, err := startMetrics(cfg.Metrics, m, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	view := &webView{cfg: cfg, mode: config.ModeServe, api: api, metrics: m, started: time.Now(), leaseKey: layout.LeaseKey()}
	stopWeb, err := startWeb(ctx, view, log)
	if err != nil {
		return err
	}
	defer stopWeb()
	backend := "storage.backend " + cfg.Storage.Backend
	notServing := func(reason string) {
		api.current().srv.SetNotServingReason(reason)
		m.SetNotServingReason(reason)
	}
	notServing(fmt.Sprintf("starting: opening the durable store (%s); retry on the active process", backend))
	blobs, err = storeWait{layout: layout, log: log, backend: backend, waiting: notServing,
		open: func(ctx context.Context) (blob.Store, error) {
			s, err := open.Store(ctx, cfg.Storage)
			if err != nil {
				return nil, err
			}
			return m.MeterStore(s), nil
		}}.run(ctx)
	if err != nil {
		return err
	}
	view.setStore(blobs)

	// The Pebble store lives in a directory of its own under the locked
	// localStore.dir, so that a restore from a snapshot can replace it.
	stateDir := filepath.Join(cfg.LocalStore.Dir, StateDir)
	if cfg.Storage.Backend == config.BackendFS {
		if fsDir, err := filepath.Abs(cfg.Storage.FS.Dir); err == nil {
			if err := checkStateDir(stateDir, fsDir); err != nil {
				return err
			}
		}
	}
	open, restore := o.OpenStore, restorer(nil)
	if open == nil {
		open, restore = func(dir string) (flowstore.Store, error) { return flowstore.OpenLocal(dir, log) }, restorePebble(log)
	}
	l := &lifecycle{cfg: cfg, log: log, blobs: blobs, layout: layout, api: api, metrics: m, view: view,
		leaseCfg: lease.Config{
			Store: m.MeterLease(blobs, layout.LeaseKey()), Key: layout.LeaseKey(), NodeID: cfg.NodeID,
			ProcessID: lease.NewProcessID(), Duration: cfg.Lease.Duration, FailIfHeld: cfg.Lease.FailIfHeld,
			PollInterval: cfg.Standby.HeldLeasePollInterval, Logger: log,
		},
		stateDir: stateDir, open: open, ready: o.Ready, stuckBound: cmp.Or(o.StuckStoreBound, DefaultStuckStoreBound),
		boot: &bootstrapper{blobs: blobs, layout: layout, dir: stateDir, restore: restore, log: log}}
	view.setProcessID(l.leaseCfg.ProcessID)
	l.enterStandby()
	addr := api.lis.Addr()
	log.Info("standby", "addr", addr.String(), "standbyMode", cfg.Standby.Mode, "backend", cfg.Storage.Backend,
		"leaseKey", layout.LeaseKey(), "leaseDuration", cfg.Lease.Duration, "localStore", cfg.LocalStore.Dir)
	if o.Standby != nil {
		o.Standby(addr)
	}
	// Standby: cold waits idle, hot follows the log, until the lease is
	// ours; the lease period then takes over the local store a hot
	// standby kept current, and its replay starts where the follower
	// stopped.
	holder, store, err := l.standby(ctx, nil)
	if err != nil {
		return err
	}
	return l.run(ctx, holder, store)
}

// lockLocalStoreDir creates dir and takes an exclusive, non-blocking flock
// on the directory itself, held until the returned function runs: two
// processes must never share a local store. A filesystem that cannot lock
// is accepted (the local store's own lock still refuses a second opener
// when it opens).
func lockLocalStoreDir(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("localStore.dir: %w", err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("localStore.dir: %w", err)
	}
	err = flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		return func() {
			_ = flock(int(f.Fd()), unix.LOCK_UN)
			_ = f.Close()
		}, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		_ = f.Close()
		return nil, fmt.Errorf("localStore.dir: %w: %s is locked by another dex-server-zd process; every process needs a local store directory of its own",
			ErrLocalStoreInUse, dir)
	case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EINVAL):
		return func() { _ = f.Close() }, nil
	default:
		_ = f.Close()
		return nil, fmt.Errorf("localStore.dir: lock %s: %w", dir, err)
	}
}
