package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/node"
	"github.com/dexzd/dexzd/internal/wal"
)

// holdLease leaves a lease in dir held by another process, as a crashed
// process would, with the given duration.
func holdLease(t *testing.T, dir string, d time.Duration) {
	t.Helper()
	blobs, err := fs.Open(filepath.Join(dir, node.LogDir), fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	if _, err := lease.Acquire(context.Background(), lease.Config{Store: blobs, Key: wal.MustLayout("", "node-1").LeaseKey(),
		NodeID: "node-1", ProcessID: "crashed/1/x", Duration: d}); err != nil {
		t.Fatal(err)
	}
}

// While the node holds dev.lock a held lease is taken over at once (D3); on
// a filesystem that cannot lock, it warns and waits for the lease to expire
// instead (D4).
//
// Covers: D3, D4
func TestDev_LockedTakesOverAndUnlockableWaits(t *testing.T) {
	dir := t.TempDir()
	holdLease(t, dir, 30*time.Second)
	began := time.Now()
	n := startNode(t, dir, nil)
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("with dev.lock held, startup took %v; a held lease must be taken over at once", took)
	}
	if err := n.stop(t); err != nil {
		t.Fatal(err)
	}

	dir = t.TempDir()
	restore := node.SetFlock(func(int, int) error { return unix.ENOLCK })
	defer restore()
	holdLease(t, dir, time.Second) // expires 2 s after its renewal
	began = time.Now()
	n = startNode(t, dir, nil)
	if took := time.Since(began); took < 1500*time.Millisecond {
		t.Fatalf("without a file lock, startup took %v; it must wait for the held lease to expire", took)
	}
	if err := n.stop(t); err != nil {
		t.Fatal(err)
	}
}

// A second process on the same directory fails naming dev.lock (D2); a
// relaxed-mode directory left by an abrupt exit is refused (D7).
//
// Covers: D2, D7
func TestDev_DirectoryGuards(t *testing.T) {
	dir := t.TempDir()
	startNode(t, dir, nil)
	cfg, err := config.Parse(nil, config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	err = node.RunLocal(context.Background(), node.LocalOptions{Mode: config.ModeDev, Config: cfg, DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "dev.lock")) {
		t.Fatalf("second node on the directory: %v; want an error naming dev.lock", err)
	}

	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, node.RelaxedMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = node.RunLocal(context.Background(), node.LocalOptions{Mode: config.ModeDev, Config: cfg, DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), "delete the data directory "+dir) {
		t.Fatalf("a directory left by relaxed mode: %v", err)
	}
}
