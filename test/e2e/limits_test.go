package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// Big is a one-step flow whose input the step measures; it completes with
// the length, so only the task carries a large value.
type Big struct{ dex.Step[string] }

func (Big) Execute(_ dex.Context, s string) (dex.Decision, error) {
	return dex.GracefulComplete(len(s)), nil
}

func (Big) Options() dex.StepOptions {
	return dex.StepOptions{Execute: dex.MethodOptions{
		Retry: &dex.RetryPolicy{InitialInterval: 50 * time.Millisecond, MaximumAttempts: 2},
	}}
}

var bigFlow = dex.NewFlow("big").Start(Big{})

// limitsServer starts a dev server and returns a client of it and a
// function that starts a worker of bigFlow (opts adds to its options).
func limitsServer(t *testing.T, ctx context.Context, opts dex.WorkerOptions) (c *dex.Client, startWorker func()) {
	t.Helper()
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", filepath.Join(dir, "data"), "--listen", addr)
	p.Serving(t, 30*time.Second)
	opts.Addresses = []string{addr}
	opts.MaxConcurrentTasks = 32
	opts.Logger = quietLogger()
	opts.ReconnectBackoff = dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	w, err := dex.NewWorker(opts, bigFlow)
	if err != nil {
		t.Fatal(err)
	}
	c, err = dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, func() {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
}

// startWithOrdinary starts the big flow, then 20 ordinary flows of the
// same type with a small input, before any worker serves the type (W5):
// when the worker connects, all 21 tasks go out in one dispatch, the big
// one first (the queue of a type is FIFO). It returns the ordinary flows'
// IDs.
func startWithOrdinary(t *testing.T, ctx context.Context, c *dex.Client, bigInput string) []string {
	t.Helper()
	if _, err := c.StartFlow(ctx, bigFlow, "big-1", bigInput); err != nil {
		t.Fatalf("start big-1: %v", err)
	}
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = fmt.Sprintf("ordinary-%02d", i)
		if _, err := c.StartFlow(ctx, bigFlow, ids[i], "small"); err != nil {
			t.Fatalf("start %s: %v", ids[i], err)
		}
	}
	return ids
}

// waitAll waits for every flow of ids to complete by deadline and returns
// how long the slowest took from start.
func waitAll(t *testing.T, ctx context.Context, c *dex.Client, ids []string, start time.Time, bound time.Duration) time.Duration {
	t.Helper()
	wctx, cancel := context.WithDeadline(ctx, start.Add(bound))
	defer cancel()
	var (
		mu      sync.Mutex
		slowest time.Duration
		wg      sync.WaitGroup
	)
	for _, id := range ids {
		wg.Go(func() {
			res, err := c.WaitForFlow(wctx, id)
			if err != nil {
				t.Errorf("%s did not complete within %v of its start: %v", id, bound, err)
				return
			}
			if res.Status != dex.StatusCompleted {
				t.Errorf("%s ended %v (%v), want COMPLETED", id, res.Status, res.Error)
				return
			}
			mu.Lock()
			slowest = max(slowest, time.Since(start))
			mu.Unlock()
		})
	}
	wg.Wait()
	return slowest
}

// Issue 11, item 1: a flow whose input is just under the 4 MiB value
// limit got a task slightly larger than 4 MiB, which the SDK worker, at
// gRPC's default 4 MiB receive limit, refused by ending its stream
// ("received message larger than max (4194494 vs. 4194304)"): the tasks
// sent after it in the same dispatch were lost until their 30 s attempt
// timeout, and the big task broke the stream again on every retry. Now the
// worker accepts what the server may send (Hello/Welcome state the
// limits): the big flow completes, and so do the 20 ordinary flows started
// with it, well within the attempt timeout. Before the fix this failed
// with "big-1 did not complete within 10s of its start" (and, in most
// runs, some ordinary flows too).
//
// Covers: E28, W3
func TestLimits_InputJustUnderTheValueLimitDoesNotPoisonTheWorkerStream(t *testing.T) {
	const bound = 10 * time.Second // the attempt timeout is 30 s
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, startWorker := limitsServer(t, ctx, dex.WorkerOptions{})

	// JSON adds the two quotes: the value is 4 MiB - 14 bytes.
	big := strings.Repeat("x", 4<<20-16)
	ids := startWithOrdinary(t, ctx, c, big)
	start := time.Now()
	startWorker()
	ordinary := waitAll(t, ctx, c, ids, start, bound)
	t.Logf("the ordinary flows that completed did within %v of their start", ordinary.Round(time.Millisecond))
	all := waitAll(t, ctx, c, []string{"big-1"}, start, bound)
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("20 ordinary flows completed within %v of their start, the big one within %v", ordinary.Round(time.Millisecond), all.Round(time.Millisecond))
	res, err := c.WaitForFlow(ctx, "big-1")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := res.Outputs[0].Value.Decode(&n); err != nil || n != len(big) {
		t.Fatalf("big-1 output = %d (%v), want %d", n, err, len(big))
	}
}

// A task larger than the worker accepts (a worker with MaxTaskBytes of
// 1 MiB, a 2 MiB input) is not sent: each attempt fails with error type
// TaskTooLarge naming the task's size and the limit, the step's retry
// policy applies (2 attempts, then the flow fails with WORKER_API_FAIL),
// and the stream and the 20 ordinary flows started with it are
// unaffected.
//
// Covers: E9, E28, W3
func TestLimits_TaskLargerThanTheWorkerAcceptsFailsItsAttempt(t *testing.T) {
	const bound = 10 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, startWorker := limitsServer(t, ctx, dex.WorkerOptions{MaxTaskBytes: 1 << 20})

	ids := startWithOrdinary(t, ctx, c, strings.Repeat("x", 2<<20))
	start := time.Now()
	startWorker()
	ordinary := waitAll(t, ctx, c, ids, start, bound)
	t.Logf("20 ordinary flows completed within %v of their start", ordinary.Round(time.Millisecond))

	wctx, wcancel := context.WithTimeout(ctx, bound)
	defer wcancel()
	res, err := c.WaitForFlow(wctx, "big-1")
	if err != nil {
		t.Fatalf("big-1 did not end: %v", err)
	}
	if res.Status != dex.StatusFailed || res.Error == nil || res.Error.LastAttempt == nil {
		t.Fatalf("big-1 ended %v (%v), want FAILED with its last attempt", res.Status, res.Error)
	}
	la := res.Error.LastAttempt
	if la.Type != "TaskTooLarge" || la.Attempt != 2 || !strings.Contains(la.Message, fmt.Sprintf("more than the %d bytes", 1<<20)) ||
		!strings.Contains(la.Message, "is 2097") {
		t.Fatalf("big-1's last attempt = #%d %s: %s; want #2 TaskTooLarge naming the task's size and the 1 MiB limit", la.Attempt, la.Type, la.Message)
	}
	t.Logf("big-1: %s", la.Message)
}
