package localstore

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/dexzd/dexzd/internal/diskfull"
)

// Apply refuses a commit that would leave less than the reserve (a
// memtable flush) free, instead of letting Pebble meet the full disk and
// panic on its WAL write (issue 11 item 5); nothing is applied.
func TestApply_RefusesWhenTheDiskIsFull(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	if err := s.Apply(1, nil); err != nil {
		t.Fatal(err)
	}
	s.disk.reserve = 1 << 62 // more than any disk has
	err := s.Apply(2, nil)
	d := diskfull.From(err)
	if !errors.Is(err, syscall.ENOSPC) || d == nil || d.Path != dir || d.Free == 0 {
		t.Fatalf("Apply on a full disk = %v; want a disk-full error naming %s and the free space", err, dir)
	}
	if seq, _ := s.Applied(); seq != 1 {
		t.Errorf("applied %d after a refused batch; want 1", seq)
	}
}

// A background flush or compaction that meets a full disk makes every
// later Apply fail with it.
func TestApply_FailsAfterABackgroundDiskFull(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	s.disk.backgroundError(&diskfull.Error{Path: "/x/000012.sst", Err: syscall.ENOSPC})
	if err := s.Apply(1, nil); diskfull.From(err) == nil || diskfull.From(err).Path != "/x/000012.sst" {
		t.Fatalf("Apply after a background ENOSPC = %v", err)
	}
}

// Open on a disk without the reserve fails at once (a restart on a full
// disk used to hang for a minute in retried flushes).
func TestOpen_RefusesAFullDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := Open(dir, Options{MemTableSize: 1 << 62})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "free") {
		t.Fatalf("Open = %v; want a disk-full error naming %s and the free space", err, dir)
	}
}

// Pebble's errors are logged at most once a second, the next line
// counting those left out: a flush retried against a full disk used to log
// ~230 lines a second.
func TestPebbleLogger_RateLimitsErrors(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	p := &pebbleLogger{l: slog.New(slog.NewTextHandler(&out, nil))}
	for range 1000 {
		p.Errorf("background error: %v", syscall.ENOSPC)
	}
	if n := strings.Count(out.String(), "\n"); n != 1 {
		t.Fatalf("1000 errors in a burst logged %d lines; want 1:\n%s", n, out.String())
	}
	p.mu.Lock()
	p.last = p.last.Add(-pebbleErrorEvery) // a second later
	p.mu.Unlock()
	p.Errorf("background error: %v", syscall.ENOSPC)
	if !strings.Contains(out.String(), "suppressed=999") {
		t.Errorf("the next line does not count the 999 left out:\n%s", out.String())
	}
}

// A restore (bootstrap from a snapshot) on a disk without the reserve is
// the same disk-full error, and leaves nothing behind.
func TestRestore_RefusesAFullDisk(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	if err := s.Apply(7, nil); err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if _, err := s.Checkpoint(&snap); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() + "/state"
	_, err := Restore(dir, &snap, Options{MemTableSize: 1 << 62})
	if !errors.Is(err, syscall.ENOSPC) || diskfull.From(err) == nil {
		t.Fatalf("Restore on a full disk = %v; want a disk-full error", err)
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("a refused restore left %s behind (%v)", dir, serr)
	}
}

// Pebble's fatal errors must not return. One caused by a full disk ends
// the process with status 1 and the disk-full line (not a panic, exit 2).
func TestPebbleLogger_FatalDiskFullExits1(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	type exited struct{ code int }
	p := &pebbleLogger{l: slog.New(slog.NewTextHandler(&out, nil)), exit: func(code int) { panic(exited{code}) }}
	dir := t.TempDir()
	got := func() (r any) {
		defer func() { r = recover() }()
		p.Fatalf("MANIFEST write: %v", &os.PathError{Op: "write", Path: dir + "/MANIFEST-000005", Err: syscall.ENOSPC})
		return nil
	}()
	if e, ok := got.(exited); !ok || e.code != 1 {
		t.Fatalf("Fatalf on ENOSPC = %v; want exit 1", got)
	}
	if line := out.String(); !strings.Contains(line, "disk full") || !strings.Contains(line, dir+"/MANIFEST-000005") || !strings.Contains(line, "free=") {
		t.Errorf("line %q does not name the path and the free space", line)
	}
	other := func() (r any) {
		defer func() { r = recover() }()
		p.Fatalf("corruption: %v", errors.New("bad block"))
		return nil
	}()
	if _, ok := other.(string); !ok {
		t.Errorf("Fatalf on another error = %v; want the panic", other)
	}
}
