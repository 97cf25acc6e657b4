package e2e

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// The reset flow (E37): Pack writes the Note attribute and moves to Ship;
// Ship waits for Go, then fails its flow while shipBroken says so (the
// "bug"), otherwise completes with the note it reads.
type (
	Pack struct{ dex.Step[string] }
	Ship struct{ dex.Step[string] }
)

var (
	Note       = dex.DefineAttribute[string]("note")
	Go         = dex.DefineChannel[string]("go")
	shipBroken atomic.Bool
	resetFlow  = dex.NewFlow("reset").Start(Pack{}).Steps(Ship{}).Attributes(Note).Channels(Go)
)

func (Pack) Execute(ctx dex.Context, in string) (dex.Decision, error) {
	Note.Set(ctx, "packed "+in)
	return dex.Move(dex.To[Ship](in)), nil
}

func (Ship) WaitFor(_ dex.Context, _ string) (dex.Wait, error) {
	return dex.Until(Go.ForOne()), nil
}

func (Ship) Execute(ctx dex.Context, in string, _ dex.Results) (dex.Decision, error) {
	if shipBroken.Load() {
		return nil, dex.NonRetryable(errors.New("nil carrier: the shipping bug"))
	}
	note, err := Note.Get(ctx)
	if err != nil {
		return nil, err
	}
	return dex.GracefulComplete(note), nil
}

func resetServer(t *testing.T) (context.Context, *dex.Client) {
	t.Helper()
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", dir, "--listen", addr)
	p.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	fast := dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}, ReconnectBackoff: fast},
		dex.ClientOptions{RetryBackoff: fast}, resetFlow)
	return ctx, c
}

