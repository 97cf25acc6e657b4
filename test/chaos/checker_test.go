package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/dex"
)

// The workload: a chain of three steps, and (every fourth flow) a step
// that waits for a durable timer. Each step appends its name and attempt
// number to the trail it was given, so the output records which attempt of
// each step was committed; a step whose result was committed twice, or a
// flow started twice, shows in the output, the history or the list of
// runs. The timer step appends "T#ATTEMPT" only when its Results say the
// timer fired, and the history must show its Execute completing at least
// timerWait after its WaitFor. Every execution is also counted on the
// worker's side, by flow and step (in a file when the worker is a process
// of its own): steps run again after a fault are at-least-once execution,
// not duplicates, and are reported apart.
type Trail struct {
	N     int      `json:"n"`
	Steps []string `json:"steps"`
}

type (
	S1 struct{ dex.Step[Trail] }
	S2 struct{ dex.Step[Trail] }
	S3 struct{ dex.Step[Trail] }
	T  struct{ dex.Step[Trail] }
)

// executions counts step executions by "flowID/stepType" in the test's
// own process; a worker process appends the same keys to execLog, one a
// line (see runWorkerProcess).
var (
	executions sync.Map
	execLog    *os.File
)

// stepWork is how long each chain step works: a flow is in progress for
// at least 3 x stepWork after its start is acknowledged, so that a fault
// finds flows in the middle of their steps, and a killed worker takes
// tasks with it.
const stepWork = 50 * time.Millisecond

func record(ctx dex.Context, in Trail, suffix string) Trail {
	info := ctx.Info()
	key := info.FlowID + "/" + info.StepType
	if execLog != nil {
		// One write per line on an O_APPEND file: a SIGKILL keeps
		// every line written before it, whole.
		_, _ = execLog.WriteString(key + "\n")
	} else {
		v, _ := executions.LoadOrStore(key, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
	}
	in.Steps = append(slices.Clip(in.Steps), fmt.Sprintf("%s#%d%s", info.StepType, info.Attempt, suffix))
	return in
}

func (S1) Execute(ctx dex.Context, in Trail) (dex.Decision, error) {
	time.Sleep(stepWork)
	return dex.Move(dex.To[S2](record(ctx, in, ""))), nil
}

func (S2) Execute(ctx dex.Context, in Trail) (dex.Decision, error) {
	time.Sleep(stepWork)
	return dex.Move(dex.To[S3](record(ctx, in, ""))), nil
}

func (S3) Execute(ctx dex.Context, in Trail) (dex.Decision, error) {
	time.Sleep(stepWork)
	return dex.GracefulComplete(record(ctx, in, "")), nil
}

// timerWait is the durable timer T waits for: a failover or a worker's
// kill often falls inside it.
const timerWait = 2 * time.Second

func (T) WaitFor(dex.Context, Trail) (dex.Wait, error) {
	return dex.Until(dex.Timer(timerWait)), nil
}

func (T) Execute(ctx dex.Context, in Trail, r dex.Results) (dex.Decision, error) {
	suffix := ""
	if !r.TimerFired(dex.TimerIndex(0)) {
		suffix = "-timer-not-fired"
	}
	return dex.GracefulComplete(record(ctx, in, suffix)), nil
}

const (
	flowType      = "chaos"
	timerFlowType = "chaos-timer"
)

// workloadOptions bound an attempt to 3 s (the server's default is 30 s):
// the tasks a killed worker held are handed out again 3 s later, and
// retried soon after.
var workloadOptions = func() dex.StepOptions {
	m := dex.MethodOptions{AttemptTimeout: 3 * time.Second,
		Retry: &dex.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second}}
	return dex.StepOptions{WaitFor: m, Execute: m}
}()

var (
	chainFlow = dex.NewFlow(flowType).Start(S1{}).Steps(S2{}, S3{}).Defaults(workloadOptions)
	timerFlow = dex.NewFlow(timerFlowType).Start(T{}).Defaults(workloadOptions)
)

