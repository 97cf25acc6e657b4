package node

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/wal"
)

// The helpers of the tests in which the log loses its tail (a host crash
// without fsync, a storage failover): a serving period, the log's keys on
// the fs backend, and the loss itself.

// serveOnce runs RunServe on cfg until it serves, calls do with a client,
// then stops it gracefully.
func serveOnce(t *testing.T, cfg *config.Config, do func(c dexpb.FlowServiceClient)) {
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
	do(flowClient(t, addr))
	stop()
	if err := <-done; ExitCode(err) != 0 {
		t.Fatalf("RunServe = %v", err)
	}
}

// flowClient is a FlowService client of addr, closed when the test ends.
func flowClient(t *testing.T, addr net.Addr) dexpb.FlowServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return dexpb.NewFlowServiceClient(conn)
}

// logKeysOf lists the log's keys on cfg's fs backend, in order.
func logKeysOf(t *testing.T, cfg *config.Config) []string {
	t.Helper()
	blobs, err := fs.Open(cfg.Storage.FS.Dir, fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	first := wal.MustLayout("", cfg.NodeID).LogKey(0)
	keys, err := blobs.List(t.Context(), first[:len(first)-20], "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// loseLogTail deletes every log key not in kept, as a lost tail, and
// returns how many it deleted.
func loseLogTail(t *testing.T, cfg *config.Config, kept []string) int {
	t.Helper()
	blobs, err := fs.Open(cfg.Storage.FS.Dir, fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	lost := 0
	for _, k := range logKeysOf(t, cfg) {
		if !slices.Contains(kept, k) {
			lost++
			if err := blobs.Delete(t.Context(), k); err != nil {
				t.Fatal(err)
			}
		}
	}
	return lost
}

// startT starts flow id of type "t" at step "S".
func startT(t *testing.T, c dexpb.FlowServiceClient, id string) {
	t.Helper()
	if _, err := c.StartFlow(t.Context(), &dexpb.StartFlowRequest{FlowType: "t", FlowId: id,
		StartStep: &dexpb.Movement{StepType: "S"}}); err != nil {
		t.Fatal(err)
	}
}
