package node

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/wal"
)

// serveConfig is a serve configuration on a shared directory under dir.
func serveConfig(t *testing.T, dir string) *config.Config {
	t.Helper()
	cfg := config.Defaults()
	cfg.NodeID = "n1"
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Storage = config.Storage{Backend: config.BackendFS, FS: config.FS{Dir: filepath.Join(dir, "shared")}}
	cfg.LocalStore.Dir = filepath.Join(dir, "local")
	cfg.Lifecycle.AttemptDrainTimeout = time.Second
	if err := cfg.Validate(config.ModeServe); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

// A takeover that fails after the lease is held (here: the local store
// does not open) releases the lease, so that another process can take over
// at once, and returns the error (the process exits 1).
//
// Covers: S9, L11
func TestServe_FailedTakeoverReleasesTheLease(t *testing.T) {
	dir := t.TempDir()
	cfg := serveConfig(t, dir)
	broken := errors.New("disk on fire")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err := RunServe(ctx, ServeOptions{Config: cfg, OpenStore: func(string) (flowstore.Store, error) { return nil, broken }})
	if !errors.Is(err, broken) || ExitCode(err) != 1 {
		t.Fatalf("RunServe = %v (exit %d), want the open error and exit 1", err, ExitCode(err))
	}
	blobs, err := fs.Open(cfg.Storage.FS.Dir, fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	rec, _, err := lease.Read(ctx, blobs, wal.MustLayout("", "n1").LeaseKey())
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Released || rec.Epoch != 1 {
		t.Fatalf("lease after the failed takeover = %+v, want epoch 1 released", rec)
	}
}

// A graceful stop of a standby (while it waits for the lease) is a clean
// exit; the holder's lease is untouched.
func TestServe_StandbyStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	cfg := serveConfig(t, dir)
	blobs, err := fs.Open(cfg.Storage.FS.Dir, fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	key := wal.MustLayout("", "n1").LeaseKey()
	h, err := lease.Acquire(ctx, lease.Config{Store: blobs, Key: key, NodeID: "n1", ProcessID: "other/1/x", Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	standby := make(chan struct{})
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- RunServe(sctx, ServeOptions{Config: cfg, Metrics: m, Standby: func(net.Addr) { close(standby) }})
	}()
	<-standby
	fams := scrapeFamilies(t, m)
	cold, _ := sample(fams, "dexzd_hot_standby_state", "state", string(metrics.StandbyCold))
	leader, _ := sample(fams, "dexzd_leader")
	epoch, _ := sample(fams, "dexzd_node_epoch")
	if cold != 1 || leader != 0 || epoch != 0 {
		t.Fatalf("metrics of a standby: cold %v, leader %v, epoch %v", cold, leader, epoch)
	}
	stop()
	if err := <-done; ExitCode(err) != 0 {
		t.Fatalf("RunServe after a stop while standby = %v, want a clean exit", err)
	}
	if rec, _, err := lease.Read(ctx, blobs, key); err != nil || rec.Epoch != h.Epoch() || rec.Released {
		t.Fatalf("lease after the standby stopped = %+v, %v", rec, err)
	}
}

// Two processes must not share a local store: the second lock of a
// directory fails naming it; after the release it can be taken again.
func TestServe_LocalStoreDirIsExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local")
	unlock, err := lockLocalStoreDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockLocalStoreDir(dir)
	if !errors.Is(err, ErrLocalStoreInUse) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "localStore.dir") {
		t.Fatalf("second lock = %v, want ErrLocalStoreInUse naming localStore.dir %s", err, dir)
	}
	unlock()
	unlock2, err := lockLocalStoreDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	unlock2()
}

// serve accepts both standby modes.
func TestCheckServeConfig_AcceptsHotAndCold(t *testing.T) {
	cfg := config.Defaults()
	if err := CheckServeConfig(&cfg); err != nil {
		t.Fatalf("cold: %v", err)
	}
	cfg.Standby.Mode = config.StandbyHot
	if err := CheckServeConfig(&cfg); err != nil {
		t.Fatalf("hot: %v", err)
	}
}