// isTimerFlow says which flow the workload starts as its n-th.
func isTimerFlow(n int) bool { return n%4 == 3 }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var fastBackoff = dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}

// An ack is one StartFlow that returned OK.
type ack struct {
	id, run string
	n       int
	phase   int
	timer   bool // a timerFlow
}

// A phase is one fault's stretch of the run: the acknowledgements, errors
// and pauses that clients saw while it was applied.
type phase struct {
	fault  string
	cycles int

	began, lastAck time.Time
	acks           int
	errors         map[string]int
	longestPause   time.Duration
	slowestCall    time.Duration
	// slowestCompletion: the longest from a fault's beginning to the end
	// of the chain flow acknowledged last before it.
	slowestCompletion time.Duration

	// Filled in by the verification.
	lost, duplicated, rerun int
}

// A checker runs callers that start flows and records every
// acknowledgement, then checks that each acknowledged flow completed
// exactly once with the right output.
type checker struct {
	topo string
	c    *dex.Client
	tl   *timeline
	// execLog is the worker process's file of executions (empty: the
	// worker runs in the test's process).
	execLog string

	mu     sync.Mutex
	acks   []ack
	phases []*phase
	next   int
	// returned is when each caller's last start returned (acknowledged or
	// not).
	returned []time.Time
}

func newChecker(topo string, c *dex.Client, tl *timeline) *checker {
	ch := &checker{topo: topo, c: c, tl: tl}
	ch.begin("warm-up")
	return ch
}

// begin starts a phase; acknowledgements from now on count for it.
func (ch *checker) begin(fault string) *phase {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	now := time.Now()
	p := &phase{fault: fault, began: now, lastAck: now, errors: map[string]int{}}
	ch.phases = append(ch.phases, p)
	ch.tl.addf("phase: %s", fault)
	return p
}

func (ch *checker) current() (*phase, int) {
	return ch.phases[len(ch.phases)-1], len(ch.phases) - 1
}

// acked returns the number of acknowledgements so far.
func (ch *checker) acked() int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return len(ch.acks)
}

// run starts flows from callers goroutines, each pausing pace between
// starts, until ctx ends; the returned function waits for them.
func (ch *checker) run(ctx context.Context, callers int, pace time.Duration) func() {
	var wg sync.WaitGroup
	ch.mu.Lock()
	ch.returned = make([]time.Time, callers)
	ch.mu.Unlock()
	for caller := range callers {
		wg.Go(func() {
			for ctx.Err() == nil {
				ch.mu.Lock()
				n := ch.next
				ch.next++
				ch.mu.Unlock()
				id := fmt.Sprintf("%s-%07d", ch.topo, n)
				began := time.Now()
				flow := chainFlow
				if isTimerFlow(n) {
					flow = timerFlow
				}
				run, err := ch.c.StartFlow(ctx, flow, id, Trail{N: n})
				took := time.Since(began)
				if ctx.Err() != nil {
					return // the end of the run, not a fault
				}
				ch.mu.Lock()
				ch.returned[caller] = time.Now()
				p, pi := ch.current()
				p.slowestCall = max(p.slowestCall, took)
				if err != nil {
					p.errors[errorClass(err)]++
				} else {
					now := time.Now()
					p.longestPause = max(p.longestPause, now.Sub(p.lastAck))
					p.lastAck = now
					p.acks++
					ch.acks = append(ch.acks, ack{id: id, run: run.RunID, n: n, phase: pi, timer: flow == timerFlow})
				}
				ch.mu.Unlock()
				select {
				case <-time.After(pace):
				case <-ctx.Done():
				}
			}
		})
	}
	return wg.Wait
}

// errorClass names an error for the report: its status code, or that its
// outcome was unknown.
func errorClass(err error) string {
	var unknown *dex.OutcomeUnknownError
	if errors.As(err, &unknown) {
		return "outcome unknown"
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Code().String()
	}
	return "other"
}

