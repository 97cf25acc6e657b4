package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/wal"
	"github.com/dexzd/dexzd/internal/wal/waltest"
)

// fakeLease stands in for the lease package's check: it holds while the
// lease object names our epoch.
type fakeLease struct {
	s     *mem.Store
	epoch string
	calls int
	// deletesAtCall[i] is the number of deletes made before call i.
	deletesAtCall []int
}

func newFakeLease(s *mem.Store, epoch string) *fakeLease {
	s.SetRaw(layout.LeaseKey(), []byte(epoch))
	return &fakeLease{s: s, epoch: epoch}
}

func (l *fakeLease) check(ctx context.Context) error {
	l.calls++
	l.deletesAtCall = append(l.deletesAtCall, l.s.Count(blob.OpDelete))
	data, _, err := l.s.Get(ctx, layout.LeaseKey())
	if err != nil {
		return err
	}
	if string(data) != l.epoch {
		return fmt.Errorf("lease lost: held by %s", data)
	}
	return nil
}

// fill writes batches [0, n) and snapshots at the given positions with
// keep 2.
func fill(t *testing.T, s *mem.Store, lease *fakeLease, n uint64, snaps ...uint64) {
	t.Helper()
	for seq := range n {
		plant(s, wal.Batch{Seq: seq, Epoch: 1, Kind: wal.KindRecords})
	}
	for _, seq := range snaps {
		if err := waltest.WriteSnapshot(t.Context(), s, layout, seq, fmt.Appendf(nil, "state@%d", seq), lease.check, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func keysUnder(s *mem.Store, prefix string) []string {
	var out []string
	for _, k := range s.Keys() {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// Covers: G7
func TestSnapshot_WriteAndLoadLatest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		if _, _, ok, err := waltest.LoadLatest(t.Context(), s, layout); ok || err != nil {
			t.Fatalf("LoadLatest on an empty store: %v, %v", ok, err)
		}
		lease := newFakeLease(s, "7")
		fill(t, s, lease, 30, 10, 20, 25)
		seq, data, ok, err := waltest.LoadLatest(t.Context(), s, layout)
		if err != nil || !ok || seq != 25 || string(data) != "state@25" {
			t.Fatalf("LoadLatest = %d, %q, %v, %v", seq, data, ok, err)
		}
		m, _ := s.Raw(layout.ManifestKey())
		if string(m) != `{"version":2,"logStart":25,"snapshots":[20,25]}` {
			t.Fatalf("manifest %s", m)
		}
		// An older snapshot written late does not move the log start back.
		if err := waltest.WriteSnapshot(t.Context(), s, layout, 22, nil, lease.check, 3); err != nil {
			t.Fatal(err)
		}
		m, _ = s.Raw(layout.ManifestKey())
		if string(m) != `{"version":2,"logStart":25,"snapshots":[20,22,25]}` {
			t.Fatalf("manifest %s", m)
		}
	})
}

// The manifest is created create-if-absent and then replaced
// replace-if-unchanged, never written unconditionally; a lost reply is
// resolved by reading it back.
//
// Covers: G7, L4, G5
func TestSnapshot_ManifestWritesAreConditional(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		lease := newFakeLease(s, "7")
		rec := record(s)
		lost := map[string]bool{}
		rec.setFault(func(op, key string) mem.Fault {
			if key == layout.ManifestKey() && op != blob.OpGet && !lost[op] {
				lost[op] = true // the first create and the first replace
				return mem.Fault{Err: mem.ErrServer, Lands: true}
			}
			return mem.Fault{}
		})
		fill(t, s, lease, 0, 10, 20)
		if n := rec.count(blob.OpPutIfAbsent, layout.ManifestKey()); n != 2 { // lost reply, then retry
			t.Errorf("%d manifest creates", n)
		}
		if n := rec.count(blob.OpPutIfMatch, layout.ManifestKey()); n != 2 {
			t.Errorf("%d manifest replaces", n)
		}
		m, _ := s.Raw(layout.ManifestKey())
		if string(m) != `{"version":2,"logStart":20,"snapshots":[10,20]}` {
			t.Fatalf("manifest %s", m)
		}
	})
}

