package node

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/localstore"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/wal"
)

// lockedBuffer is a log sink read while the snapshotter writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A graceful stop (or a step down) releases the lease while a snapshot is
// due or being written; the snapshot's lease check then fails with "lease
// no longer valid". That snapshot was cut off by the stop, not failed: it
// is logged at Info as cancelled, is not counted in
// dexzd_snapshot_failures_total, and the snapshotter does not try again
// (a released lease never becomes valid again).
func TestSnapshotter_CutOffByGracefulStopIsNotAFailure(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	blobs := mem.New()
	layout := wal.MustLayout("", "n1")
	h, err := lease.Acquire(ctx, lease.Config{Store: blobs, Key: layout.LeaseKey(), NodeID: "n1", ProcessID: "p1",
		Duration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := localstore.Open(t.TempDir(), localstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	if err := ls.Apply(5, func(*localstore.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	m := metrics.New()
	sn := &snapshotter{blobs: blobs, layout: layout, store: flowstore.WrapLocal(ls), holder: h, every: 1, keep: 2,
		log:  slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})),
		next: func() uint64 { return 6 }, written: func() uint64 { return 100 }, metrics: m}

	// The graceful stop: the lease is released first, the snapshots are
	// stopped after.
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); sn.run(runCtx, 0) }()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "snapshot") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-done: // it gave up on its own: the lease is released for good
	case <-time.After(1500 * time.Millisecond):
		t.Errorf("the snapshotter still runs after its lease was released")
	}
	cancel()
	<-done
	logged := out.String()
	if strings.Contains(logged, "snapshot failed") || strings.Contains(logged, "level=WARN") {
		t.Errorf("a snapshot cut off by a graceful stop was logged as a failure:\n%s", logged)
	}
	if !strings.Contains(logged, "level=INFO") || !strings.Contains(logged, "snapshot cancelled") {
		t.Errorf("want one Info line \"snapshot cancelled\", got:\n%s", logged)
	}
	if n := strings.Count(logged, "snapshot cancelled"); n > 1 {
		t.Errorf("logged %d times; want once", n)
	}
	if f, ok := sample(scrapeFamilies(t, m), "dexzd_snapshot_failures_total"); !ok || f != 0 {
		t.Errorf("dexzd_snapshot_failures_total = %v (found: %v); want 0", f, ok)
	}
}