// lastChainAck returns the chain flow acknowledged last.
func (ch *checker) lastChainAck() (ack, bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for i := len(ch.acks) - 1; i >= 0; i-- {
		if !ch.acks[i].timer {
			return ch.acks[i], true
		}
	}
	return ack{}, false
}

// progress waits up to timeout until n more starts were acknowledged.
func (ch *checker) progress(n int, timeout time.Duration) bool {
	want := ch.acked() + n
	deadline := time.Now().Add(timeout)
	for ch.acked() < want {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// settled waits up to timeout until every caller's start call that was in
// flight at since has returned, so that none is still waiting when the
// next fault begins: its time would span both faults. With a fixed number
// of acknowledgements as the only criterion, a caller one retry behind the
// others (about 100 ms, the standby's retry hint) was regularly caught by
// the next fault: a start sent as an outage began was acknowledged only
// after the next outage, 42-45 s later.
func (ch *checker) settled(since time.Time, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		ch.mu.Lock()
		waiting := 0
		for _, t := range ch.returned {
			if t.Before(since) {
				waiting++
			}
		}
		ch.mu.Unlock()
		if waiting == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// verify checks every acknowledged flow: it completed once, with the
// output the workload gives, with one run of its flow ID, one FlowStarted,
// one ExecuteCompleted per step (with the attempt the output names) and
// one FlowClosed. It fills in the phases' lost, duplicated and rerun
// counts and returns a line for each failure.
func (ch *checker) verify(t *testing.T, ctx context.Context, within time.Duration) []string {
	t.Helper()
	ch.mu.Lock()
	acks := slices.Clone(ch.acks)
	ch.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()

	runs := ch.listRuns(t, ctx)
	execs, err := ch.executions()
	if err != nil {
		t.Fatalf("read the worker's executions: %v", err)
	}
	var (
		mu       sync.Mutex
		failures []string
		wg       sync.WaitGroup
		sem      = make(chan struct{}, 16)
	)
	fail := func(a ack, dup bool, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		p := ch.phases[a.phase]
		if dup {
			p.duplicated++
		} else {
			p.lost++
		}
		failures = append(failures, fmt.Sprintf("%s (acknowledged in phase %q, run %s): ", a.id, p.fault, a.run)+fmt.Sprintf(format, args...))
	}
	for _, a := range acks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if n := runs[a.id]; n != 1 {
				fail(a, n > 1, "%d runs of the flow ID listed, want 1", n)
				return
			}
			res, err := ch.c.WaitForFlow(ctx, a.id)
			if err != nil {
				fail(a, false, "not completed: %v", err)
				return
			}
			if res.Status != dex.StatusCompleted || res.RunID != a.run {
				fail(a, false, "ended %v in run %s (%v), want COMPLETED in the acknowledged run", res.Status, res.RunID, res.Error)
				return
			}
			if len(res.Outputs) != 1 {
				fail(a, len(res.Outputs) > 1, "%d outputs, want 1", len(res.Outputs))
				return
			}
			out, err := dex.Output[Trail](res)
			if err != nil || out.N != a.n {
				fail(a, false, "output %+v (%v), want n=%d", out, err, a.n)
				return
			}
			want := wantTrail(a)
			if len(out.Steps) != len(want) {
				fail(a, len(out.Steps) > len(want), "output trail %v, want one entry per step of %v", out.Steps, want)
				return
			}
			if msg, dup := checkHistory(ctx, ch.c, a, out.Steps); msg != "" {
				fail(a, dup, "%s", msg)
				return
			}
			rerun := 0
			for _, st := range want {
				rerun += max(0, execs[a.id+"/"+st]-1)
			}
			mu.Lock()
			ch.phases[a.phase].rerun += rerun
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.Strings(failures)
	return failures
}

// wantTrail returns the step types an acknowledged flow's output trail
// names, in order.
func wantTrail(a ack) []string {
	if a.timer {
		return []string{"T"}
	}
	return []string{"S1", "S2", "S3"}
}

// executions returns the number of executions by "flowID/stepType": those
// the worker process appended to the checker's execLog, or, without one,
// those of a worker in the test's own process.
func (ch *checker) executions() (map[string]int, error) {
	counts := map[string]int{}
	if ch.execLog == "" {
		executions.Range(func(k, v any) bool {
			counts[k.(string)] = int(v.(*atomic.Int32).Load())
			return true
		})
		return counts, nil
	}
	b, err := os.ReadFile(ch.execLog)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" {
			counts[line]++
		}
	}
	return counts, nil
}

// listRuns counts the runs of each flow ID of the workload's types.
func (ch *checker) listRuns(t *testing.T, ctx context.Context) map[string]int {
	t.Helper()
	runs := map[string]int{}
	for _, ft := range []string{flowType, timerFlowType} {
		token := ""
		for {
			page, err := ch.c.ListFlows(ctx, dex.FlowQuery{FlowType: ft, PageSize: 1000, PageToken: token})
			if err != nil {
				t.Fatalf("list flows: %v", err)
			}
			for _, f := range page.Flows {
				runs[f.FlowID]++
			}
			if token = page.NextPageToken; token == "" {
				break
			}
		}
	}
	return runs
}

// checkHistory checks a completed flow's history against its output trail:
// one FlowStarted, one ExecuteCompleted per step with the attempt the
// trail names, one FlowClosed; for a timer flow also one WaitForCompleted,
// and the Execute completing at least timerWait after it (the timer fired
// no earlier than it should). It returns what is wrong (empty when nothing
// is) and whether it is a duplicate.
func checkHistory(ctx context.Context, c *dex.Client, a ack, trail []string) (string, bool) {
	var events []dex.HistoryEvent
	token := ""
	for {
		page, err := c.GetFlowHistory(ctx, a.id, dex.HistoryQuery{PageToken: token})
		if err != nil {
			return fmt.Sprintf("history: %v", err), false
		}
		events = append(events, page.Events...)
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	count := map[dex.HistoryEventKind]int{}
	var (
		completed      []string
		waited, execed time.Time
	)
	for _, e := range events {
		count[e.Kind]++
		switch e.Kind {
		case dex.EventExecuteCompleted:
			completed = append(completed, fmt.Sprintf("%s#%d", e.StepType, e.Attempt))
			execed = e.Time
		case dex.EventWaitForCompleted:
			waited = e.Time
		}
	}
	switch {
	case count[dex.EventFlowStarted] != 1 || count[dex.EventFlowClosed] != 1:
		return fmt.Sprintf("history has %d FlowStarted and %d FlowClosed, want 1 each: %v",
			count[dex.EventFlowStarted], count[dex.EventFlowClosed], events), true
	case len(completed) != len(trail):
		return fmt.Sprintf("history has ExecuteCompleted %v, the output trail %v", completed, trail), len(completed) > len(trail)
	case !slices.Equal(completed, trail):
		return fmt.Sprintf("history has ExecuteCompleted %v, the output trail %v", completed, trail), false
	}
	if a.timer {
		if n := count[dex.EventWaitForCompleted]; n != 1 {
			return fmt.Sprintf("history has %d WaitForCompleted, want 1: %v", n, events), n > 1
		}
		if d := execed.Sub(waited); d < timerWait {
			return fmt.Sprintf("the timer step's Execute completed %v after its WaitFor, before its %v timer: %v", d, timerWait, events), false
		}
	}
	for i, st := range wantTrail(a) {
		if !strings.HasPrefix(trail[i], st+"#") {
			return fmt.Sprintf("output trail %v out of order", trail), false
		}
	}
	return "", false
}
