package node_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/node"
	"github.com/dexzd/dexzd/internal/wal"
)

// The active writes a snapshot every snapshots.everyBatches batches and
// deletes the log below it; a process whose local store is gone (a new
// disk) restores the newest snapshot and replays the log's tail: every
// flow is there, although the log's first batches no longer exist.
//
// Covers: G7, T1
func TestDev_SnapshotsTruncateTheLogAndRestore(t *testing.T) {
	dir := t.TempDir()
	snapshotsEvery4 := func(c *config.Config) { c.Snapshots.EveryBatches = 4 }
	n := startNode(t, dir, snapshotsEvery4)
	ctx := ctxT(t)
	w := connectWorker(t, n.conn, orderHello("w1", 4))
	const flows = 8
	for i := range flows {
		id := fmt.Sprintf("s-%d", i)
		if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: id,
			StartStep: &dexpb.Movement{StepType: "Start"}}); err != nil {
			t.Fatal(err)
		}
		expectAck(t, w.result(w.next(), decide(complete(jsonValue(i)), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	}

	blobs, err := node.OpenDataLog(dir, fs.Strict, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	layout := wal.MustLayout("", "node-1")
	deadline := time.Now().Add(15 * time.Second)
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
			t.Fatalf("the log was not truncated within 15s; batch 1 is still there")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if snaps, err := blobs.List(ctx, layout.SnapshotPrefix(), "", 10); err != nil || len(snaps) == 0 {
		t.Fatalf("snapshots = %v, %v", snaps, err)
	}
	w.close()
	if err := n.stop(t); err != nil {
		t.Fatal(err)
	}

	// A new local store: the old one is gone.
	if err := os.RemoveAll(filepath.Join(dir, node.StateDir)); err != nil {
		t.Fatal(err)
	}
	n2 := startNode(t, dir, snapshotsEvery4)
	for i := range flows {
		st, err := n2.flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: fmt.Sprintf("s-%d", i)})
		if err != nil || st.GetSummary().GetStatus() != dexpb.FlowStatus_FLOW_STATUS_COMPLETED {
			t.Fatalf("s-%d after the restore = %v, %v", i, st, err)
		}
	}
	// And it goes on serving.
	w2 := connectWorker(t, n2.conn, orderHello("w2", 4))
	if _, err := n2.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "after",
		StartStep: &dexpb.Movement{StepType: "Start"}}); err != nil {
		t.Fatal(err)
	}
	expectAck(t, w2.result(w2.next(), decide(complete(jsonValue(1)), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
}
