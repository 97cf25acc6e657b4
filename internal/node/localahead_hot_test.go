package node

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
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

	readyA := make(chan net.Addr, 1)
	actxA, stopA := context.WithCancel(ctx)
	doneA := make(chan error, 1)
	go func() { doneA <- RunServe(actxA, ServeOptions{Config: cfgA, Ready: func(a net.Addr) { readyA <- a }}) }()
	var cA dexpb.FlowServiceClient
	select {
	case a := <-readyA:
		cA = flowClient(t, a)
	case err := <-doneA:
		t.Fatalf("A ended: %v", err)
	}
	startT(t, cA, "f1")
	kept := logKeysOf(t, cfgA)
	startT(t, cA, "f2")

	readyB := make(chan net.Addr, 1)
	standbyB := make(chan net.Addr, 1)
	doneB := make(chan error, 1)
	go func() {
		doneB <- RunServe(ctx, ServeOptions{Config: &cfgB, Ready: func(a net.Addr) { readyB <- a },
			Standby: func(a net.Addr) { standbyB <- a }})
	}()
	select {
	case <-standbyB:
	case err := <-doneB:
		t.Fatalf("B ended: %v", err)
	}
	time.Sleep(time.Second) // B follows f2's batch

	// The storage loses the log's tail (f2's batches) that B applied.
	loseLogTail(t, cfgA, kept)
	stopA()
	if err := <-doneA; ExitCode(err) != 0 {
		t.Fatalf("A = %v", err)
	}

	var cB dexpb.FlowServiceClient
	select {
	case a := <-readyB:
		cB = flowClient(t, a)
	case err := <-doneB:
		t.Fatalf("hot standby B, ahead of the log, did not take over: %v", err)
	}
	if _, err := cB.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "f1"}); err != nil {
		t.Errorf("f1 on B: %v", err)
	}
	if _, err := cB.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "f2"}); status.Code(err) != codes.NotFound {
		t.Errorf("f2 on B: %v, want NOT_FOUND", err)
	}
	startT(t, cB, "f3")
	keys := logKeysOf(t, cfgA)
	for i, k := range keys {
		if want := layout.LogKey(uint64(i)); k != want {
			t.Fatalf("log keys %v: gap at %s", keys, want)
		}
	}
	cancel()
	<-doneB
}
