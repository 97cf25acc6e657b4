// Package testproc runs the real dex-server-zd binary in tests: it builds
// it once per test binary, starts processes with arguments, captures their
// logs, learns the address they serve on from the "serving" log line, and
// sends them signals. Process tests use it so that they drive exactly what
// an operator runs.
package testproc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// moduleRoot finds the directory of the module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the dexzd module")
	}
	return filepath.Dir(mod), nil
}

// Binary builds cmd/dex-server-zd (once per test binary) and returns its
// path. Process tests are skipped under -short.
func Binary(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("process tests build and run the binary; -short skips them")
	}
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		binDir, err = os.MkdirTemp("", "dexzd-testproc-")
		if err != nil {
			buildErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir, "./cmd/dex-server-zd", "./cmd/dexcli")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatalf("build dex-server-zd: %v", buildErr)
	}
	return filepath.Join(binDir, "dex-server-zd")
}

// CLI returns the path of the dexcli binary built beside the server.
func CLI(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(filepath.Dir(Binary(tb)), "dexcli")
}

// Cleanup removes the built binaries; call it from TestMain after m.Run.
func Cleanup() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago, for a process that must come back on the same address after a
// restart. The port is picked at random below the kernel's ephemeral range
// (ip_local_port_range): a port from that range (what listening on port 0
// gives) can be taken, between the check and the child's bind, as the
// source port of any outgoing connection of a busy machine, which failed a
// clean-clone CI run with "bind: address already in use". A port is not
// handed out twice by one test binary.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	low := ephemeralLow()
	freeMu.Lock()
	defer freeMu.Unlock()
	for range 200 {
		port := freeFloor + rand.IntN(low-freeFloor)
		if handedOut[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		handedOut[port] = true
		return fmt.Sprintf("127.0.0.1:%d", port)
	}
	tb.Fatalf("no free loopback port between %d and %d after 200 tries", freeFloor, low)
	return ""
}

// freeFloor is the lowest port FreeAddr hands out.
const freeFloor = 20000

var (
	freeMu    sync.Mutex
	handedOut = map[int]bool{}
)

// ephemeralLow returns the first port of the kernel's ephemeral range
// (32768 when it cannot be read, Linux's default).
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > freeFloor+1000 {
				low = n
			}
		}
	}
	return low
}

// servingLine is the serving line in text or JSON (log.format: json).
var servingLine = regexp.MustCompile(`msg=serving .*addr=([0-9.:]+)|"msg":"serving".*"addr":"([0-9.:]+)"`)

// Proc is one running process.
type Proc struct {
	cmd    *exec.Cmd
	addr   chan string
	exited chan struct{}

	mu   sync.Mutex
	logs bytes.Buffer
	code int
}

// Start starts the server binary with args. The process is killed when
// the test ends if it still runs.
func Start(tb testing.TB, args ...string) *Proc {
	tb.Helper()
	return StartEnv(tb, nil, args...)
}

// StartEnv is Start with env ("KEY=value") added to the test's
// environment (later entries win).
func StartEnv(tb testing.TB, env []string, args ...string) *Proc {
	tb.Helper()
	p := &Proc{cmd: exec.Command(Binary(tb), args...), addr: make(chan string, 1), exited: make(chan struct{})}
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go p.read(pipe)
	tb.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if tb.Failed() {
			tb.Logf("log of %v:\n%s", args, p.Log())
		}
	})
	return p
}

func (p *Proc) read(pipe io.Reader) {
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.logs.WriteString(line + "\n")
		p.mu.Unlock()
		if m := servingLine.FindStringSubmatch(line); m != nil {
			select {
			case p.addr <- m[1] + m[2]:
			default:
			}
		}
	}
	_, _ = io.Copy(io.Discard, pipe)
	err := p.cmd.Wait()
	var ee *exec.ExitError
	p.mu.Lock()
	switch {
	case errors.As(err, &ee):
		p.code = ee.ExitCode()
	case err != nil:
		p.code = -1
	}
	p.mu.Unlock()
	close(p.exited)
}

// Log returns everything the process wrote to stderr so far.
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// Pid returns the process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Serving waits up to timeout until the process logs that it serves and
// returns its address.
func (p *Proc) Serving(tb testing.TB, timeout time.Duration) string {
	tb.Helper()
	select {
	case a := <-p.addr:
		return a
	case <-p.exited:
		tb.Fatalf("process exited with %d before serving:\n%s", p.ExitCode(), p.Log())
	case <-time.After(timeout):
		tb.Fatalf("process not serving within %v:\n%s", timeout, p.Log())
	}
	return ""
}

// Signal sends sig to the process.
func (p *Proc) Signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("signal %v: %v", sig, err)
	}
}

// Wait waits up to timeout for the exit and returns the exit status (-1
// when killed by a signal).
func (p *Proc) Wait(tb testing.TB, timeout time.Duration) int {
	tb.Helper()
	select {
	case <-p.exited:
		return p.ExitCode()
	case <-time.After(timeout):
		tb.Fatalf("process did not exit within %v:\n%s", timeout, p.Log())
	}
	return 0
}

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// ExitCode returns the exit status once Exited is closed.
func (p *Proc) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code
}
