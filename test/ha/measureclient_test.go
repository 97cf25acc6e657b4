package ha

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// Client-observed failover (DEX_HA_MEASURE_MODE=client, issue 10 "Measure
// from the client"). Each event runs under load from SDK clients with the
// SDK's defaults and every address of the node:
//
//   - a probe client calls ListFlows every 10 ms (each call with a 15 s
//     deadline, as an application would set one);
//   - a flow client starts a pause flow (two steps of 100 ms) every 20 ms and waits for each
//     (WaitForFlow), and an SDK worker runs them.
//
// Per event it reports, next to the server-side figure (signal or command
// to the new "serving" log line), the client-observed window: the longest
// gap between two successful probe calls around the event (last success
// before to first success after); the longest added delay of an
// acknowledged flow (its completion minus its acknowledgement minus the
// median latency before the event); and how far past the window a flow was
// late: its completion minus the later of the window's end and its
// acknowledgement, minus the median latency.
//
// Targets at lease.duration 10s: crash and freeze windows <= 11.5 s,
// SIGTERM, hand-over and dev restart <= 0.5 s, no flow later than 1 s past
// the window. The measurement reports; it fails only when a flow is lost
// or ends other than completed.

// The pause flow: two steps of 100 ms each, so that a dozen flows are in
// flight at any moment of the load, some of them in a step on the worker.
type (
	PauseA struct{ dex.Step[int] }
	PauseB struct{ dex.Step[int] }
)

func (PauseA) Execute(_ dex.Context, n int) (dex.Decision, error) {
	time.Sleep(100 * time.Millisecond)
	return dex.Move(dex.To[PauseB](n + 1)), nil
}

func (PauseB) Execute(_ dex.Context, n int) (dex.Decision, error) {
	time.Sleep(100 * time.Millisecond)
	return dex.GracefulComplete(n + 1), nil
}

var pauseFlow = dex.NewFlow("pause2").Start(PauseA{}).Steps(PauseB{})

// clientFigures is one run of one event.
type clientFigures struct {
	server    time.Duration // signal or command to the new serving line
	window    time.Duration // last probe success before to first after
	toFirst   time.Duration // signal to the first probe success after
	added     time.Duration // longest added delay of an acknowledged flow
	pastWin   time.Duration // longest delay of a flow past the window
	normal    time.Duration // median flow latency before the event
	refused   int           // probe calls that failed in the window
	inFlight  int           // flows acknowledged, not completed at the signal
	completed int           // flows that completed in the run
}

// clientEvent is one event the client measurement runs.
type clientEvent struct {
	name    string
	target  time.Duration // the window's target at lease.duration 10s (0: none)
	dev     bool          // a dev server, not the backends
	trigger func(t *testing.T, backend string, lease time.Duration, load func(addrs []string) *clientLoad) clientFigures
}

var clientEvents = []clientEvent{
	{name: "crash (SIGKILL), hot standby", target: 11500 * time.Millisecond, trigger: func(t *testing.T, backend string, lease time.Duration, load func([]string) *clientLoad) clientFigures {
		return signalPair(t, backend, lease, true, syscall.SIGKILL, load)
	}},
	{name: "crash (SIGKILL), cold standby", target: 11500 * time.Millisecond, trigger: func(t *testing.T, backend string, lease time.Duration, load func([]string) *clientLoad) clientFigures {
		return signalPair(t, backend, lease, false, syscall.SIGKILL, load)
	}},
	{name: "freeze (SIGSTOP), hot standby", target: 11500 * time.Millisecond, trigger: func(t *testing.T, backend string, lease time.Duration, load func([]string) *clientLoad) clientFigures {
		return signalPair(t, backend, lease, true, syscall.SIGSTOP, load)
	}},
	{name: "SIGTERM, hot standby", target: 500 * time.Millisecond, trigger: func(t *testing.T, backend string, lease time.Duration, load func([]string) *clientLoad) clientFigures {
		return signalPair(t, backend, lease, true, syscall.SIGTERM, load)
	}},
	{name: "SIGTERM, cold standby", target: 500 * time.Millisecond, trigger: func(t *testing.T, backend string, lease time.Duration, load func([]string) *clientLoad) clientFigures {
		return signalPair(t, backend, lease, false, syscall.SIGTERM, load)
	}},
	{name: "step down, hand-over (hot)", target: 500 * time.Millisecond, trigger: func(t *testing.T, backend string, lease time.Duration, load func([]string) *clientLoad) clientFigures {
		return stepDownClient(t, backend, lease, true, load)
	}},
	{name: "step down, take-back (single)", trigger: func(t *testing.T, backend string, lease time.Duration, load func([]string) *clientLoad) clientFigures {
		return stepDownClient(t, backend, lease, false, load)
	}},
	{name: "dev restart (SIGKILL, start)", target: 500 * time.Millisecond, dev: true, trigger: func(t *testing.T, _ string, _ time.Duration, load func([]string) *clientLoad) clientFigures {
		return devRestartClient(t, load)
	}},
}

