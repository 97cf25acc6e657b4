package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dexzd/dexzd/internal/testproc"
)

// A timeline records what the test did and what the processes did, with
// the time since the run began, for the report of a failure.
type timeline struct {
	began time.Time
	mu    sync.Mutex
	lines []string
}

func newTimeline() *timeline { return &timeline{began: time.Now()} }

func (tl *timeline) addf(format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.lines = append(tl.lines, fmt.Sprintf("%9.3fs  ", time.Since(tl.began).Seconds())+fmt.Sprintf(format, args...))
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.lines, "\n")
}

// A slot is one supervised server process, restarted when it exits, as a
// process manager (systemd, a Kubernetes pod) would: at once, with a
// backoff from 100 ms to 2 s while it keeps exiting within 2 s of its
// start.
type slot struct {
	name string
	addr string
	args []string
	tl   *timeline
	conn *grpc.ClientConn

	mu       sync.Mutex
	cur      *testproc.Proc
	expected bool // the current process's exit was caused by the test
	exits    []exit
	starts   int
}

// An exit is one process's end.
type exit struct {
	code     int
	expected bool   // the test killed it
	last     string // its last log line
	panicked bool
}

func newSlot(t *testing.T, name, addr string, tl *timeline, args ...string) *slot {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &slot{name: name, addr: addr, args: args, tl: tl, conn: conn}
}

// supervise runs the slot's process until ctx ends; the returned function
// waits for that.
func (s *slot) supervise(t *testing.T, ctx context.Context) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			s.mu.Lock()
			p := testproc.Start(t, s.args...)
			s.cur, s.expected = p, false
			s.starts++
			s.mu.Unlock()
			s.tl.addf("%s: started pid %d", s.name, p.Pid())
			began := time.Now()
			select {
			case <-p.Exited():
			case <-ctx.Done():
				return
			}
			logs := p.Log()
			lines := strings.Split(strings.TrimSpace(logs), "\n")
			e := exit{code: p.ExitCode(), last: lines[len(lines)-1],
				panicked: strings.Contains(logs, "panic:") || strings.Contains(logs, "fatal error:")}
			s.mu.Lock()
			e.expected = s.expected
			s.exits = append(s.exits, e)
			s.mu.Unlock()
			s.tl.addf("%s: pid %d exited %d (killed by the test: %v): %s", s.name, p.Pid(), e.code, e.expected, e.last)
			if *flagLogs != "" {
				_ = os.WriteFile(filepath.Join(*flagLogs, fmt.Sprintf("%s-%s-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), s.name, p.Pid())), []byte(logs), 0o644)
			}
			if time.Since(began) > 2*time.Second {
				backoff = 100 * time.Millisecond
			}
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(2*backoff, 2*time.Second)
		}
	}()
	return func() { <-done }
}

// signal sends sig to the current process if it still runs; a SIGKILL
// marks its exit as the test's doing.
func (s *slot) signal(sig syscall.Signal) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.cur
	if p == nil {
		return false
	}
	select {
	case <-p.Exited():
		return false
	default:
	}
	if sig == syscall.SIGKILL {
		s.expected = true
	}
	s.tl.addf("%s: %s to pid %d", s.name, signalNames[sig], p.Pid())
	return syscall.Kill(p.Pid(), sig) == nil
}

var signalNames = map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGSTOP: "SIGSTOP", syscall.SIGCONT: "SIGCONT"}

// serving reports whether the slot's process answers readiness SERVING.
func (s *slot) serving(ctx context.Context) bool {
	st, ok := testproc.Readiness(ctx, s.conn)
	return ok && st == grpc_health_v1.HealthCheckResponse_SERVING
}

// exitsSince returns the exits after the first n.
func (s *slot) exitsSince(n int) []exit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]exit(nil), s.exits[n:]...)
}

func (s *slot) exitCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.exits)
}

// A node is the slots of one node: one dev process, or a serve pair.
type node struct {
	slots []*slot
}

func (n *node) addrs() []string {
	var out []string
	for _, s := range n.slots {
		out = append(out, s.addr)
	}
	return out
}

// active waits up to timeout for a slot whose process serves; it returns
// nil when none does.
func (n *node) active(ctx context.Context, timeout time.Duration) *slot {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for _, s := range n.slots {
			if s.serving(ctx) {
				return s
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
