package wal_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/wal"
	"github.com/dexzd/dexzd/internal/wal/waltest"
)

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// failingReader fails the test if it is read.
type failingReader struct{ t *testing.T }

func (f failingReader) Read([]byte) (int, error) {
	f.t.Error("the snapshot was read although it exists")
	return 0, io.EOF
}

// A snapshot larger than a part is stored in parts and a head; it reads
// back whole through OpenLatest and LoadLatest; writing it again for the
// same position reads nothing; a newer snapshot lets Truncate delete the
// older one's head and parts.
//
// Covers: G7, T1
func TestSnapshotParts_WriteReadTruncate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		lease := newFakeLease(s, "7")
		data := randomBytes(2*wal.SnapshotPartBytes + 12345)
		n, err := wal.WriteSnapshotFrom(t.Context(), s, layout, 10, bytes.NewReader(data), lease.check, 1)
		if err != nil || n != int64(len(data)) {
			t.Fatalf("WriteSnapshotFrom = %d, %v", n, err)
		}
		if keys := keysUnder(s, layout.SnapshotPrefix()); len(keys) != 4 {
			t.Fatalf("snapshot keys %v, want a head and 3 parts", keys)
		}
		seq, r, ok, err := wal.OpenLatest(t.Context(), s, layout)
		if err != nil || !ok || seq != 10 {
			t.Fatalf("OpenLatest = %d, %v, %v", seq, ok, err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes (%v), want the %d written", len(got), err, len(data))
		}
		if _, err := wal.WriteSnapshotFrom(t.Context(), s, layout, 10, failingReader{t}, lease.check, 1); err != nil {
			t.Fatalf("WriteSnapshotFrom again = %v", err)
		}
		// A newer, small snapshot; keep 1: the older one's objects go.
		if _, err := wal.WriteSnapshotFrom(t.Context(), s, layout, 20, strings.NewReader("small"), lease.check, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := wal.Truncate(t.Context(), s, layout, lease.check); err != nil {
			t.Fatal(err)
		}
		for _, k := range keysUnder(s, layout.SnapshotPrefix()) {
			if strings.HasPrefix(k, layout.SnapshotKey(10)) {
				t.Fatalf("%s left after truncation", k)
			}
		}
		seq, got, ok, err = waltest.LoadLatest(t.Context(), s, layout)
		if err != nil || !ok || seq != 20 || string(got) != "small" {
			t.Fatalf("LoadLatest = %d, %q, %v, %v", seq, got, ok, err)
		}
	})
}

// A missing or altered part is corruption naming the snapshot's key,
// reported when the reader reaches it; the parts of an attempt that never
// wrote its head are removed once a newer snapshot is kept.
//
// Covers: G7
func TestSnapshotParts_CorruptionAndOrphans(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		lease := newFakeLease(s, "7")
		data := randomBytes(wal.SnapshotPartBytes + 10)
		if _, err := wal.WriteSnapshotFrom(t.Context(), s, layout, 10, bytes.NewReader(data), lease.check, 2); err != nil {
			t.Fatal(err)
		}
		var part string
		for _, k := range keysUnder(s, layout.SnapshotPrefix()) {
			if strings.HasSuffix(k, ".000001") {
				part = k
			}
		}
		raw, _, err := s.Get(t.Context(), part)
		if err != nil {
			t.Fatal(err)
		}
		s.SetRaw(part, append([]byte("x"), raw[1:]...))
		_, r, _, err := wal.OpenLatest(t.Context(), s, layout)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(r); !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), layout.SnapshotKey(10)) {
			t.Fatalf("read of an altered part = %v, want corruption naming %s", err, layout.SnapshotKey(10))
		}
		if err := s.Delete(t.Context(), part); err != nil {
			t.Fatal(err)
		}
		_, r, _, _ = wal.OpenLatest(t.Context(), s, layout)
		if _, err := io.ReadAll(r); !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("read of a missing part = %v, want corruption saying it is missing", err)
		}

		// An attempt at 15 that fails while reading leaves parts, no head.
		broken := io.MultiReader(bytes.NewReader(randomBytes(wal.SnapshotPartBytes)), errReader{})
		if _, err := wal.WriteSnapshotFrom(t.Context(), s, layout, 15, broken, lease.check, 2); err == nil {
			t.Fatal("a failing reader wrote a snapshot")
		}
		if _, err := wal.WriteSnapshotFrom(t.Context(), s, layout, 30, strings.NewReader("new"), lease.check, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := wal.Truncate(t.Context(), s, layout, lease.check); err != nil {
			t.Fatal(err)
		}
		if keys := keysUnder(s, layout.SnapshotPrefix()); len(keys) != 2 || keys[0] != layout.SnapshotKey(30) {
			t.Fatalf("snapshot keys after truncation %v, want only snapshot 30's head and part", keys)
		}
	})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("checkpoint failed") }