// waitWaiting polls until step execution id of the flow's latest run is
// waiting for its condition.
func waitWaiting(t *testing.T, ctx context.Context, c *dex.Client, flowID, id string) {
	t.Helper()
	for {
		st, err := c.GetFlowState(ctx, flowID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Steps {
			if s.StepExecutionID == id && s.Phase == dex.PhaseWaiting {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s of %s never waited: %+v", id, flowID, st.Steps)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A flow fails at Ship because of a bug; the worker is fixed and the run
// is reset to before its first Ship: the new run (same flow ID) runs Ship
// again with the state Pack left, and completes. The failed run is kept
// and links forward, the new one links back; the stale run ID is refused.
//
// Covers: E37
func TestReset_FixedWorkerCompletesFromTheFailedStepType(t *testing.T) {
	ctx, c := resetServer(t)
	shipBroken.Store(true)
	t.Cleanup(func() { shipBroken.Store(false) })
	run, err := dex.Start[Pack](ctx, c, resetFlow, "reset-1", "box")
	if err != nil {
		t.Fatal(err)
	}
	waitWaiting(t, ctx, c, run.FlowID, "Ship-1")
	if err := c.Publish(ctx, run.FlowID, []dex.Message{Go.Message("now")}); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dex.StatusFailed {
		t.Fatalf("with the bug: %v, want FAILED", res.Status)
	}

	shipBroken.Store(false) // the fix
	newRun, err := c.Reset(ctx, run.FlowID, run.RunID, dex.ResetToStepType(dex.Ref[Ship]()),
		dex.WithResetReason("shipping bug fixed"))
	if err != nil {
		t.Fatal(err)
	}
	if newRun == "" || newRun == run.RunID {
		t.Fatalf("new run %q (old %s)", newRun, run.RunID)
	}
	res, err = c.WaitForFlow(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dex.StatusCompleted || res.RunID != newRun {
		t.Fatalf("after the reset: run %s %v (%v), want %s COMPLETED", res.RunID, res.Status, res.Err(), newRun)
	}
	if note, err := dex.Output[string](res); err != nil || note != "packed box" {
		t.Fatalf("output %q, %v; want the note Pack wrote", note, err)
	}

	st, err := c.GetFlowState(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if st.ResetFromRunID != run.RunID {
		t.Errorf("new run's ResetFromRunID %q, want %s", st.ResetFromRunID, run.RunID)
	}
	old, err := c.GetFlowState(ctx, run.FlowID, dex.WithRunID(run.RunID))
	if err != nil {
		t.Fatal(err)
	}
	if old.Summary.Status != dex.StatusFailed || old.ResetRunID != newRun {
		t.Errorf("old run: %v, ResetRunID %q; want FAILED kept, linking to %s", old.Summary.Status, old.ResetRunID, newRun)
	}
	hist, err := c.GetFlowHistory(ctx, run.FlowID, dex.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Events) == 0 || hist.Events[0].ResetFromRunID != run.RunID || hist.Events[0].ResetReason != "shipping bug fixed" {
		t.Errorf("new run's first event %+v, want FlowStarted linking to %s with the reason", hist.Events[0], run.RunID)
	}
	page, err := c.ListFlows(ctx, dex.FlowQuery{FlowType: "reset"})
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]dex.FlowStatus{}
	for _, f := range page.Flows {
		if f.FlowID == run.FlowID {
			runs[f.RunID] = f.Status
		}
	}
	if runs[run.RunID] != dex.StatusFailed || runs[newRun] != dex.StatusCompleted {
		t.Errorf("ListFlows runs of %s: %v, want both", run.FlowID, runs)
	}

	_, err = c.Reset(ctx, run.FlowID, run.RunID, dex.ResetToBeginning())
	if !errors.Is(err, dex.ErrFailedPrecondition) {
		t.Errorf("reset of the stale run: %v, want FAILED_PRECONDITION", err)
	}
	_, err = c.Reset(ctx, run.FlowID, newRun, dex.ResetToStepExecution("Ship-9"))
	if !errors.Is(err, dex.ErrFailedPrecondition) {
		t.Errorf("reset to a step execution the run never had: %v, want FAILED_PRECONDITION", err)
	}
}

// A client attribute write made after the point comes back in the new
// run (with the publish that released Ship); SkipReapply leaves both out.
//
// Covers: E37
func TestReset_ReappliesLaterClientWrites(t *testing.T) {
	ctx, c := resetServer(t)
	run, err := dex.Start[Pack](ctx, c, resetFlow, "reset-2", "crate")
	if err != nil {
		t.Fatal(err)
	}
	waitWaiting(t, ctx, c, run.FlowID, "Ship-1")
	if err := c.SetAttributes(ctx, run.FlowID, Note.Value("from the client")); err != nil {
		t.Fatal(err)
	}
	// A WaitForFlow that waits for the running run follows its reset to
	// the new run, as it follows a flow retry.
	type waited struct {
		res *dex.FlowResult
		err error
	}
	follow := make(chan waited, 1)
	go func() {
		res, err := c.WaitForFlow(ctx, run.FlowID)
		follow <- waited{res, err}
	}()
	time.Sleep(50 * time.Millisecond) // let the long poll reach the server (the test holds either way)
	// The run is still running (Ship waits for Go): the reset closes it.
	skipped, err := c.Reset(ctx, run.FlowID, run.RunID, dex.ResetToStepType(dex.Ref[Ship]()), dex.SkipReapply(),
		dex.WithResetReason("without the writes"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := c.GetFlowState(ctx, run.FlowID, dex.WithRunID(run.RunID))
	if err != nil {
		t.Fatal(err)
	}
	if old.Summary.Status != dex.StatusTerminated || old.ResetRunID != skipped {
		t.Fatalf("the running run after its reset: %v linking to %q, want TERMINATED linking to %s", old.Summary.Status, old.ResetRunID, skipped)
	}
	if got, _ := dex.GetAttribute(ctx, c, run.FlowID, Note); got != "packed crate" {
		t.Fatalf("with SkipReapply the note is %q, want Pack's", got)
	}

	// Now the default: the client's write (made after the point in the
	// first run, re-applied in the second) comes back.
	if err := c.SetAttributes(ctx, run.FlowID, Note.Value("from the client")); err != nil {
		t.Fatal(err)
	}
	waitWaiting(t, ctx, c, run.FlowID, "Ship-1")
	if err := c.Publish(ctx, run.FlowID, []dex.Message{Go.Message("go")}); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, run.FlowID)
	if err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("second run: %v, %v", res, err)
	}
	if w := <-follow; w.err != nil || w.res.RunID != skipped || w.res.Status != dex.StatusCompleted {
		if w.err != nil {
			t.Fatalf("WaitForFlow begun on the reset run: %v", w.err)
		}
		t.Fatalf("WaitForFlow begun on the reset run: %s %v, want %s COMPLETED", w.res.RunID, w.res.Status, skipped)
	}
	reset, err := c.Reset(ctx, run.FlowID, skipped, dex.ResetToStepType(dex.Ref[Ship]()), dex.WithResetReason("replay"))
	if err != nil {
		t.Fatal(err)
	}
	res, err = c.WaitForFlow(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if res.RunID != reset || res.Status != dex.StatusCompleted {
		t.Fatalf("reset run: %s %v, want %s COMPLETED (the publish re-applied)", res.RunID, res.Status, reset)
	}
	if note, _ := dex.Output[string](res); note != "from the client" {
		t.Fatalf("output %q, want the client's re-applied write", note)
	}
}

// A reset is in the log like any change: after a SIGKILL and a restart
// the new run is the latest with its links and its waiting step, and it
// completes.
//
// Covers: E37
func TestReset_SurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--data-dir", dir, "--listen", addr, "--durability", "strict"}
	p1 := testproc.Start(t, args...)
	p1.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	fast := dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}, ReconnectBackoff: fast},
		dex.ClientOptions{RetryBackoff: fast}, resetFlow)

	run, err := dex.Start[Pack](ctx, c, resetFlow, "reset-3", "parcel")
	if err != nil {
		t.Fatal(err)
	}
	waitWaiting(t, ctx, c, run.FlowID, "Ship-1")
	newRun, err := c.Reset(ctx, run.FlowID, run.RunID, dex.ResetToBeginning(), dex.WithResetReason("restart test"))
	if err != nil {
		t.Fatal(err)
	}
	waitWaiting(t, ctx, c, run.FlowID, "Ship-1") // Pack ran again, Ship waits for Go
	p1.Signal(t, syscall.SIGKILL)
	p1.Wait(t, 10*time.Second)
	p2 := testproc.Start(t, args...)
	p2.Serving(t, 30*time.Second)

	st, err := c.GetFlowState(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Summary.RunID != newRun || st.ResetFromRunID != run.RunID {
		t.Fatalf("after the restart: latest run %s reset from %q, want %s reset from %s", st.Summary.RunID, st.ResetFromRunID, newRun, run.RunID)
	}
	old, err := c.GetFlowState(ctx, run.FlowID, dex.WithRunID(run.RunID))
	if err != nil {
		t.Fatal(err)
	}
	if old.Summary.Status != dex.StatusTerminated || old.ResetRunID != newRun {
		t.Fatalf("old run after the restart: %v linking to %q", old.Summary.Status, old.ResetRunID)
	}
	waitWaiting(t, ctx, c, run.FlowID, "Ship-1")
	if err := c.Publish(ctx, run.FlowID, []dex.Message{Go.Message("go")}); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if res.RunID != newRun || res.Status != dex.StatusCompleted {
		t.Fatalf("reset run after the restart: %s %v", res.RunID, res.Status)
	}
}
