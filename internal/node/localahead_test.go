package node

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/blob/fs"
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
	dir := t.TempDir()
	cfg := serveConfig(t, dir)
	layout := wal.MustLayout("", "n1")
	serve := func(do func(c dexpb.FlowServiceClient)) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		ready := make(chan net.Addr, 1)
		sctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- RunServe(sctx, ServeOptions{Config: cfg, Ready: func(a net.Addr) { ready <- a }}) }()
		var addr net.Addr
		select {
		case addr = <-ready:
		case err := <-done:
			t.Fatalf("RunServe ended before serving: %v", err)
		}
		conn, err := grpc.NewClient(addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		do(dexpb.NewFlowServiceClient(conn))
		_ = conn.Close()
		stop()
		if err := <-done; ExitCode(err) != 0 {
			t.Fatalf("RunServe = %v", err)
		}
	}
	logKeys := func() []string {
		t.Helper()
		blobs, err := fs.Open(cfg.Storage.FS.Dir, fs.Strict)
		if err != nil {
			t.Fatal(err)
		}
		defer blobs.Close()
		keys, err := blobs.List(t.Context(), layout.LogKey(0)[:len(layout.LogKey(0))-20], "", 10000)
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	start := func(c dexpb.FlowServiceClient, id string) {
		t.Helper()
		if _, err := c.StartFlow(t.Context(), &dexpb.StartFlowRequest{FlowType: "t", FlowId: id,
			StartStep: &dexpb.Movement{StepType: "S"}}); err != nil {
			t.Fatal(err)
		}
	}
	var kept []string
	serve(func(c dexpb.FlowServiceClient) {
		start(c, "f1")
		kept = logKeys()
		start(c, "f2")
	})
	// The host crash: every batch written after f1's start is lost.
	blobs, err := fs.Open(cfg.Storage.FS.Dir, fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	all := logKeys()
	for _, k := range all {
		if !slices.Contains(kept, k) {
			if err := blobs.Delete(t.Context(), k); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = blobs.Close()
	if len(all) <= len(kept) {
		t.Fatalf("f2's start wrote no batch: %v", all)
	}

	serve(func(c dexpb.FlowServiceClient) {
		if _, err := c.GetFlowSummary(t.Context(), &dexpb.GetFlowSummaryRequest{FlowId: "f1"}); err != nil {
			t.Errorf("f1, in the log: %v", err)
		}
		if _, err := c.GetFlowSummary(t.Context(), &dexpb.GetFlowSummaryRequest{FlowId: "f2"}); status.Code(err) != codes.NotFound {
			t.Errorf("f2, whose start the log lost: %v; want NOT_FOUND (the log is the truth)", err)
		}
	})
	keys := logKeys()
	for i, k := range keys {
		if want := layout.LogKey(uint64(i)); k != want {
			t.Fatalf("log keys %v: %s where %s belongs, a gap", keys, k, want)
		}
	}
}
