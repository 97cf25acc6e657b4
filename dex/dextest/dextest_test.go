package dextest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dextest"
	"github.com/dexzd/dexzd/examples/flows"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ctxT bounds a test's calls.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// history returns every event of the flow's latest run.
func history(ctx context.Context, t *testing.T, c *dex.Client, flowID string) []dex.HistoryEvent {
	t.Helper()
	var out []dex.HistoryEvent
	q := dex.HistoryQuery{}
	for {
		p, err := c.GetFlowHistory(ctx, flowID, q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Events...)
		if p.NextPageToken == "" {
			return out
		}
		q.PageToken = p.NextPageToken
	}
}

// executeFailures returns the failed Execute attempts of stepType.
func executeFailures(events []dex.HistoryEvent, stepType string) []dex.HistoryEvent {
	var out []dex.HistoryEvent
	for _, e := range events {
		if e.Kind == dex.EventExecuteFailed && e.StepType == stepType {
			out = append(out, e)
		}
	}
	return out
}

// waiting polls the flow's live state until a step execution waits, and
// returns it.
func waiting(ctx context.Context, t *testing.T, c *dex.Client, flowID string) dex.StepState {
	t.Helper()
	for {
		st, err := c.GetFlowState(ctx, flowID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Steps {
			if s.Phase == dex.PhaseWaiting {
				return s
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("flow %s: no step waits: %v", flowID, st)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// result waits for the flow and decodes its output.
func result[T any](ctx context.Context, t *testing.T, c *dex.Client, flowID string) T {
	t.Helper()
	res, err := c.WaitForFlow(ctx, flowID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dex.StatusCompleted {
		t.Fatalf("flow %s ended %s: %v", flowID, res.Status, res.Err())
	}
	out, err := dex.Output[T](res)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The order flow's charge fails twice with a retry-after and succeeds on
// the third attempt; the order ships.
//
// Covers: E2, E5, E6, E9, E10, E21, E25
func TestOrderFlow_RetriedChargeShips(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, flows.All()...)
	ctx, c := ctxT(t), env.Client()

	if _, err := c.StartFlow(ctx, flows.OrderFlow, "order-1", flows.Order{ID: "1", Cents: 1200, Card: "visa"}); err != nil {
		t.Fatal(err)
	}
	got := result[flows.Receipt](ctx, t, c, "order-1")
	if want := (flows.Receipt{OrderID: "1", Status: "shipped", Cents: 1200, Tracking: "TRK-1"}); got != want {
		t.Errorf("receipt = %+v, want %+v", got, want)
	}
	if s, err := dex.GetAttribute(ctx, c, "order-1", flows.OrderStatus); err != nil || s != "shipped" {
		t.Errorf("status attribute = %q, %v; want shipped", s, err)
	}
	events := history(ctx, t, c, "order-1")
	fails := executeFailures(events, "Charge")
	if len(fails) != 2 {
		t.Fatalf("Charge failed %d times, want 2: %v", len(fails), fails)
	}
	for i, f := range fails {
		if f.Failure.Attempt != i+1 || f.Failure.Message != flows.ErrGatewayBusy.Error() {
			t.Errorf("Charge failure %d = %v", i+1, f)
		}
	}
	var done *dex.HistoryEvent
	for i, e := range events {
		if e.Kind == dex.EventExecuteCompleted && e.StepType == "Charge" {
			done = &events[i]
		}
	}
	if done == nil || done.Attempt != 3 {
		t.Fatalf("Charge completed: %v; want attempt 3", done)
	}
	// E10: attempt 3 is handed out 50 ms (the retry-after) after attempt 2
	// failed, not after the policy's 200 ms (100 ms doubled).
	handoff := done.Time.Add(-done.Duration)
	if gap := handoff.Sub(fails[1].Failure.Time); gap < 45*time.Millisecond || gap >= 200*time.Millisecond {
		t.Errorf("attempt 3 started %v after attempt 2 failed; want about 50ms", gap)
	}
}

// A declined card fails every charge attempt; when the four attempts are
// spent the recovery step cancels the order.
//
// Covers: E9, E12, E13
func TestOrderFlow_DeclinedCardRecoversToCancel(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, flows.OrderFlow)
	ctx, c := ctxT(t), env.Client()

	if _, err := c.StartFlow(ctx, flows.OrderFlow, "order-2", flows.Order{ID: "2", Cents: 500, Card: "declined"}); err != nil {
		t.Fatal(err)
	}
	got := result[flows.Receipt](ctx, t, c, "order-2")
	if want := (flows.Receipt{OrderID: "2", Status: "canceled"}); got != want {
		t.Errorf("receipt = %+v, want %+v", got, want)
	}
	if s, err := dex.GetAttribute(ctx, c, "order-2", flows.OrderStatus); err != nil || s != "canceled" {
		t.Errorf("status attribute = %q, %v; want canceled", s, err)
	}
	fails := executeFailures(history(ctx, t, c, "order-2"), "Charge")
	if len(fails) != 4 {
		t.Fatalf("Charge failed %d times, want 4 (MaximumAttempts)", len(fails))
	}
	if last := fails[3]; last.Failure.Type != "*flows.DeclinedError" {
		t.Errorf("last Charge failure = %v; want a DeclinedError", last)
	}
}

// An approval waits on a channel or a timer: a published vote completes it;
// SkipTimer fires the timeout without waiting a day.
//
// Covers: E4, E15, E16, E18, E19
func TestApprovalFlow(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, flows.ApprovalFlow)
	ctx, c := ctxT(t), env.Client()

	t.Run("approved", func(t *testing.T) {
		t.Parallel()
		if _, err := c.StartFlow(ctx, flows.ApprovalFlow, "req-1", flows.Request{ID: "1", Amount: 10}); err != nil {
			t.Fatal(err)
		}
		waiting(ctx, t, c, "req-1")
		if err := c.Publish(ctx, "req-1", []dex.Message{flows.Approve.Message(flows.Vote{Approved: true, By: "ann"})}); err != nil {
			t.Fatal(err)
		}
		if got, want := result[flows.Verdict](ctx, t, c, "req-1"), (flows.Verdict{RequestID: "1", Outcome: "approved", By: "ann"}); got != want {
			t.Errorf("verdict = %+v, want %+v", got, want)
		}
	})
	t.Run("timed out", func(t *testing.T) {
		t.Parallel()
		if _, err := c.StartFlow(ctx, flows.ApprovalFlow, "req-2", flows.Request{ID: "2", Amount: 20}); err != nil {
			t.Fatal(err)
		}
		step := waiting(ctx, t, c, "req-2")
		if err := c.SkipTimer(ctx, "req-2", step.StepExecutionID, dex.TimerID(flows.ApprovalTimeout.ID())); err != nil {
			t.Fatal(err)
		}
		if got, want := result[flows.Verdict](ctx, t, c, "req-2"), (flows.Verdict{RequestID: "2", Outcome: "timed-out"}); got != want {
			t.Errorf("verdict = %+v, want %+v", got, want)
		}
		// The timer is no longer pending.
		err := c.SkipTimer(ctx, "req-2", step.StepExecutionID, dex.TimerID(flows.ApprovalTimeout.ID()))
		if !errors.Is(err, dex.ErrFailedPrecondition) && !errors.Is(err, dex.ErrNotFound) {
			t.Errorf("second SkipTimer = %v, want FAILED_PRECONDITION or NOT_FOUND", err)
		}
	})
}

// A publish retried with the same request ID after the flow ID moved to a
// new run (its first response lost, the run closed, a new run started)
// queues nothing in the new run: request IDs are deduplicated per flow ID.
//
// Covers: E16, E3
func TestPublishRetriedAfterNewRunLandsOnce(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, flows.ApprovalFlow)
	ctx, c := ctxT(t), env.Client()
	vote := flows.Approve.Message(flows.Vote{Approved: true, By: "ann"})

	if _, err := c.StartFlow(ctx, flows.ApprovalFlow, "req-3", flows.Request{ID: "3", Amount: 30}); err != nil {
		t.Fatal(err)
	}
	waiting(ctx, t, c, "req-3")
	if err := c.Publish(ctx, "req-3", []dex.Message{vote}, dex.WithRequestID("vote-3")); err != nil {
		t.Fatal(err)
	}
	if got := result[flows.Verdict](ctx, t, c, "req-3"); got.Outcome != "approved" {
		t.Fatalf("run 1 verdict = %+v, want approved", got)
	}
	if _, err := c.StartFlow(ctx, flows.ApprovalFlow, "req-3", flows.Request{ID: "3b", Amount: 31}); err != nil {
		t.Fatal(err)
	}
	step := waiting(ctx, t, c, "req-3")
	// The retry of the first publish (its response was lost).
	if err := c.Publish(ctx, "req-3", []dex.Message{vote}, dex.WithRequestID("vote-3")); err != nil {
		t.Fatal(err)
	}
	st, err := c.GetFlowState(ctx, "req-3")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Channels) != 0 {
		t.Fatalf("run 2 queued the retried publish: %v", st.Channels)
	}
	if err := c.SkipTimer(ctx, "req-3", step.StepExecutionID, dex.TimerID(flows.ApprovalTimeout.ID())); err != nil {
		t.Fatal(err)
	}
	if got, want := result[flows.Verdict](ctx, t, c, "req-3"), (flows.Verdict{RequestID: "3b", Outcome: "timed-out"}); got != want {
		t.Errorf("run 2 verdict = %+v, want %+v (the retried vote must not reach it)", got, want)
	}
}

// The counter has no start step: RPCs drive it, their attribute writes
// commit with their outputs, a failing RPC does not fail the flow, and
// "finish" schedules the step that completes it.
//
// Covers: E2, E21, E22
func TestCounterFlow_RPCs(t *testing.T) {
	t.Parallel()
	env := dextest.StartWith(t, []*dex.Flow{flows.CounterFlow}, dextest.WithMaxConcurrentTasks(1))
	ctx, c := ctxT(t), env.Client()

	if _, err := c.StartFlow(ctx, flows.CounterFlow, "counter-1", nil); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ add, want int }{{5, 5}, {3, 8}} {
		if got, err := dex.InvokeRPC(ctx, c, "counter-1", flows.Add, tt.add); err != nil || got != tt.want {
			t.Fatalf("add %d = %d, %v; want %d", tt.add, got, err, tt.want)
		}
	}
	_, err := dex.InvokeRPC(ctx, c, "counter-1", flows.Add, -1)
	var we *dex.WorkerError
	if !errors.Is(err, dex.ErrFailedPrecondition) || !errors.As(err, &we) || we.Message != "a counter only grows" {
		t.Fatalf("add -1 = %v; want the handler's error", err)
	}
	if got, err := dex.InvokeRPC(ctx, c, "counter-1", flows.Get, struct{}{}); err != nil || got != 8 {
		t.Fatalf("get = %d, %v; want 8", got, err)
	}
	if n, err := dex.GetAttribute(ctx, c, "counter-1", flows.Count); err != nil || n != 8 {
		t.Fatalf("count attribute = %d, %v; want 8", n, err)
	}
	if got, err := dex.InvokeRPC(ctx, c, "counter-1", flows.Finish, struct{}{}); err != nil || got != 8 {
		t.Fatalf("finish = %d, %v; want 8", got, err)
	}
	if got := result[int](ctx, t, c, "counter-1"); got != 8 {
		t.Errorf("output = %d, want 8", got)
	}
}

// A crash in the middle of flows loses nothing acknowledged: a waiting
// approval, a counter's attribute and a WaitForFlow that spans the restart
// all carry on on the new server.
//
// Covers: D3, T1, E21, E25
func TestRestart_FlowsCompleteAfterACrash(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, flows.All()...)
	ctx, c := ctxT(t), env.Client()
	addr := env.Addr()

	if _, err := c.StartFlow(ctx, flows.ApprovalFlow, "req-r", flows.Request{ID: "r", Amount: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartFlow(ctx, flows.CounterFlow, "counter-r", nil); err != nil {
		t.Fatal(err)
	}
	if n, err := dex.InvokeRPC(ctx, c, "counter-r", flows.Add, 5); err != nil || n != 5 {
		t.Fatalf("add 5 = %d, %v", n, err)
	}
	waiting(ctx, t, c, "req-r")
	// A long poll in flight when the server crashes is retried on the new
	// one.
	verdict := make(chan flows.Verdict, 1)
	go func() {
		res, err := c.WaitForFlow(ctx, "req-r")
		if err != nil {
			t.Error(err)
			close(verdict)
			return
		}
		v, err := dex.Output[flows.Verdict](res)
		if err != nil {
			t.Error(err)
		}
		verdict <- v
	}()

	env.Restart()
	if env.Addr() != addr {
		t.Errorf("address after Restart = %s, want %s", env.Addr(), addr)
	}
	if err := c.Publish(ctx, "req-r", []dex.Message{flows.Approve.Message(flows.Vote{Approved: true, By: "bob"})}); err != nil {
		t.Fatal(err)
	}
	if got, want := <-verdict, (flows.Verdict{RequestID: "r", Outcome: "approved", By: "bob"}); got != want {
		t.Errorf("verdict = %+v, want %+v", got, want)
	}
	if n, err := dex.InvokeRPC(ctx, c, "counter-r", flows.Add, 3); err != nil || n != 8 {
		t.Fatalf("add 3 after the restart = %d, %v; want 8", n, err)
	}
}

// Hold's first attempt blocks until released; later attempts complete.
// Its Execute is SYNC, so a crash fails a running attempt (T2); an ASYNC
// start may not be durable yet when the server crashes, and then the
// attempt runs again with the same number (T3).
type Hold struct {
	dex.Step[string]
	started chan<- int
	release <-chan struct{}
}

func (Hold) Options() dex.StepOptions {
	return dex.StepOptions{Execute: dex.MethodOptions{Retry: &dex.RetryPolicy{InitialInterval: 20 * time.Millisecond},
		Durability: dex.DurabilitySync}}
}

func (h Hold) Execute(ctx dex.Context, in string) (dex.Decision, error) {
	attempt := ctx.Info().Attempt
	h.started <- attempt
	if attempt == 1 {
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
	return dex.GracefulComplete(fmt.Sprintf("%s on attempt %d", in, attempt)), nil
}

// An attempt running on the worker when the server crashes fails with
// NOT_COMPLETED and runs again; its late result is refused.
//
// Covers: T2, W2
func TestRestart_RunningAttemptRunsAgain(t *testing.T) {
	t.Parallel()
	started, release := make(chan int, 4), make(chan struct{})
	hold := dex.NewFlow("hold").Start(Hold{started: started, release: release})
	env := dextest.Start(t, hold)
	ctx, c := ctxT(t), env.Client()

	// SYNC also when the flow starts before the worker has declared Hold's
	// options: the run then takes the server defaults (ASYNC).
	sync := dex.WithStartStepOptions(dex.StepOptions{Execute: dex.MethodOptions{Durability: dex.DurabilitySync}})
	if _, err := c.StartFlow(ctx, hold, "hold-1", "x", sync); err != nil {
		t.Fatal(err)
	}
	if a := <-started; a != 1 {
		t.Fatalf("first attempt = %d", a)
	}
	env.Restart()
	close(release) // attempt 1 answers now, to a server that did not hand it out
	if a := <-started; a != 2 {
		t.Fatalf("attempt after the restart = %d, want 2", a)
	}
	if got := result[string](ctx, t, c, "hold-1"); got != "x on attempt 2" {
		t.Errorf("output = %q", got)
	}
	fails := executeFailures(history(ctx, t, c, "hold-1"), "Hold")
	if len(fails) != 1 || fails[0].Failure.Kind != dex.FailureNotCompleted {
		t.Errorf("Hold failures = %v; want attempt 1 NOT_COMPLETED", fails)
	}
}

// An invalid flow definition stops New (and Start) with an error naming
// the flow and the step.
func TestNew_InvalidFlowIsReported(t *testing.T) {
	t.Parallel()
	broken := dex.NewFlow("broken").Start(flows.Charge{}) // its recovery step, Cancel, is not declared
	_, err := dextest.New(ctxT(t), []*dex.Flow{broken})
	if !errors.Is(err, dex.ErrInvalidFlow) || !strings.Contains(err.Error(), "broken") || !strings.Contains(err.Error(), "Charge") {
		t.Fatalf("New with an invalid flow = %v; want ErrInvalidFlow naming the flow and the step", err)
	}
}
