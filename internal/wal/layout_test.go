package wal_test

import (
	"slices"
	"testing"

	"github.com/dexzd/dexzd/internal/wal"
)

// Covers: G1, G8
func TestLayout_Keys(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"prod", "prod/"} {
		l, err := wal.NewLayout(prefix, "node-a")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range [][2]string{
			{l.LeaseKey(), "prod/nodes/node-a/lease"},
			{l.ManifestKey(), "prod/nodes/node-a/manifest"},
			{l.LogKey(42), "prod/nodes/node-a/log/00000000000000000042"},
			{l.LogKey(^uint64(0)), "prod/nodes/node-a/log/18446744073709551615"},
			{l.SnapshotKey(100), "prod/nodes/node-a/snapshots/00000000000000000100"},
			{l.ProbeKey("abc"), "prod/nodes/node-a/probe/abc"},
			{l.NodePrefix(), "prod/nodes/node-a/"},
			{l.LogPrefix(), "prod/nodes/node-a/log/"},
			{l.SnapshotPrefix(), "prod/nodes/node-a/snapshots/"},
			{wal.MustLayout("", "x").LeaseKey(), "nodes/x/lease"},
		} {
			if got, want := c[0], c[1]; got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		}
	}
}

func TestLayout_Invalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ prefix, node string }{
		{"", ""}, {"", "a/b"}, {"", ".hidden"}, {"a//", "n"}, {"", "n\\x"},
	} {
		if _, err := wal.NewLayout(tc.prefix, tc.node); err == nil {
			t.Errorf("NewLayout(%q, %q) accepted", tc.prefix, tc.node)
		}
	}
}

func TestLayout_ParseAndOrder(t *testing.T) {
	t.Parallel()
	seqs := []uint64{0, 1, 9, 10, 99, 100, 1 << 40, ^uint64(0)}
	var keys []string
	for _, s := range seqs {
		k := layout.LogKey(s)
		got, ok := layout.ParseLogKey(k)
		if !ok || got != s {
			t.Errorf("ParseLogKey(%q) = %d, %v", k, got, ok)
		}
		if _, ok := layout.ParseSnapshotKey(k); ok {
			t.Errorf("ParseSnapshotKey accepted log key %q", k)
		}
		keys = append(keys, k)
	}
	if !slices.IsSorted(keys) {
		t.Error("key order is not numeric order")
	}
	for _, bad := range []string{
		layout.LogPrefix() + "42",
		layout.LogPrefix() + "0000000000000000004x",
		layout.LogPrefix() + "99999999999999999999", // overflows uint64
		"other/" + layout.LogKey(1),
	} {
		if _, ok := layout.ParseLogKey(bad); ok {
			t.Errorf("ParseLogKey(%q) accepted", bad)
		}
	}
}
