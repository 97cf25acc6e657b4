package fs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/blobtest"
	"github.com/dexzd/dexzd/internal/blob/fs"
)

func open(t *testing.T, dir string, mode fs.Mode) *fs.Store {
	t.Helper()
	s, err := fs.Open(dir, mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	for _, mode := range []fs.Mode{fs.Strict, fs.ProcessCrashSafe} {
		t.Run(mode.String(), func(t *testing.T) {
			blobtest.Run(t, func(t *testing.T) blob.Store { return open(t, t.TempDir(), mode) })
		})
	}
}

// Two stores on one directory have separate file descriptions, so they
// exclude each other through the flock exactly as two processes do.
func TestTwoStoresOnOneDirectory_ConditionalWritesExclude(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, fs.ProcessCrashSafe), open(t, dir, fs.ProcessCrashSafe)
	v, err := a.PutIfAbsent(t.Context(), "lease", []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 50 {
		var wg sync.WaitGroup
		var wins, losses int
		var mu sync.Mutex
		var next blob.Version
		for i, s := range []*fs.Store{a, b, a, b} {
			wg.Go(func() {
				nv, err := s.PutIfMatch(t.Context(), "lease", fmt.Appendf(nil, "%d/%d", round, i), v)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
					next = nv
				case errors.Is(err, blob.ErrPrecondition):
					losses++
				default:
					t.Errorf("PutIfMatch: %v", err)
				}
			})
		}
		wg.Wait()
		if wins != 1 || losses != 3 {
			t.Fatalf("round %d: %d wins and %d losses, want 1 and 3", round, wins, losses)
		}
		v = next
	}
}

func TestStrictFsyncsAndCrashSafeDoesNot(t *testing.T) {
	strict := open(t, t.TempDir(), fs.Strict)
	fast := open(t, t.TempDir(), fs.ProcessCrashSafe)
	for _, s := range []*fs.Store{strict, fast} {
		if _, err := s.PutIfAbsent(t.Context(), "nodes/n/log/1", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// file + the directory entry, plus the directories created on the way.
	if got := strict.Stats().Fsyncs; got < 2 {
		t.Fatalf("strict store made %d fsyncs for one write, want at least 2 (file and directory)", got)
	}
	if got := fast.Stats().Fsyncs; got != 0 || fast.Fsyncs() != 0 {
		t.Fatalf("processCrashSafe store made %d fsyncs, want 0", got)
	}
	// A write into an existing directory: the file and the directory.
	before := strict.Fsyncs()
	if before != strict.Stats().Fsyncs {
		t.Fatalf("Fsyncs() = %d, Stats().Fsyncs = %d", before, strict.Stats().Fsyncs)
	}
	if _, err := strict.PutIfAbsent(t.Context(), "nodes/n/log/2", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if got := strict.Fsyncs() - before; got != 2 {
		t.Fatalf("strict store made %d fsyncs for a write into an existing directory, want 2", got)
	}
}

func TestCorruptFileIsPermanentNamingTheKey(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, fs.Strict)
	if err := os.WriteFile(filepath.Join(dir, "bad"), []byte("no header"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Get(t.Context(), "bad")
	if blob.Classify(err) != blob.ErrPermanent {
		t.Fatalf("Get of a file without header: %v, want permanent", err)
	}
	var be *blob.Error
	if !errors.As(err, &be) || be.Key != "bad" {
		t.Fatalf("error %v does not name the key", err)
	}
}

// A key below an existing object cannot be created (the object is a file,
// not a directory): that is permanent, not worth a retry.
func TestKeyBelowAnObjectIsPermanent(t *testing.T) {
	s := open(t, t.TempDir(), fs.Strict)
	if _, err := s.PutIfAbsent(t.Context(), "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err := s.PutIfAbsent(t.Context(), "a/b", []byte("x"))
	if blob.Classify(err) != blob.ErrPermanent {
		t.Fatalf("write below an object: %v, want permanent", err)
	}
}

// A create leaves no temporary file behind, whether it wins or finds the
// key taken, and the object it made is the one read back.
func TestPutIfAbsent_LeavesNoTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, fs.Strict)
	v, err := s.PutIfAbsent(t.Context(), "nodes/n/log/1", []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfAbsent(t.Context(), "nodes/n/log/1", []byte("second")); !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("second create: %v, want ErrPrecondition", err)
	}
	data, got, err := s.Get(t.Context(), "nodes/n/log/1")
	if err != nil || string(data) != "first" || got != v {
		t.Fatalf("Get = %q, %s, %v; want the first write, version %s", data, got, err, v)
	}
	left, err := os.ReadDir(filepath.Join(dir, ".tmp"))
	if err != nil || len(left) != 0 {
		t.Fatalf("temporary files left: %v, %v", left, err)
	}
}
