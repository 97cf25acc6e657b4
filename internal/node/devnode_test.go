package node_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/node"
	"github.com/dexzd/dexzd/internal/wal"
)

func devConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse(nil, config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Dev.DurabilityMode = config.DurabilityProcessCrashSafe
	return cfg
}

// describe returns the node's epoch as AdminService reports it.
func describe(t *testing.T, addr string) uint64 {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	d, err := dexpb.NewAdminServiceClient(conn).Describe(ctxT(t), &dexpb.DescribeRequest{})
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	return d.GetNodeEpoch()
}

// StartDev serves on a free port; Abandon ends it like a crash, so the next
// node on the directory takes the unreleased lease over at once; Close
// stops gracefully and releases it.
//
// Covers: D2, D3, L12
func TestStartDev_AbandonAndRestartOnTheSameDirectory(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	n1, err := node.StartDev(ctx, node.DevOptions{DataDir: dir, Config: devConfig(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n1.Close() })
	if e := describe(t, n1.Addr()); e != 1 {
		t.Fatalf("first node's epoch = %d, want 1", e)
	}
	if n1.Err() != nil {
		t.Fatalf("Err while running = %v", n1.Err())
	}

	// D2: a second node on the same directory does not start.
	if n, err := node.StartDev(ctx, node.DevOptions{DataDir: dir, Config: devConfig(t)}); err == nil {
		_ = n.Close()
		t.Fatal("a second node started on a locked directory")
	}

	if err := n1.Abandon(); err != nil {
		t.Fatalf("Abandon = %v", err)
	}
	select {
	case <-n1.Done():
	default:
		t.Fatal("Done is not closed after Abandon")
	}
	if !errors.Is(n1.Err(), node.ErrAbandoned) || !errors.Is(n1.Close(), node.ErrAbandoned) {
		t.Fatalf("after Abandon: Err = %v, Close = %v; want ErrAbandoned", n1.Err(), n1.Close())
	}

	cfg := devConfig(t)
	cfg.API.Listen = n1.Addr() // the same address, as dextest restarts
	n2, err := node.StartDev(ctx, node.DevOptions{DataDir: dir, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if n2.Addr() != n1.Addr() {
		t.Errorf("restarted on %s, want %s", n2.Addr(), n1.Addr())
	}
	if e := describe(t, n2.Addr()); e != 2 {
		t.Fatalf("restarted node's epoch = %d, want 2 (lease taken over)", e)
	}
	if err := n2.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := n2.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}

	blobs, err := fs.Open(filepath.Join(dir, node.LogDir), fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := lease.Read(ctx, blobs, wal.MustLayout("", "node-1").LeaseKey())
	_ = blobs.Close()
	if err != nil || !rec.Released || rec.Epoch != 2 {
		t.Fatalf("lease after Close = %+v, %v; want released epoch 2", rec, err)
	}
}

func TestStartDev_Errors(t *testing.T) {
	t.Parallel()
	if _, err := node.StartDev(context.Background(), node.DevOptions{}); err == nil {
		t.Error("StartDev without a data directory succeeded")
	}
	bad := devConfig(t)
	bad.Dev.DurabilityMode = "sometimes"
	if _, err := node.StartDev(context.Background(), node.DevOptions{DataDir: t.TempDir(), Config: bad}); err == nil {
		t.Error("StartDev with an invalid configuration succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := node.StartDev(ctx, node.DevOptions{DataDir: t.TempDir(), Config: devConfig(t)}); !errors.Is(err, context.Canceled) {
		t.Errorf("StartDev with an ended context = %v, want context.Canceled", err)
	}
}
