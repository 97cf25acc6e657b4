package ha

import (
	"context"
	"fmt"
	"log/slog"
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

// detectBound is the SDK's detection bound (UnresponsiveTimeout) in the
// frozen-active test: below lease.duration + 1 s, as the SDK's docs ask.
const detectBound = 1500 * time.Millisecond

// An active process frozen with SIGSTOP (as a host that hangs or a network
// partition looks to its clients) blocks no client and no worker: the SDK
// notices within its detection bound that the active stopped answering,
// moves to the other address, and gets answers from the hot standby as
// soon as it serves: within lease.duration + 1 s of the freeze (L13) plus
// the takeover's recovery. Calls in flight at the freeze are retried there
// (a read, and a WaitForFlow long poll that returns the result the new
// active computes), and the worker moves and runs steps there.
//
// Covers: P5, L13
func TestFrozenActive_ClientAndWorkerMoveToTheNewActive(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { freezeActive(t, backend) })
	}
}

func freezeActive(t *testing.T, backend string) {
	a, b, pa, pb := startPairMode(t, storage(t, backend), leaseDuration, true)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	addrs := []string{a.addr, b.addr}
	logs := &logRecorder{}
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: addrs, Logger: slog.New(logs.with("worker")),
		ReconnectBackoff: fastBackoff, DrainTimeout: time.Second, UnresponsiveTimeout: detectBound}, chainFlow, napFlow)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(wctx) }()
	defer func() { stopWorker(); <-workerDone }()
	c, err := dex.NewClient(dex.ClientOptions{Addresses: addrs, Logger: slog.New(logs.with("client")),
		RetryBackoff: fastBackoff, UnresponsiveTimeout: detectBound})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	if _, err := c.StartFlow(ctx, chainFlow, "warm", 0); err != nil {
		t.Fatal(err)
	}
	if res, err := c.WaitForFlow(ctx, "warm"); err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("warm: %v, %v", res, err)
	}
	// A flow that waits on a durable timer through the freeze, and a
	// WaitForFlow long poll sent to the active before it.
	if _, err := c.StartFlow(ctx, napFlow, "nap", 1); err != nil {
		t.Fatal(err)
	}
	waitStored(t, &napsWaiting, []string{"nap"}, 10*time.Second)
	type result struct {
		res *dex.FlowResult
		err error
		at  time.Time
	}
	napDone := make(chan result, 1)
	go func() {
		res, err := c.WaitForFlow(ctx, "nap")
		napDone <- result{res, err, time.Now()}
	}()
	time.Sleep(100 * time.Millisecond) // the long poll reaches the active

	pa.Signal(t, syscall.SIGSTOP)
	frozenAt := time.Now()
	// A thread of the process that runs on another CPU stops a moment
	// after kill returns, and may answer a call sent meanwhile.
	waitStopped(t, pa.Pid())
	// A caller that reads every 10 ms, each call with a deadline as an
	// application would set one.
	firstAnswer := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := c.GetFlowSummary(cctx, "warm")
			ccancel()
			if err == nil {
				firstAnswer <- time.Now()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	// The standby serves within lease.duration + 1 s of the active's last
	// renewal, plus its recovery; as it serves it closes the connections
	// it accepted as a standby, so the client, whose connection to it
	// opened before the takeover, reconnects and is answered within
	// handOverBound.
	bound := leaseDuration + time.Second + time.Second + handOverBound
	var answeredAt time.Time
	select {
	case answeredAt = <-firstAnswer:
	case <-time.After(bound):
		t.Fatalf("no answer through the SDK within %v of the freeze; SDK log:\n%s", bound, logs)
	}
	pb.Serving(t, time.Second)
	afterServing := answeredAt.Sub(servingTime(t, pb))
	t.Logf("first answer %v after the freeze, %v after the standby logged serving", ms(answeredAt.Sub(frozenAt)),
		ms(afterServing))
	if afterServing > handOverBound {
		t.Errorf("first answer %v after the standby logged serving, want under %v", ms(afterServing), handOverBound)
	}

	// The long poll sent before the freeze ends with the result the new
	// active computes (it fires the timer that came due, T5).
	select {
	case r := <-napDone:
		if r.err != nil || r.res.Status != dex.StatusCompleted {
			t.Fatalf("WaitForFlow(nap) across the freeze = %v, %v", r.res, r.err)
		}
		t.Logf("WaitForFlow sent before the freeze returned %v after it", ms(r.at.Sub(frozenAt)))
	case <-time.After(bound + 2*time.Second - time.Since(frozenAt)):
		t.Fatalf("WaitForFlow sent before the freeze did not return within %v; SDK log:\n%s", bound+2*time.Second, logs)
	}

	// The worker moved: a flow started now runs its three steps there.
	if _, err := c.StartFlow(ctx, chainFlow, "after", 10); err != nil {
		t.Fatal(err)
	}
	wctx2, wcancel := context.WithTimeout(ctx, 3*time.Second)
	defer wcancel()
	if res, err := c.WaitForFlow(wctx2, "after"); err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("a flow started on the new active did not complete within 3 s: %v, %v; SDK log:\n%s", res, err, logs)
	}
	// Both noticed the freeze within the detection bound.
	for _, who := range []string{"client", "worker"} {
		at, ok := logs.firstWith(who, "unresponsive", a.addr)
		if !ok {
			t.Errorf("the %s did not log the active unresponsive; SDK log:\n%s", who, logs)
			continue
		}
		t.Logf("the %s saw the active unresponsive %v after the freeze", who, ms(at.Sub(frozenAt)))
		if d := at.Sub(frozenAt); d > detectBound+500*time.Millisecond {
			t.Errorf("the %s saw the active unresponsive %v after the freeze, want within %v (plus a margin)", who, d, detectBound)
		}
	}
	if at, ok := logs.firstWith("worker", "worker connected", b.addr); ok {
		t.Logf("the worker connected to the new active %v after the freeze", ms(at.Sub(frozenAt)))
	}

	began := time.Now()
	pa.Signal(t, syscall.SIGCONT)
	defer func() { t.Logf("the resumed process exited after %v", ms(time.Since(began))) }()
	if code := pa.Wait(t, 20*time.Second); code != 1 {
		t.Fatalf("the resumed process exited %d, want 1", code)
	}
}

