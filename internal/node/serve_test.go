package node

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
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
	m := NewMetrics()
	standby := make(chan struct{})
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- RunServe(sctx, ServeOptions{Config: cfg, Metrics: m, Standby: func(net.Addr) { close(standby) }})
	}()
	<-standby
	if s := m.snapshot(); s.state != StandbyStateCold || s.leader || s.epoch != 0 {
		t.Fatalf("metrics of a standby = %+v", s)
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

// The metrics text: every series with HELP and TYPE, dexzd_leader from the
// serving instance's gate, one standby state set.
//
// Covers: P4
func TestMetrics_Text(t *testing.T) {
	m := NewMetrics()
	var text strings.Builder
	if err := m.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# TYPE dexzd_leader gauge\ndexzd_leader 0\n",
		"# TYPE dexzd_node_epoch gauge\ndexzd_node_epoch 0\n",
		"dexzd_hot_standby_state{state=\"not_standby\"} 1\n",
		"dexzd_hot_standby_state{state=\"cold\"} 0\n",
		"dexzd_hot_standby_state{state=\"following\"} 0\n",
		"# TYPE dexzd_lease_renewals_total counter\ndexzd_lease_renewals_total 0\n",
		"dexzd_log_batches_total 0\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, text.String())
		}
	}

	gate := &fakeGate{serving: true}
	m.setStandbyState(StandbyStateCold)
	m.setActive(gate)
	m.setEpoch(7)
	m.leaseRenewal(nil)
	m.leaseRenewal(nil)
	m.leaseRenewal(errors.New("timeout"))
	s := m.snapshot()
	if !s.leader || s.epoch != 7 || s.state != StandbyStateCold || s.renewals != 2 || s.renewalFailures != 1 {
		t.Fatalf("snapshot = %+v", s)
	}
	gate.serving = false // lease no longer valid: not the leader at once
	if m.snapshot().leader {
		t.Fatal("dexzd_leader is 1 while the instance does not serve")
	}
	var nilMetrics *Metrics
	nilMetrics.leaseRenewal(nil) // a nil *Metrics records nothing
	nilMetrics.setActive(gate)
}

type fakeGate struct{ serving bool }

func (g *fakeGate) Serving() bool { return g.serving }

// The lease store wrapper counts renewal writes only: not the acquisition
// (write 1), not the release.
func TestLeaseStore_CountsRenewals(t *testing.T) {
	ctx := t.Context()
	m := NewMetrics()
	raw := mem.New()
	const key = "nodes/n1/lease"
	s := leaseBlobs(raw, key, m)
	rec := lease.Record{NodeID: "n1", Epoch: 1, Holder: "h", Duration: time.Second, RenewedAt: time.Now().UTC(), Write: 1}
	v, err := s.PutIfAbsent(ctx, key, rec.Encode())
	if err != nil {
		t.Fatal(err)
	}
	rec.Write = 2
	if v, err = s.PutIfMatch(ctx, key, rec.Encode(), v); err != nil {
		t.Fatal(err)
	}
	rec.Write = 3
	if _, err := s.PutIfMatch(ctx, key, rec.Encode(), "stale"); !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("stale renewal = %v", err)
	}
	rec.Write, rec.Released = 4, true
	if _, err := s.PutIfMatch(ctx, key, rec.Encode(), v); err != nil {
		t.Fatal(err)
	}
	if got := m.snapshot(); got.renewals != 1 || got.renewalFailures != 1 {
		t.Fatalf("renewals %d, failures %d; want 1, 1", got.renewals, got.renewalFailures)
	}
}
