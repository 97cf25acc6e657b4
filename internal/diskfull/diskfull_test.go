package diskfull

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

func TestFrom_RecognisesENOSPC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	werr := fmt.Errorf("append batch 3: %w", &fs.PathError{Op: "write", Path: dir + "/000008.log", Err: syscall.ENOSPC})
	e := From(werr)
	if e == nil || e.Path != dir+"/000008.log" || e.Free == 0 {
		t.Fatalf("From(%v) = %+v; want the path and the free space", werr, e)
	}
	if msg := e.Error(); !strings.HasPrefix(msg, "disk full: "+dir+"/000008.log: ") || !strings.Contains(msg, " free") {
		t.Errorf("message %q", msg)
	}
	if From(errors.New("other")) != nil || From(nil) != nil {
		t.Error("not a full disk")
	}
	wrapped := fmt.Errorf("open: %w", &Error{Path: "/x", Free: 10, Need: 4096})
	if got := From(wrapped); got == nil || got.Path != "/x" || !errors.Is(wrapped, syscall.ENOSPC) {
		t.Errorf("From(%v) = %+v", wrapped, got)
	}
}

func TestReserve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := Reserve(dir+"/not/yet", 1); err != nil {
		t.Errorf("Reserve 1 byte = %v", err)
	}
	if err := Reserve(dir, 1<<62); From(err) == nil {
		t.Errorf("Reserve 4 EiB = %v; want a disk-full error", err)
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[uint64]string{0: "0 B", 512: "512 B", 1536: "1.5 KiB", 24 << 20: "24.0 MiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q; want %q", n, got, want)
		}
	}
}
