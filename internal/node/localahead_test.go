package node

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/wal"
)

// A host crash can lose the tail of a log written without fsync while the
// local store kept the batches it had applied from it. The restarted
// process must take the log as the truth: rebuild the local store from it
// (the lost start is gone) and fence right after the log's last batch, so
// the log stays without a gap. Before, it fenced after the store's
// position: the log had a gap (which readers take for its end) and the
// store showed a flow no log holds.
//
// Covers: T1, G2
func TestServe_LocalStoreAheadOfTheLogIsRebuilt(t *testing.T) {
	cfg := serveConfig(t, t.TempDir())
	layout := wal.MustLayout("", "n1")
	var kept []string
	serveOnce(t, cfg, func(c dexpb.FlowServiceClient) {
		startT(t, c, "f1")
		kept = logKeysOf(t, cfg)
		startT(t, c, "f2")
	})
	// The host crash: every batch written after f1's start is lost.
	if loseLogTail(t, cfg, kept) == 0 {
		t.Fatalf("f2's start wrote no batch: %v", logKeysOf(t, cfg))
	}

	serveOnce(t, cfg, func(c dexpb.FlowServiceClient) {
		if _, err := c.GetFlowSummary(t.Context(), &dexpb.GetFlowSummaryRequest{FlowId: "f1"}); err != nil {
			t.Errorf("f1, in the log: %v", err)
		}
		if _, err := c.GetFlowSummary(t.Context(), &dexpb.GetFlowSummaryRequest{FlowId: "f2"}); status.Code(err) != codes.NotFound {
			t.Errorf("f2, whose start the log lost: %v; want NOT_FOUND (the log is the truth)", err)
		}
	})
	keys := logKeysOf(t, cfg)
	for i, k := range keys {
		if want := layout.LogKey(uint64(i)); k != want {
			t.Fatalf("log keys %v: %s where %s belongs, a gap", keys, k, want)
		}
	}
}
