package fs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dexzd/dexzd/internal/blob"
)

// syncLog records the paths a store fsyncs, through beforeSync.
type syncLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *syncLog) record(path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paths = append(l.paths, path)
}

// take returns the recorded paths and forgets them.
func (l *syncLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.paths
	l.paths = nil
	return p
}

func openStrict(t *testing.T, root string) *Store {
	t.Helper()
	s, err := Open(root, Strict)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// checkDurablePath fails unless synced holds every directory from root down
// to the key's directory and one data file (the temporary file renamed
// into place).
func checkDurablePath(t *testing.T, root, key string, synced []string) {
	t.Helper()
	dir := root
	want := []string{root}
	for _, part := range strings.Split(key, "/") {
		dir = filepath.Join(dir, part)
		want = append(want, dir)
	}
	want = want[:len(want)-1] // the key itself is a file
	for _, d := range want {
		if !slices.Contains(synced, d) {
			t.Errorf("directory %s on the path of %s was not fsynced before the write returned; fsynced: %q", d, key, synced)
		}
	}
	if !slices.ContainsFunc(synced, func(p string) bool { return strings.HasPrefix(p, filepath.Join(root, tmpDir)+"/") }) {
		t.Errorf("the data file of %s was not fsynced; fsynced: %q", key, synced)
	}
}

// Issue 9, the exact timeline: writer A creates directory d (nodes/n/log)
// and, before it fsyncs d's parent, writer B (another Store on the same
// root, as another process) finds d existing, writes d/2, fsyncs the file
// and d and acknowledges. A power loss now would lose d and with it B's
// acknowledged write. In strict mode B itself must fsync every directory
// on the path, whoever created them; and once it has, a further write into
// d costs only the file and d.
//
// Covers: D5
func TestPutIfAbsent_FsyncsDirectoriesAnotherStoreIsCreating(t *testing.T) {
	root := t.TempDir()
	a, b := openStrict(t, root), openStrict(t, root)
	d := filepath.Join(root, "nodes", "n", "log")

	created, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.beforeSync = func(path string) {
		if path == filepath.Dir(d) {
			// d exists; A is about to fsync its parent. Hold it there.
			once.Do(func() { close(created) })
			<-release
		}
	}
	aDone := make(chan error, 1)
	go func() {
		_, err := a.PutIfAbsent(t.Context(), "nodes/n/log/1", []byte("a"))
		aDone <- err
	}()
	defer func() {
		close(release)
		if err := <-aDone; err != nil {
			t.Errorf("A's write: %v", err)
		}
	}()
	<-created

	var bLog syncLog
	b.beforeSync = bLog.record
	if _, err := b.PutIfAbsent(t.Context(), "nodes/n/log/2", []byte("b")); err != nil {
		t.Fatal(err)
	}
	checkDurablePath(t, root, "nodes/n/log/2", bLog.take())

	// Cheap: B remembers the directories it fsynced.
	if _, err := b.PutIfAbsent(t.Context(), "nodes/n/log/3", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if got := bLog.take(); len(got) != 2 || got[1] != d {
		t.Errorf("a second write into %s fsynced %q, want the data file and %s only", d, got, d)
	}
}

// A key whose directories were created but never fsynced (its writer ran
// in processCrashSafe mode, or crashed before its fsyncs): a strict
// PutIfMatch over it acknowledges only after fsyncing every directory on
// the path, not just the key's own.
//
// Covers: D5
func TestPutIfMatch_FsyncsDirectoriesItDidNotCreate(t *testing.T) {
	root := t.TempDir()
	fast, err := Open(root, ProcessCrashSafe)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	v, err := fast.PutIfAbsent(t.Context(), "nodes/n/lease", []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	s := openStrict(t, root)
	var log syncLog
	s.beforeSync = log.record
	if _, err := s.PutIfMatch(t.Context(), "nodes/n/lease", []byte("1"), v); err != nil {
		t.Fatal(err)
	}
	checkDurablePath(t, root, "nodes/n/lease", log.take())
}

// A PutIfAbsent that finds its key is taken as "these bytes are durable"
// by content-addressed callers (wal.Values: equal bytes are one object).
// The timeline: writer A renames a value object into place and, before it
// fsyncs the object's directory, writer B (a concurrent caller, or the
// next process after A crashed) writes the same key, is refused with
// ErrPrecondition, and commits a log record naming the object. A power
// loss now loses the object's directory entry and keeps the record. In
// strict mode the refused write must make the existing entry durable (the
// file and its directory) before it returns.
//
// Covers: D5
func TestPutIfAbsent_PreconditionFsyncsTheExistingEntry(t *testing.T) {
	root := t.TempDir()
	a, b := openStrict(t, root), openStrict(t, root)
	const key = "nodes/n/values/ab"
	dir := filepath.Join(root, "nodes", "n", "values")

	placed, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.beforeSync = func(path string) {
		if path == dir && fileExists(filepath.Join(dir, "ab")) {
			// The object is in place; A is about to fsync its directory.
			once.Do(func() { close(placed) })
			<-release
		}
	}
	aDone := make(chan error, 1)
	go func() {
		_, err := a.PutIfAbsent(t.Context(), key, []byte("v"))
		aDone <- err
	}()
	defer func() {
		close(release)
		if err := <-aDone; err != nil {
			t.Errorf("A's write: %v", err)
		}
	}()
	<-placed

	var bLog syncLog
	b.beforeSync = bLog.record
	if _, err := b.PutIfAbsent(t.Context(), key, []byte("v")); !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("B's write of an existing key: %v, want ErrPrecondition", err)
	}
	synced := bLog.take()
	for _, p := range []string{filepath.Join(dir, "ab"), dir} {
		if !slices.Contains(synced, p) {
			t.Errorf("B was refused for an existing key without fsyncing %s; fsynced: %q", p, synced)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// In processCrashSafe mode (dev's default) a log record that survives a
// host crash must find the value object it names, which was written
// before it: keys under SyncUnder's prefix are written as in strict mode
// (the data file and every directory down to it, the root's entry
// included; an existing entry is made durable before a refused write
// says it is there), and other keys still cost no fsync.
//
// Covers: D5
func TestSyncUnder_ValueObjectsAreDurableInProcessCrashSafeMode(t *testing.T) {
	root := filepath.Join(t.TempDir(), "log")
	var log syncLog
	s, err := Open(root, ProcessCrashSafe, SyncUnder("nodes/n/values/"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := log.take(); len(got) != 0 {
		t.Fatalf("fsyncs before the hook: %q", got)
	}
	if !s.isDurable(root) {
		t.Fatal("the root's entry is not durable after Open")
	}
	s.beforeSync = log.record
	if _, err := s.PutIfAbsent(t.Context(), "nodes/n/log/00000001", []byte("batch")); err != nil {
		t.Fatal(err)
	}
	if got := log.take(); len(got) != 0 {
		t.Fatalf("a log key was fsynced in processCrashSafe mode: %q", got)
	}
	const key = "nodes/n/values/ab"
	if _, err := s.PutIfAbsent(t.Context(), key, []byte("large")); err != nil {
		t.Fatal(err)
	}
	checkDurablePath(t, root, key, log.take())
	if _, err := s.PutIfAbsent(t.Context(), key, []byte("large")); !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("second write: %v, want ErrPrecondition", err)
	}
	if got := log.take(); !slices.Contains(got, filepath.Join(root, "nodes", "n", "values", "ab")) {
		t.Fatalf("a refused value write did not fsync the existing object: %q", got)
	}
}
