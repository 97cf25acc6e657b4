package node

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/wal"
)

// Review of the local-store-ahead rebuild: a host crash (processCrashSafe)
// keeps the newest snapshot and the manifest but loses the log's tail after
// the snapshot, which the local store had applied. The rebuild restores the
// snapshot (newer than the log's last batch below it, which truncation
// deleted) and fences at the snapshot's position: the flows of the snapshot
// stay, the flow whose start the log lost is gone, and the node writes on.
//
// Covers: T1, G2
func TestReview_SnapshotNewerThanTheLogTail(t *testing.T) {
	dir := t.TempDir()
	cfg := serveConfig(t, dir)
	cfg.Snapshots.EveryBatches = 2
	cfg.Snapshots.Keep = 1
	layout := wal.MustLayout("", "n1")
	var kept []string
	serveOnce(t, cfg, func(c dexpb.FlowServiceClient) {
		for _, id := range []string{"f1", "f2", "f3", "f4"} {
			startT(t, c, id)
		}
		blobs, err := fs.Open(cfg.Storage.FS.Dir, fs.Strict)
		if err != nil {
			t.Fatal(err)
		}
		defer blobs.Close()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if data, _, err := blobs.Get(t.Context(), layout.ManifestKey()); err == nil && !bytes.Contains(data, []byte(`"logStart":0`)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no snapshot within 10s")
			}
			time.Sleep(100 * time.Millisecond)
		}
		kept = logKeysOf(t, cfg)
		startT(t, c, "f2x")
	})
	// The host crash: the log's tail after the snapshot is lost, the
	// snapshot and the manifest are kept.
	lost := loseLogTail(t, cfg, kept)
	// (Truncation may delete kept batches meanwhile: count the new ones.)
	if lost == 0 {
		t.Fatalf("f2x's start wrote no batch: %v, kept %v", logKeysOf(t, cfg), kept)
	}

	serveOnce(t, cfg, func(c dexpb.FlowServiceClient) {
		for _, id := range []string{"f1", "f2", "f3", "f4"} {
			if _, err := c.GetFlowSummary(t.Context(), &dexpb.GetFlowSummaryRequest{FlowId: id}); err != nil {
				t.Errorf("%s, in the snapshot: %v", id, err)
			}
		}
		if _, err := c.GetFlowSummary(t.Context(), &dexpb.GetFlowSummaryRequest{FlowId: "f2x"}); status.Code(err) != codes.NotFound {
			t.Errorf("f2x, whose start the log lost: %v; want NOT_FOUND", err)
		}
		startT(t, c, "f6")
	})
}