// Every delete comes right after a lease check, and truncation deletes
// exactly the batches below the newest kept snapshot and the snapshots the
// manifest no longer keeps.
//
// Covers: G7
func TestTruncate_LeaseCheckBeforeEveryDelete(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		lease := newFakeLease(s, "7")
		fill(t, s, lease, 30, 10, 20, 25)
		s.SetRaw(layout.LogPrefix()+"not-a-batch", []byte("x"))
		s.SetRaw(layout.SnapshotKey(40), wal.EncodeSnapshot(40, nil)) // being written, not in the manifest yet
		lease.calls, lease.deletesAtCall = 0, nil
		n, err := wal.Truncate(t.Context(), s, layout, lease.check)
		if err != nil || n != 27 {
			t.Fatalf("Truncate = %d, %v; want 27 (batches 0-24, snapshot 10's head and part)", n, err)
		}
		if lease.calls != n || s.Count(blob.OpDelete) != n {
			t.Fatalf("%d lease checks for %d deletes", lease.calls, s.Count(blob.OpDelete))
		}
		for i, d := range lease.deletesAtCall {
			if d != i {
				t.Fatalf("lease check %d came after %d deletes: checks and deletes do not alternate", i, d)
			}
		}
		var want []string
		for seq := uint64(25); seq < 30; seq++ {
			want = append(want, layout.LogKey(seq))
		}
		want = append(want, layout.LogPrefix()+"not-a-batch")
		if got := keysUnder(s, layout.LogPrefix()); !slices.Equal(got, want) {
			t.Fatalf("log left %v, want %v", got, want)
		}
		// Left: the heads of 20, 25 and 40 (40 has no parts), and one part
		// each of 20 and 25.
		var heads []string
		parts := map[uint64]int{}
		for _, k := range keysUnder(s, layout.SnapshotPrefix()) {
			if seq, ok := layout.ParseSnapshotPartKey(k); ok {
				parts[seq]++
			} else {
				heads = append(heads, k)
			}
		}
		want = []string{layout.SnapshotKey(20), layout.SnapshotKey(25), layout.SnapshotKey(40)}
		if !slices.Equal(heads, want) || len(parts) != 2 || parts[20] != 1 || parts[25] != 1 {
			t.Fatalf("snapshots left %v with parts %v, want %v with one part each of 20 and 25", heads, parts, want)
		}
		// Restore still works: newest snapshot plus the tail.
		seq, _, ok, err := waltest.LoadLatest(t.Context(), s, layout)
		if err != nil || !ok || seq != 25 {
			t.Fatalf("LoadLatest = %d, %v, %v", seq, ok, err)
		}
		var a applied
		if next, err := wal.Fence(t.Context(), s, layout, 8, seq, a.apply); err != nil || next != 31 {
			t.Fatalf("Fence from the snapshot = %d, %v", next, err)
		}
	})
}

// A standby, or a process fenced by a new holder, deletes nothing; a
// process that loses its lease in the middle of truncation stops deleting at
// once.
//
// Covers: G7
func TestTruncate_OnlyWhileLeaseHeld(t *testing.T) {
	t.Parallel()
	t.Run("standby", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := mem.New()
			fill(t, s, newFakeLease(s, "7"), 30, 10, 20)
			standby := &fakeLease{s: s, epoch: "6"} // does not hold the lease
			n, err := wal.Truncate(t.Context(), s, layout, standby.check)
			if err == nil || n != 0 || s.Count(blob.OpDelete) != 0 {
				t.Fatalf("Truncate = %d, %v, %d deletes", n, err, s.Count(blob.OpDelete))
			}
		})
	})
	t.Run("fenced mid-way", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := mem.New()
			lease := newFakeLease(s, "7")
			fill(t, s, lease, 30, 10, 20)
			check := func(ctx context.Context) error {
				if s.Count(blob.OpDelete) == 5 {
					s.SetRaw(layout.LeaseKey(), []byte("8")) // a new holder takes over
				}
				return lease.check(ctx)
			}
			n, err := wal.Truncate(t.Context(), s, layout, check)
			if err == nil || !strings.Contains(err.Error(), "lease lost") || n != 5 || s.Count(blob.OpDelete) != 5 {
				t.Fatalf("Truncate = %d, %v, %d deletes", n, err, s.Count(blob.OpDelete))
			}
			if _, ok := s.Raw(layout.LogKey(5)); !ok {
				t.Fatal("deleted after the lease was lost")
			}
		})
	})
	t.Run("write snapshot", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := mem.New()
			standby := newFakeLease(s, "8")
			standby.epoch = "7"
			err := waltest.WriteSnapshot(t.Context(), s, layout, 10, []byte("x"), standby.check, 0)
			if err == nil || len(s.Keys()) != 1 {
				t.Fatalf("WriteSnapshot = %v, keys %v", err, s.Keys())
			}
		})
	})
}

