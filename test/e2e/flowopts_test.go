package e2e

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// The flow-level options flow (E34): Begin fails its flow while
// failRuns says so (for the retry test), otherwise it completes with the
// time it ran, or moves to Stall (for the timeout handler test), which
// waits for a timer far beyond the flow timeout; OnTimeout is the timeout
// handler.
type (
	Begin     struct{ dex.Step[string] }
	Stall     struct{ dex.Step[string] }
	OnTimeout struct{ dex.Step[string] }
)

var flowOptsState struct {
	mu    sync.Mutex
	fails map[string]int // flow input -> runs left to fail
	ran   map[string][]time.Time
}

func (Begin) Execute(_ dex.Context, in string) (dex.Decision, error) {
	flowOptsState.mu.Lock()
	defer flowOptsState.mu.Unlock()
	flowOptsState.ran[in] = append(flowOptsState.ran[in], time.Now())
	if flowOptsState.fails[in] > 0 {
		flowOptsState.fails[in]--
		return dex.ForceFail("not yet"), nil
	}
	if in == "stall" {
		return dex.Move(dex.To[Stall](in)), nil
	}
	return dex.GracefulComplete(in), nil
}

func (Stall) WaitFor(_ dex.Context, _ string) (dex.Wait, error) {
	return dex.Until(dex.Timer(time.Hour)), nil
}

func (Stall) Execute(_ dex.Context, in string, _ dex.Results) (dex.Decision, error) {
	return dex.GracefulComplete("stalled"), nil
}

func (OnTimeout) Execute(_ dex.Context, in string) (dex.Decision, error) {
	return dex.ForceComplete("handled"), nil
}

var flowOptsFlow = dex.NewFlow("flowopts").Start(Begin{}).Steps(Stall{}, OnTimeout{})

func flowOptsWorkerAndClient(t *testing.T, ctx context.Context, addr string) *dex.Client {
	t.Helper()
	flowOptsState.mu.Lock()
	flowOptsState.fails, flowOptsState.ran = map[string]int{}, map[string][]time.Time{}
	flowOptsState.mu.Unlock()
	fast := dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	return testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}, ReconnectBackoff: fast},
		dex.ClientOptions{RetryBackoff: fast}, flowOptsFlow)
}