var servingTimeLine = regexp.MustCompile(`time=(\S+) level=INFO msg=serving `)

// servingTime returns when the process logged that it serves.
func servingTime(t *testing.T, p *testproc.Proc) time.Time {
	t.Helper()
	m := servingTimeLine.FindStringSubmatch(p.Log())
	if m == nil {
		t.Fatalf("no serving line in the log:\n%s", p.Log())
	}
	ts, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// logRecorder is a slog handler that keeps every record, with the name of
// the component that logged it.
type logRecorder struct {
	mu   sync.Mutex
	recs []loggedRecord
}

type loggedRecord struct {
	who, msg, attrs string
	at              time.Time
}

func (l *logRecorder) with(who string) slog.Handler { return &recHandler{l: l, who: who} }

// firstWith returns the time of the first record of who whose message
// contains substr and whose attributes contain attr.
func (l *logRecorder) firstWith(who, substr, attr string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if r.who == who && strings.Contains(r.msg+r.attrs, substr) && strings.Contains(r.attrs, attr) {
			return r.at, true
		}
	}
	return time.Time{}, false
}

func (l *logRecorder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sb strings.Builder
	for _, r := range l.recs {
		fmt.Fprintf(&sb, "%s %s %q%s\n", r.at.Format("15:04:05.000"), r.who, r.msg, r.attrs)
	}
	return sb.String()
}

type recHandler struct {
	l     *logRecorder
	who   string
	attrs string
}

func (h *recHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recHandler) Handle(_ context.Context, r slog.Record) error {
	var sb strings.Builder
	sb.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value)
		return true
	})
	h.l.mu.Lock()
	h.l.recs = append(h.l.recs, loggedRecord{who: h.who, msg: r.Message, attrs: sb.String(), at: r.Time})
	h.l.mu.Unlock()
	return nil
}

func (h *recHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var sb strings.Builder
	sb.WriteString(h.attrs)
	for _, a := range as {
		fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value)
	}
	return &recHandler{l: h.l, who: h.who, attrs: sb.String()}
}

func (h *recHandler) WithGroup(string) slog.Handler { return h }

// waitStopped waits until every thread of process pid is stopped (state T
// in /proc/pid/task/*/stat).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		stopped := len(stats) > 0
		for _, f := range stats {
			b, err := os.ReadFile(f)
			// The state follows the command name in parentheses.
			i := strings.LastIndexByte(string(b), ')')
			if err != nil || i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not stopped within 5 s of SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}
