package seglog_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/blobtest"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/blob/seglog"
)

func open(t *testing.T, dir string) *seglog.Store {
	t.Helper()
	inner, err := fs.Open(filepath.Join(dir, "files"), fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	s, err := seglog.Open(filepath.Join(dir, "segments"), inner, true)
	if err != nil {
		_ = inner.Close()
		t.Fatal(err)
	}
	return s
}

func logKey(seq int) string { return fmt.Sprintf("nodes/n1/log/%020d", seq) }

// Every key the segments do not hold behaves as the fs store's.
func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store { return open(t, t.TempDir()) })
}

// Log keys: create-if-absent, read back, listed in order with the other
// keys, deleted; all of it survives closing and opening again.
func TestLogKeys_PutGetListDeleteReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	for i := range 5 {
		if _, err := s.PutIfAbsent(ctx, logKey(i), []byte(fmt.Sprintf("batch %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutIfAbsent(ctx, logKey(3), []byte("again")); !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("second put of a log key = %v, want ErrPrecondition", err)
	}
	if _, err := s.PutIfAbsent(ctx, "nodes/n1/lease", []byte("l")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, logKey(0)); err != nil {
		t.Fatal(err)
	}
	check := func(s *seglog.Store) {
		t.Helper()
		for i := 1; i < 5; i++ {
			data, _, err := s.Get(ctx, logKey(i))
			if err != nil || string(data) != fmt.Sprintf("batch %d", i) {
				t.Fatalf("Get(%d) = %q, %v", i, data, err)
			}
		}
		if _, _, err := s.Get(ctx, logKey(0)); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("deleted batch: %v, want ErrNotFound", err)
		}
		keys, err := s.List(ctx, "nodes/n1/", "", 0)
		want := []string{"nodes/n1/lease", logKey(1), logKey(2), logKey(3), logKey(4)}
		if err != nil || !slices.Equal(keys, want) {
			t.Fatalf("List = %v, %v; want %v", keys, err, want)
		}
		keys, err = s.List(ctx, "nodes/n1/log/", logKey(2), 1)
		if err != nil || !slices.Equal(keys, []string{logKey(3)}) {
			t.Fatalf("List after %s, limit 1 = %v, %v", logKey(2), keys, err)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir)
	defer s2.Close()
	check(s2)
	if _, err := s2.PutIfAbsent(ctx, logKey(5), []byte("batch 5")); err != nil {
		t.Fatal(err)
	}
}

// A record cut short at the end of the newest segment (a write that never
// completed) is cut off at the next open; corruption anywhere else is an
// error naming the segment.
func TestTornTailAndCorruption(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	for i := range 3 {
		if _, err := s.PutIfAbsent(ctx, logKey(i), []byte("data")); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	seg := filepath.Join(dir, "segments", fmt.Sprintf("%020d.seg", 0))
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte{0, 0, 0, 40, 1, 2}) // half a header
	_ = f.Close()
	s = open(t, dir)
	if _, _, err := s.Get(ctx, logKey(2)); err != nil {
		t.Fatalf("batch 2 after a torn tail: %v", err)
	}
	if _, err := s.PutIfAbsent(ctx, logKey(3), []byte("data")); err != nil {
		t.Fatalf("append after the torn tail was cut: %v", err)
	}
	_ = s.Close()
	s = open(t, dir)
	if data, _, err := s.Get(ctx, logKey(3)); err != nil || string(data) != "data" {
		t.Fatalf("batch 3 = %q, %v", data, err)
	}
	_ = s.Close()

	// Flip a byte of the first record: not the tail, so corruption.
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	raw[10] ^= 0xff
	// A newer segment, so that the damaged one is not the newest.
	if err := os.WriteFile(seg, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "segments", fmt.Sprintf("%020d.seg", 100)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	inner, _ := fs.Open(filepath.Join(dir, "files"), fs.Strict)
	defer inner.Close()
	if _, err := seglog.Open(filepath.Join(dir, "segments"), inner, true); err == nil || !strings.Contains(err.Error(), seg) {
		t.Fatalf("Open with a corrupt record = %v, want an error naming %s", err, seg)
	}
}

// Segments roll over at SegmentBytes and one whose batches are all
// deleted is removed; batches written as files before are still read,
// listed, refused as taken and deleted.
func TestSegmentsRollAndLegacyFiles(t *testing.T) {
	old := seglog.SegmentBytes
	seglog.SegmentBytes = 64
	defer func() { seglog.SegmentBytes = old }()
	dir := t.TempDir()
	inner, err := fs.Open(filepath.Join(dir, "files"), fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := inner.PutIfAbsent(ctx, logKey(0), []byte("file batch")); err != nil {
		t.Fatal(err)
	}
	s, err := seglog.Open(filepath.Join(dir, "segments"), inner, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if data, _, err := s.Get(ctx, logKey(0)); err != nil || string(data) != "file batch" {
		t.Fatalf("legacy batch = %q, %v", data, err)
	}
	if _, err := s.PutIfAbsent(ctx, logKey(0), []byte("x")); !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("put over a legacy batch = %v, want ErrPrecondition", err)
	}
	for i := 1; i <= 6; i++ {
		if _, err := s.PutIfAbsent(ctx, logKey(i), []byte(strings.Repeat("d", 40))); err != nil {
			t.Fatal(err)
		}
	}
	segs := func() int {
		e, _ := os.ReadDir(filepath.Join(dir, "segments"))
		n := 0
		for _, x := range e {
			if strings.HasSuffix(x.Name(), ".seg") {
				n++
			}
		}
		return n
	}
	if n := segs(); n < 3 {
		t.Fatalf("%d segments after 6 puts of 40 bytes with 64-byte segments", n)
	}
	keys, err := s.List(ctx, "nodes/n1/log/", "", 0)
	if err != nil || len(keys) != 7 || keys[0] != logKey(0) {
		t.Fatalf("List = %v, %v", keys, err)
	}
	before := segs()
	for i := 0; i <= 4; i++ {
		if err := s.Delete(ctx, logKey(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := segs(); n >= before {
		t.Fatalf("%d segments after deleting batches 0-4, had %d", n, before)
	}
	if _, _, err := inner.Get(ctx, logKey(0)); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("legacy batch after delete: %v", err)
	}
}

// Two processes (two stores on one directory) see each other's log
// batches: a create-if-absent succeeds for one only, reads and lists see
// the other's writes, across segment roll-overs and deletions. This is what
// keeps fencing (G1, G4) when a second process writes the log.
//
// Covers: G1, G4
func TestTwoProcessesShareTheSegments(t *testing.T) {
	old := seglog.SegmentBytes
	seglog.SegmentBytes = 100
	defer func() { seglog.SegmentBytes = old }()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	defer a.Close()
	defer b.Close()
	ctx := t.Context()
	for i := range 3 {
		if _, err := a.PutIfAbsent(ctx, logKey(i), []byte(fmt.Sprintf("a%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.PutIfAbsent(ctx, logKey(2), []byte("b2")); !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("b's put of a's batch = %v, want ErrPrecondition", err)
	}
	for i := 3; i < 8; i++ {
		if _, err := b.PutIfAbsent(ctx, logKey(i), []byte(fmt.Sprintf("b%d", i))); err != nil {
			t.Fatal(err)
		}
		if _, err := a.PutIfAbsent(ctx, logKey(i), []byte("a")); !errors.Is(err, blob.ErrPrecondition) {
			t.Fatalf("a's put of b's batch %d = %v, want ErrPrecondition", i, err)
		}
	}
	if data, _, err := a.Get(ctx, logKey(7)); err != nil || string(data) != "b7" {
		t.Fatalf("a reads b's batch 7 = %q, %v", data, err)
	}
	if err := b.Delete(ctx, logKey(0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Get(ctx, logKey(0)); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("a reads the batch b deleted: %v", err)
	}
	keys, err := a.List(ctx, "nodes/n1/log/", "", 0)
	if err != nil || len(keys) != 7 || keys[0] != logKey(1) || keys[6] != logKey(7) {
		t.Fatalf("a lists %v, %v; want batches 1-7", keys, err)
	}
	if _, err := a.PutIfAbsent(ctx, logKey(8), []byte("a8")); err != nil {
		t.Fatal(err)
	}
	if data, _, err := b.Get(ctx, logKey(8)); err != nil || string(data) != "a8" {
		t.Fatalf("b reads a's batch 8 = %q, %v", data, err)
	}
}

// One store holds one node's log: a log key under another prefix is
// refused, before and after reopening.
func TestLogKeysOfAnotherNodeAreRefused(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	s := open(t, dir)
	if _, err := s.PutIfAbsent(ctx, logKey(0), []byte("n1")); err != nil {
		t.Fatal(err)
	}
	other := fmt.Sprintf("nodes/n2/log/%020d", 1)
	if _, err := s.PutIfAbsent(ctx, other, []byte("n2")); !errors.Is(err, blob.ErrPermanent) {
		t.Fatalf("put of another node's log key = %v, want ErrPermanent", err)
	}
	_ = s.Close()
	s = open(t, dir)
	defer s.Close()
	if _, err := s.PutIfAbsent(ctx, other, []byte("n2")); !errors.Is(err, blob.ErrPermanent) {
		t.Fatalf("after reopening, put of another node's log key = %v, want ErrPermanent", err)
	}
	if data, _, err := s.Get(ctx, logKey(0)); err != nil || string(data) != "n1" {
		t.Fatalf("Get = %q, %v", data, err)
	}
}
