package node

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/wal"
)

// A hot standby whose local store applied a batch the log then lost
// (e.g. PostgreSQL failed over to an async replica) takes over: Fence says
// ErrLocalAhead and the lease period rebuilds the store from the log. Found
// in review: the rebuild reopened through the hot path's opener, which
// hands back the standby's (closed) store, and the takeover failed.
//
// Covers: T1, S8
func TestServe_HotStandbyAheadOfTheLogRebuildsAndTakesOver(t *testing.T) {
	dir := t.TempDir()
	cfgA := serveConfig(t, dir)
	cfgA.Standby.Mode = config.StandbyHot
	cfgA.Standby.HeldLeasePollInterval = 50 * time.Millisecond
	cfgB := *cfgA
	cfgB.LocalStore.Dir = filepath.Join(dir, "localB")
	layout := wal.MustLayout("", "n1")
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()

	logKeys := func() []string {
		t.Helper()
		blobs, err := fs.Open(cfgA.Storage.FS.Dir, fs.Strict)
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
	client := func(addr net.Addr) dexpb.FlowServiceClient {
		conn, err := grpc.NewClient(addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return dexpb.NewFlowServiceClient(conn)
	}
	start := func(c dexpb.FlowServiceClient, id string) {
		t.Helper()
		if _, err := c.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "t", FlowId: id,
			StartStep: &dexpb.Movement{StepType: "S"}}); err != nil {
			t.Fatal(err)
		}
	}

	readyA := make(chan net.Addr, 1)
	actxA, stopA := context.WithCancel(ctx)
	doneA := make(chan error, 1)
	go func() { doneA <- RunServe(actxA, ServeOptions{Config: cfgA, Ready: func(a net.Addr) { readyA <- a }}) }()
	var cA dexpb.FlowServiceClient
	select {
	case a := <-readyA:
		cA = client(a)
	case err := <-doneA:
		t.Fatalf("A ended: %v", err)
	}
	start(cA, "f1")
	kept := logKeys()
	start(cA, "f2")

	readyB := make(chan net.Addr, 1)
	standbyB := make(chan net.Addr, 1)
	doneB := make(chan error, 1)
	go func() {
		doneB <- RunServe(ctx, ServeOptions{Config: &cfgB, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Ready: func(a net.Addr) { readyB <- a },
			Standby: func(a net.Addr) { standbyB <- a }})
	}()
	select {
	case <-standbyB:
	case err := <-doneB:
		t.Fatalf("B ended: %v", err)
	}
	time.Sleep(time.Second) // B follows f2's batch

	// The storage loses the log's tail (f2's batches) that B applied.
	blobs, err := fs.Open(cfgA.Storage.FS.Dir, fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range logKeys() {
		if !slices.Contains(kept, k) {
			if err := blobs.Delete(t.Context(), k); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = blobs.Close()
	stopA()
	if err := <-doneA; ExitCode(err) != 0 {
		t.Fatalf("A = %v", err)
	}

	var cB dexpb.FlowServiceClient
	select {
	case a := <-readyB:
		cB = client(a)
	case err := <-doneB:
		t.Fatalf("hot standby B, ahead of the log, did not take over: %v", err)
	}
	if _, err := cB.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "f1"}); err != nil {
		t.Errorf("f1 on B: %v", err)
	}
	if _, err := cB.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "f2"}); status.Code(err) != codes.NotFound {
		t.Errorf("f2 on B: %v, want NOT_FOUND", err)
	}
	start(cB, "f3")
	keys := logKeys()
	for i, k := range keys {
		if want := layout.LogKey(uint64(i)); k != want {
			t.Fatalf("log keys %v: gap at %s", keys, want)
		}
	}
	cancel()
	<-doneB
}
