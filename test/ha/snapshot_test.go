package ha

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/blob"
)

// A hot standby that starts after the active has written snapshots and
// truncated the log bootstraps its local store from the newest snapshot
// (state bootstrapping, not hot meanwhile), then follows the log's tail;
// when the active stops it takes over with every flow intact. A cold
// standby restores the snapshot at its takeover the same way.
//
// Covers: S3, S8, S10, T1, G7
func TestStandby_BootstrapsFromTheNewestSnapshot(t *testing.T) {
	for _, backend := range []string{"s3", "postgres"} {
		for _, hot := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/%s", backend, standbyKind(hot)), func(t *testing.T) { bootstrapFromSnapshot(t, backend, hot) })
		}
	}
}

func bootstrapFromSnapshot(t *testing.T, backend string, hot bool) {
	st, open := storageWithStore(t, backend)
	extra := "snapshots:\n  everyBatches: 5\n"
	if hot {
		extra += hotYAML
	}
	a := newServer(t, st, extra)
	pa := a.start(t)
	pa.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b := newServer(t, st, extra)
	addrs := []string{a.addr, b.addr}
	runWorker(t, ctx, addrs, 16, chainFlow)
	c := dialClient(t, ctx, addrs)
	const n = 30
	for i := range n {
		runChain(t, ctx, c, fmt.Sprintf("snap-%d", i), i)
	}
	blobs, layout := open(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Batch 0 is the first holder's fence, which truncation keeps
		// (wal doc, timeline (d)); batch 1 is the first records batch.
		_, _, err := blobs.Get(ctx, layout.LogKey(1))
		if errors.Is(err, blob.ErrNotFound) {
			break // deleted by truncation
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log was not truncated within 20s; batch 1 is still there\n%s", pa.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The truncation seen, the snapshot is counted once it completed. (A
	// snapshot may also have failed on a store timeout, on a loaded
	// machine: a failure keeps the log, which is what truncation checks.)
	for m := scrape(t, a.metrics); m["dexzd_snapshots_total"] == "0" || m["dexzd_snapshot_bytes"] == "0"; m = scrape(t, a.metrics) {
		if time.Now().After(deadline) {
			t.Fatalf("snapshot metrics = total %s, bytes %s, failures %s", m["dexzd_snapshots_total"],
				m["dexzd_snapshot_bytes"], m["dexzd_snapshot_failures_total"])
		}
		time.Sleep(50 * time.Millisecond)
	}

	pb := b.start(t)
	waitLog(t, pb, waitingLine, 30*time.Second)
	if hot {
		waitLog(t, pb, "local store restored from the newest snapshot", 30*time.Second)
		waitFollowing(t, b, 30*time.Second)
	}
	pa.Signal(t, syscall.SIGTERM)
	if code := pa.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the active's graceful stop exited %d", code)
	}
	pb.Serving(t, 30*time.Second)
	if !hot {
		waitLog(t, pb, "local store restored from the newest snapshot", time.Second)
	}
	for i := range n {
		res, err := c.WaitForFlow(ctx, fmt.Sprintf("snap-%d", i))
		if err != nil || res.Status != dex.StatusCompleted {
			t.Fatalf("snap-%d on the new active: %v, %v", i, res, err)
		}
		if out, err := dex.Output[int](res); err != nil || out != i+3 {
			t.Fatalf("snap-%d output = %d (%v), want %d", i, out, err, i+3)
		}
	}
	runChain(t, ctx, c, "after", 1)
}