// measureClients runs every client event runs times per backend (the dev
// restart once per run, on a local data directory). DEX_HA_MEASURE_EVENT
// keeps only the events whose name contains it.
func measureClients(t *testing.T, lease time.Duration, runs int, only string) {
	var report []string
	for _, ev := range clientEvents {
		if only != "" && !strings.Contains(ev.name, only) {
			continue
		}
		bs := backends
		if ev.dev {
			bs = []string{"dev"}
		}
		for _, backend := range bs {
			var figs []clientFigures
			for i := range runs {
				t.Run(fmt.Sprintf("%s/%s/%d", strings.NewReplacer(" ", "_", ",", "", "(", "", ")", "").Replace(ev.name), backend, i), func(t *testing.T) {
					ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
					defer cancel()
					f := ev.trigger(t, backend, lease, func(addrs []string) *clientLoad { return startClientLoad(t, ctx, addrs) })
					t.Logf("%s %s: server %v, client window %v (first answer %v after the event, %d calls failed), flows: normal %v, longest added delay %v, past the window %v, %d in flight, %d completed",
						ev.name, backend, ms(f.server), ms(f.window), ms(f.toFirst), f.refused, ms(f.normal), ms(f.added), ms(f.pastWin), f.inFlight, f.completed)
					figs = append(figs, f)
				})
			}
			if len(figs) == 0 {
				continue
			}
			pick := func(get func(clientFigures) time.Duration) string {
				var ds []time.Duration
				for _, f := range figs {
					ds = append(ds, get(f))
				}
				return fmt.Sprintf("%v (%v-%v)", ms(median(ds)), ms(slices.Min(ds)), ms(slices.Max(ds)))
			}
			met := "no target"
			if ev.target > 0 {
				met = "target met"
				for _, f := range figs {
					if f.window > ev.target || f.pastWin > time.Second {
						met = fmt.Sprintf("TARGET MISSED (window <= %v, flows <= 1s past it)", ev.target)
					}
				}
			}
			line := fmt.Sprintf("client %-31s %-8s lease %v, %d runs: server %s; client window %s; first answer after the event %s; flow added delay %s; past the window %s; normal latency %s; %s",
				ev.name, backend, lease, len(figs), pick(func(f clientFigures) time.Duration { return f.server }),
				pick(func(f clientFigures) time.Duration { return f.window }), pick(func(f clientFigures) time.Duration { return f.toFirst }),
				pick(func(f clientFigures) time.Duration { return f.added }), pick(func(f clientFigures) time.Duration { return f.pastWin }),
				pick(func(f clientFigures) time.Duration { return f.normal }), met)
			t.Log(line)
			report = append(report, line)
		}
	}
	for _, l := range report {
		t.Log(l)
	}
}

// probe is one probe call: when it ended and whether it succeeded.
type probe struct {
	end time.Time
	ok  bool
}

// flowRec is one flow of the load: when StartFlow returned and when
// WaitForFlow returned it completed.
type flowRec struct {
	id          string
	acked, done time.Time
	err         error
}

// clientLoad is the probe, the flows and the worker of one run.
type clientLoad struct {
	t       *testing.T
	mu      sync.Mutex
	probes  []probe
	flows   []*flowRec
	waits   sync.WaitGroup
	stop    context.CancelFunc
	started sync.WaitGroup
	worker  func()
	flowC   *dex.Client
}

