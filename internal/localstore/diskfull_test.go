package localstore

import (
	"bytes"
	"errors"
	"log/slog"
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