// startAndWait starts flowOptsFlow and waits for the flow ID's result.
func startAndWait(t *testing.T, ctx context.Context, c *dex.Client, flowID, in string, opts ...dex.StartOption) (dex.Run, *dex.FlowResult) {
	t.Helper()
	run, err := dex.Start[Begin](ctx, c, flowOptsFlow, flowID, in, opts...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	return run, res
}

// A delayed start: the flow is RUNNING at once with its attributes
// readable, the dev server is SIGKILLed during the delay and restarted,
// and the start step still runs once, not before the delay.
//
// Covers: E34
func TestFlowOpts_StartDelaySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--data-dir", dir, "--listen", addr, "--durability", "strict"}
	p1 := testproc.Start(t, args...)
	p1.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := flowOptsWorkerAndClient(t, ctx, addr)

	const delay = 3 * time.Second
	began := time.Now()
	run, err := dex.Start[Begin](ctx, c, flowOptsFlow, "delayed-1", "delayed", dex.WithStartDelay(delay))
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.GetFlowState(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Summary.Status != dex.StatusRunning || len(st.Steps) != 1 {
		t.Fatalf("during the delay: status %v, %d steps; want RUNNING with the pending start step", st.Summary.Status, len(st.Steps))
	}
	p1.Signal(t, syscall.SIGKILL)
	p1.Wait(t, 10*time.Second)
	p2 := testproc.Start(t, args...)
	p2.Serving(t, 30*time.Second)

	res, err := c.WaitForFlow(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dex.StatusCompleted {
		t.Fatalf("status %v, error %v; want COMPLETED", res.Status, res.Err())
	}
	flowOptsState.mu.Lock()
	ran := flowOptsState.ran["delayed"]
	flowOptsState.mu.Unlock()
	if len(ran) != 1 {
		t.Fatalf("the start step ran %d times, want once", len(ran))
	}
	if got := ran[0].Sub(began); got < delay {
		t.Fatalf("the start step ran %v after the start, before its %v delay", got, delay)
	}
}

// A flow that fails twice is retried under its flow retry policy: the
// retries are new runs of the same flow ID with the same input, each
// FLOW_STARTED names the failed run, and WaitForFlow on the flow ID
// follows them to the run that completes. A flow that keeps failing stops
// at the policy's maximum attempts.
//
// Covers: E34
func TestFlowOpts_RetryFollowsToTheLastRun(t *testing.T) {
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	p.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := flowOptsWorkerAndClient(t, ctx, addr)
	flowOptsState.mu.Lock()
	flowOptsState.fails["twice"], flowOptsState.fails["always"] = 2, 100
	flowOptsState.mu.Unlock()
	policy := dex.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 3}

	run, res := startAndWait(t, ctx, c, "retry-1", "twice", dex.WithFlowRetry(policy))
	if res.Status != dex.StatusCompleted || res.RunID != run.RunID+".retry-3" {
		t.Fatalf("WaitForFlow: run %s %v (%v); want run %s.retry-3 COMPLETED", res.RunID, res.Status, res.Err(), run.RunID)
	}
	first, err := c.GetFlowState(ctx, run.FlowID, dex.WithRunID(run.RunID))
	if err != nil {
		t.Fatal(err)
	}
	if first.Summary.Status != dex.StatusFailed || first.RetryRunID != run.RunID+".retry-2" {
		t.Fatalf("first run: %v, retried by %q", first.Summary.Status, first.RetryRunID)
	}
	h, err := c.GetFlowHistory(ctx, run.FlowID, dex.HistoryQuery{}, dex.WithRunID(res.RunID))
	if err != nil {
		t.Fatal(err)
	}
	if ev := h.Events[0]; ev.Kind != dex.EventFlowStarted || ev.RetryAttempt != 3 || ev.RetriedRunID != run.RunID+".retry-2" || ev.StartDelay <= 0 {
		t.Fatalf("last run's first event: %+v; want FLOW_STARTED attempt 3 retrying %s.retry-2 after a backoff", ev, run.RunID)
	}

	run, res = startAndWait(t, ctx, c, "retry-2", "always", dex.WithFlowRetry(policy))
	if res.Status != dex.StatusFailed || res.RunID != run.RunID+".retry-3" {
		t.Fatalf("a flow that keeps failing: run %s %v; want run %s.retry-3 FAILED", res.RunID, res.Status, run.RunID)
	}
	flowOptsState.mu.Lock()
	n := len(flowOptsState.ran["always"])
	flowOptsState.mu.Unlock()
	if n != 3 {
		t.Fatalf("the failing flow ran %d times, want 3 (maximum attempts)", n)
	}
}

// The HANDLER flow timeout: the stalled step ends and the handler step
// decides how the flow closes.
//
// Covers: E34
func TestFlowOpts_TimeoutHandlerClosesTheFlow(t *testing.T) {
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	p.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := flowOptsWorkerAndClient(t, ctx, addr)

	_, res := startAndWait(t, ctx, c, "timeout-1", "stall",
		dex.WithTimeoutHandler(time.Second, dex.Ref[OnTimeout](), 10*time.Second))
	out, err := dex.Output[string](res)
	if res.Status != dex.StatusCompleted || err != nil || out != "handled" {
		t.Fatalf("status %v (%v), output %q (%v); want COMPLETED by the handler with \"handled\"", res.Status, res.Err(), out, err)
	}
	if _, err := dex.Start[Begin](ctx, c, flowOptsFlow, "timeout-2", "stall",
		dex.WithTimeoutHandler(time.Second, dex.Ref[First](), 0)); err == nil {
		t.Fatal("a timeout handler that is not a step of the flow was accepted")
	}
}