// startClientLoad starts the worker, the probe and the flows on addrs and
// returns once 50 flows completed (the median latency before the event is
// known and the log holds a few hundred batches).
func startClientLoad(t *testing.T, ctx context.Context, addrs []string) *clientLoad {
	t.Helper()
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: addrs, Logger: quietLogger(), MaxConcurrentTasks: 32, DrainTimeout: time.Second}, pauseFlow)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopW := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	var once sync.Once
	l := &clientLoad{t: t, worker: func() { once.Do(func() { stopW(); <-wdone }) }}
	t.Cleanup(l.worker)
	probeC, flowC := sdkClient(t, ctx, addrs), sdkClient(t, ctx, addrs)
	l.flowC = flowC
	lctx, stop := context.WithCancel(ctx)
	l.stop = stop
	l.started.Add(2)
	go func() {
		defer l.started.Done()
		for lctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(lctx, 15*time.Second)
			_, err := probeC.ListFlows(cctx, dex.FlowQuery{PageSize: 1})
			ccancel()
			if lctx.Err() != nil {
				return
			}
			l.mu.Lock()
			l.probes = append(l.probes, probe{end: time.Now(), ok: err == nil})
			l.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	go func() {
		defer l.started.Done()
		for i := 0; lctx.Err() == nil; i++ {
			f := &flowRec{id: fmt.Sprintf("c-%d", i)}
			// StartFlow is retried with its request ID through the event.
			if _, err := flowC.StartFlow(lctx, pauseFlow, f.id, i); err != nil {
				if lctx.Err() != nil {
					return
				}
				f.err = fmt.Errorf("start: %w", err)
				l.mu.Lock()
				l.flows = append(l.flows, f)
				l.mu.Unlock()
				continue
			}
			f.acked = time.Now()
			l.mu.Lock()
			l.flows = append(l.flows, f)
			l.mu.Unlock()
			l.waits.Add(1)
			go func() {
				defer l.waits.Done()
				for {
					res, err := flowC.WaitForFlow(ctx, f.id)
					now := time.Now()
					l.mu.Lock()
					switch {
					case err != nil && ctx.Err() == nil && now.Sub(f.acked) < 2*time.Minute:
						l.mu.Unlock()
						time.Sleep(10 * time.Millisecond)
						continue // wait again: the flow's outcome is what is measured
					case err != nil:
						f.err = err
					case res.Status != dex.StatusCompleted:
						f.err = fmt.Errorf("status %v", res.Status)
					default:
						f.done = now
					}
					l.mu.Unlock()
					return
				}
			}()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for l.completedBefore(time.Now()) < 50 {
		if time.Now().After(deadline) {
			t.Fatal("50 flows did not complete within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return l
}

func sdkClient(t *testing.T, ctx context.Context, addrs []string) *dex.Client {
	t.Helper()
	c, err := dex.NewClient(dex.ClientOptions{Addresses: addrs, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (l *clientLoad) completedBefore(at time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, f := range l.flows {
		if !f.done.IsZero() && f.done.Before(at) {
			n++
		}
	}
	return n
}

// finish waits until the probe has succeeded for 3 s after served (when
// a process logged that it serves again) and every acknowledged flow
// ended, stops the load and computes the figures for an event at `at` (the
// signal or the command).
func (l *clientLoad) finish(at, served time.Time) clientFigures {
	t := l.t
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l.mu.Lock()
		var okAfter time.Time
		for _, p := range l.probes {
			if p.ok && p.end.After(served) {
				okAfter = p.end
				break
			}
		}
		l.mu.Unlock()
		if !okAfter.IsZero() && time.Since(okAfter) > 3*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no probe call succeeded within 2 minutes of the event")
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.stop()
	l.started.Wait()
	waited := make(chan struct{})
	go func() { l.waits.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(time.Minute):
		t.Fatal("acknowledged flows did not end within a minute of the load's end")
	}
	l.worker()

	l.mu.Lock()
	defer l.mu.Unlock()
	var f clientFigures
	var worst *flowRec
	// The window: the longest gap between successful probe calls ending
	// from 1 s before the event on, the later one after the event.
	var prev time.Time
	var lastBefore, firstAfter time.Time
	for _, p := range l.probes {
		if !p.ok {
			continue
		}
		if p.end.Before(at.Add(-time.Second)) {
			prev = p.end
			continue
		}
		if !prev.IsZero() && p.end.After(at) && p.end.Sub(prev) > f.window {
			f.window, lastBefore, firstAfter = p.end.Sub(prev), prev, p.end
		}
		prev = p.end
	}
	f.toFirst = firstAfter.Sub(at)
	for _, p := range l.probes {
		if !p.ok && p.end.After(lastBefore) && !p.end.After(firstAfter) {
			f.refused++
		}
	}
	var before []time.Duration
	for _, r := range l.flows {
		if r.err != nil {
			t.Errorf("flow %s: %v", r.id, r.err)
			continue
		}
		if r.done.IsZero() {
			continue // its StartFlow was cut off by the load's end
		}
		f.completed++
		if r.done.Before(at) {
			before = append(before, r.done.Sub(r.acked))
		}
	}
	f.normal = median(before)
	for _, r := range l.flows {
		if r.err != nil || r.done.IsZero() {
			continue
		}
		if r.acked.Before(at) && r.done.After(at) {
			f.inFlight++
		}
		f.added = max(f.added, r.done.Sub(r.acked)-f.normal)
		from := r.acked
		if from.Before(firstAfter) {
			from = firstAfter
		}
		if r.done.After(from) && r.done.Sub(from)-f.normal > f.pastWin {
			f.pastWin, worst = r.done.Sub(from)-f.normal, r
		}
	}
	if worst != nil {
		// The history of the flow latest past the window says what held it.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var lines []string
		if h, err := l.flowC.GetFlowHistory(ctx, worst.id, dex.HistoryQuery{}); err != nil {
			lines = append(lines, err.Error())
		} else {
			for _, e := range h.Events {
				lines = append(lines, strings.Join(strings.Fields(e.String()), " "))
			}
		}
		t.Logf("flow latest past the window: %s, acknowledged %v after the event, completed %v after the window's end; history:\n%s",
			worst.id, ms(worst.acked.Sub(at)), ms(worst.done.Sub(firstAfter)), strings.Join(lines, "\n"))
	}
	return f
}

var servingLine = regexp.MustCompile(`time=(\S+) level=INFO msg=serving `)

// lastServing returns the time of the process's last "serving" line.
func lastServing(t *testing.T, p *testproc.Proc) time.Time {
	t.Helper()
	all := servingLine.FindAllStringSubmatch(p.Log(), -1)
	if len(all) == 0 {
		t.Fatalf("no serving line in the log:\n%s", p.Log())
	}
	ts, err := time.Parse(time.RFC3339Nano, all[len(all)-1][1])
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// signalPair sends sig to the active of a pair under client load and
// measures until the standby serves and the clients are answered again.
func signalPair(t *testing.T, backend string, lease time.Duration, hot bool, sig syscall.Signal, load func([]string) *clientLoad) clientFigures {
	a, b, pa, pb := startPairMode(t, storage(t, backend), lease, hot)
	l := load([]string{a.addr, b.addr})
	at := time.Now()
	pa.Signal(t, sig)
	pb.Serving(t, lease+30*time.Second)
	served := lastServing(t, pb)
	f := l.finish(at, served)
	f.server = served.Sub(at)
	if sig == syscall.SIGSTOP {
		pa.Signal(t, syscall.SIGKILL)
	}
	pb.Signal(t, syscall.SIGTERM)
	pb.Wait(t, 30*time.Second)
	return f
}

// stepDownClient steps down with dexcli under client load: the active of a
// hot pair (hand-over) or a single process (take-back after the hold-off).
func stepDownClient(t *testing.T, backend string, lease time.Duration, handOver bool, load func([]string) *clientLoad) clientFigures {
	var next *testproc.Proc
	var addr string
	var addrs []string
	if handOver {
		a, b, _, pb := startPairMode(t, storage(t, backend), lease, true)
		next, addr, addrs = pb, a.addr, []string{a.addr, b.addr}
	} else {
		s := newServerWith(t, storage(t, backend), "", "", lease)
		p := s.start(t)
		p.Serving(t, 30*time.Second)
		next, addr, addrs = p, s.addr, []string{s.addr}
	}
	l := load(addrs)
	if handOver {
		time.Sleep(750 * time.Millisecond) // the follower reads what the flows wrote
	}
	servedBefore := strings.Count(next.Log(), "msg=serving ")
	at := time.Now()
	out, _ := cliStepDown(t, addr)
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(next.Log(), "msg=serving ") == servedBefore {
		if time.Now().After(deadline) {
			t.Fatalf("not serving again within 30 s:\n%s", next.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	served := lastServing(t, next)
	f := l.finish(at, served)
	f.server = served.Sub(at)
	want := "takenBackByThisProcess"
	if handOver {
		want = "takenOverByAnotherProcess"
	}
	if out.LeaseHolderAfterStepDown != want {
		t.Fatalf("step down = %+v, want %s", out, want)
	}
	return f
}

// devRestartClient kills a dev server under client load and starts it
// again at once on its data directory.
func devRestartClient(t *testing.T, load func([]string) *clientLoad) clientFigures {
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--data-dir", dir, "--listen", addr}
	p1 := testproc.Start(t, args...)
	p1.Serving(t, 30*time.Second)
	l := load([]string{addr})
	at := time.Now()
	p1.Signal(t, syscall.SIGKILL)
	p1.Wait(t, 10*time.Second)
	p2 := testproc.Start(t, args...)
	p2.Serving(t, 30*time.Second)
	served := lastServing(t, p2)
	f := l.finish(at, served)
	f.server = served.Sub(at)
	p2.Signal(t, syscall.SIGTERM)
	p2.Wait(t, 30*time.Second)
	return f
}