var goldenSnapshot = struct {
	file    string
	nextSeq uint64
	data    []byte
}{"snapshot.bin", 1234, []byte("local store state \x00\xff")}

// Covers: G7, G1
func TestSnapshot_FormatAndCorruption(t *testing.T) {
	t.Parallel()
	g := goldenSnapshot
	enc := wal.EncodeSnapshot(g.nextSeq, g.data)
	if want := golden(t, g.file, enc); !bytes.Equal(enc, want) {
		t.Fatalf("EncodeSnapshot changed the format:\n got %x\nwant %x", enc, want)
	}
	key := layout.SnapshotKey(g.nextSeq)
	if data, err := wal.DecodeSnapshot(key, g.nextSeq, enc); err != nil || !bytes.Equal(data, g.data) {
		t.Fatalf("DecodeSnapshot = %q, %v", data, err)
	}
	if _, err := wal.DecodeSnapshot(key, g.nextSeq+1, enc); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("seq mismatch: %v", err)
	}
	for n := range len(enc) {
		if _, err := wal.DecodeSnapshot(key, g.nextSeq, enc[:n]); !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	for i := range len(enc) * 8 {
		d := bytes.Clone(enc)
		d[i/8] ^= 1 << (i % 8)
		if _, err := wal.DecodeSnapshot(key, g.nextSeq, d); !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	if _, err := wal.DecodeSnapshot(key, g.nextSeq, append(bytes.Clone(enc), 0)); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
}

// A corrupt or missing newest snapshot is an error naming its key, never a
// silent fallback; so is a corrupt manifest.
//
// Covers: G7
func TestLoadLatest_Corruption(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		break_ func(s *mem.Store)
		key    string
	}{
		"snapshot bit flip": {func(s *mem.Store) {
			d, _ := s.Raw(layout.SnapshotKey(20))
			d[len(d)/2] ^= 1
			s.SetRaw(layout.SnapshotKey(20), d)
		}, layout.SnapshotKey(20)},
		"snapshot missing": {func(s *mem.Store) {
			_ = s.Delete(context.Background(), layout.SnapshotKey(20))
		}, layout.SnapshotKey(20)},
		"manifest garbage": {func(s *mem.Store) {
			s.SetRaw(layout.ManifestKey(), []byte(`{"version":1,"logStart":`))
		}, layout.ManifestKey()},
		"manifest unknown field": {func(s *mem.Store) {
			s.SetRaw(layout.ManifestKey(), []byte(`{"version":1,"logStart":20,"snapshots":[20],"x":1}`))
		}, layout.ManifestKey()},
		"manifest log start past snapshots": {func(s *mem.Store) {
			s.SetRaw(layout.ManifestKey(), []byte(`{"version":1,"logStart":30,"snapshots":[20]}`))
		}, layout.ManifestKey()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := mem.New()
				fill(t, s, newFakeLease(s, "7"), 0, 10, 20)
				tc.break_(s)
				_, _, ok, err := waltest.LoadLatest(t.Context(), s, layout)
				if ok || !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), tc.key) {
					t.Fatalf("LoadLatest = %v, %v; want corruption naming %s", ok, err, tc.key)
				}
			})
		})
	}
}

// Covers: G7
func TestSnapshot_TransientRetried(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		lease := newFakeLease(s, "7")
		rec := record(s)
		n := 0
		rec.setFault(func(op, key string) mem.Fault {
			if key == layout.LeaseKey() {
				return mem.Fault{}
			}
			if n++; n%2 == 1 {
				return mem.Fault{Err: mem.ErrConflict}
			}
			return mem.Fault{}
		})
		start := time.Now()
		fill(t, s, lease, 0, 10)
		if time.Since(start) == 0 {
			t.Fatal("no retries happened")
		}
		if seq, _, ok, err := waltest.LoadLatest(t.Context(), s, layout); !ok || err != nil || seq != 10 {
			t.Fatalf("LoadLatest = %d, %v, %v", seq, ok, err)
		}
	})
}

// Covers: G7
func FuzzSnapshotDecode(f *testing.F) {
	f.Add(golden(f, goldenSnapshot.file, nil))
	f.Add([]byte("DXSN\x01"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		data, err := wal.DecodeSnapshot("k", goldenSnapshot.nextSeq, raw)
		if err != nil {
			if !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("error %v is not a corruption", err)
			}
			return
		}
		if enc := wal.EncodeSnapshot(goldenSnapshot.nextSeq, data); !bytes.Equal(enc, raw) {
			t.Fatalf("re-encoding differs")
		}
	})
}
