package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// Echo is a one-step flow that completes with its (large) input: every
// flow stores its input and its output.
type Echo struct{ dex.Step[string] }

func (Echo) Execute(_ dex.Context, s string) (dex.Decision, error) {
	return dex.GracefulComplete(s), nil
}

var echoFlow = dex.NewFlow("echo").Start(Echo{})

// smallDisk mounts a tmpfs of size bytes and returns its path; it skips the
// test when the process cannot mount (not root, or no mount permission).
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (the disk-full test runs as root in CI)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file on dir's file system until it is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	if f == nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// diskFullLine is the one line a process that found its disk full ends
// with: it names the path and the free space.
var diskFullLine = regexp.MustCompile(`(?m)^.*disk full.*$`)

// checkDiskFullExit checks that p ended with status 1 (not 2, not a
// panic) and one line naming a path under dir and the free space, and
// that the log is not flooded.
func checkDiskFullExit(t *testing.T, p *testproc.Proc, dir string, maxLines int) {
	t.Helper()
	logs := p.Log()
	if code := p.ExitCode(); code != 1 {
		t.Errorf("exit status %d; want 1 (a full disk is neither a usage error nor a panic)", code)
	}
	if strings.Contains(logs, "panic:") || strings.Contains(logs, "goroutine ") {
		t.Errorf("the process panicked on a full disk")
	}
	lines := diskFullLine.FindAllString(logs, -1)
	if len(lines) == 0 {
		t.Errorf("no line says the disk is full")
	} else {
		t.Logf("last line: %s", lines[len(lines)-1])
	}
	for _, l := range lines {
		if !strings.Contains(l, dir) || !strings.Contains(l, "free") {
			t.Errorf("the disk-full line does not name a path under %s and the free space:\n%s", dir, l)
		}
	}
	if n := strings.Count(logs, "\n"); n > maxLines {
		t.Errorf("the process logged %d lines; want at most %d (rate-limited)", n, maxLines)
	}
	if t.Failed() {
		tail := logs
		if len(tail) > 8000 {
			tail = "…" + tail[len(tail)-8000:]
		}
		t.Logf("log:\n%s", tail)
	}
}

// A dev server whose disk fills up under load exits 1 with one line naming
// the path and the free space (it used to panic, exit 2); restarted on the
// still-full disk it fails fast with the same line instead of hanging and
// logging hundreds of Pebble errors a second.
func TestDiskFull_ExitsCleanlyAndRestartFailsFast(t *testing.T) {
	// The local store (Pebble) on a disk of its own, the log with room:
	// the store's writes are the ones that fail (the panic of issue 11);
	// and the whole data directory on the small disk: the log's segment
	// appends fail first.
	// And the log's segments on a small disk of their own: the log's
	// appends fail with ENOSPC. (Value objects are files of the data
	// directory's store, which writes them through its own temporary
	// directory: DataDir fills them too.)
	for _, c := range []struct {
		name, small string
		size        int
		input       int
	}{
		{"LocalStore", "state", diskSize, bigInput},
		{"DataDir", "", diskSize, bigInput},
		// Inputs below limits.valueObjectBytes: they go into the log.
		{"LogSegments", "log-segments", 8 << 20, 96 << 10},
	} {
		t.Run(c.name, func(t *testing.T) { testDiskFull(t, c.small, c.size, c.input) })
	}
}

// bigInput is the raw size of the load's inputs: 256 KiB once in base64,
// above limits.valueObjectBytes.
const bigInput = 192 << 10

// diskSize is the small disk's size. Pebble preallocates its WAL (about
// 1.1 memtables, 35 MiB) and the local store keeps a memtable flush and
// 4 MiB free (36 MiB): about 24 MiB of load fills it.
const diskSize = 96 << 20

func testDiskFull(t *testing.T, small string, size, input int) {
	var dir, disk string
	if small == "" {
		disk = smallDisk(t, size)
		dir = filepath.Join(disk, "data")
	} else {
		dir = t.TempDir()
		disk = filepath.Join(dir, small)
		if err := os.MkdirAll(disk, 0o755); err != nil {
			t.Fatal(err)
		}
		sd := smallDisk(t, size)
		if err := syscall.Mount(sd, disk, "", syscall.MS_BIND, ""); err != nil {
			t.Skipf("cannot bind-mount %s on %s: %v", sd, disk, err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(disk, syscall.MNT_DETACH) })
	}
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--data-dir", dir, "--listen", addr}
	p1 := testproc.Start(t, args...)
	p1.Serving(t, 30*time.Second)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{addr}, MaxConcurrentTasks: 16, Logger: quietLogger(), DrainTimeout: time.Second,
		ReconnectBackoff: dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}}, echoFlow)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopWorker(); wg.Wait() }()
	wg.Go(func() { _ = w.Run(wctx) })
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// Load: flows with incompressible inputs until the process ends.
	loadCtx, stopLoad := context.WithCancel(ctx)
	for g := range 4 {
		wg.Go(func() {
			raw := make([]byte, input)
			for i := 0; loadCtx.Err() == nil; i++ {
				_, _ = rand.Read(raw)
				_, _ = c.StartFlow(loadCtx, echoFlow, fmt.Sprintf("big-%d-%d", g, i), base64.StdEncoding.EncodeToString(raw))
			}
		})
	}
	select {
	case <-p1.Exited():
	case <-ctx.Done():
		stopLoad()
		t.Fatalf("the server did not stop within a minute of load on a %d MiB disk:\n%s", size>>20, p1.Log())
	}
	stopLoad()
	checkDiskFullExit(t, p1, disk, 200)
	if t.Failed() {
		return
	}

	// The disk stays full: a restart fails fast with the same line.
	fill(t, disk)
	began := time.Now()
	p2 := testproc.Start(t, args...)
	select {
	case <-p2.Exited():
	case <-time.After(10 * time.Second):
		t.Fatalf("a restart on a full disk did not fail within 10s:\n%s", p2.Log())
	}
	t.Logf("the restart on a full disk failed in %v", time.Since(began).Round(time.Millisecond))
	checkDiskFullExit(t, p2, disk, 30)
}
