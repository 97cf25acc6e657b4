package e2e

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

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// The continue-as-new flow (E37). Kickoff moves to Early (which completes
// gracefully at once: a collected output), Finish (which waits for AllOf a
// "done" message, published by the client at the start, and a "last"
// message) and Tick 1. Tick n waits for a short durable timer, counts
// itself in the "ticks" attribute, checks that its execution ID is
// Tick-<n> (the step counters travel), asks for a continue-as-new at
// canAskAt, and at canTicks publishes "last" and ends its branch.
type (
	Kickoff struct{ dex.Step[int] }
	Early   struct{ dex.Step[string] }
	Tick    struct{ dex.Step[int] }
	Finish  struct{ dex.Step[string] }
)

const (
	canTicks = 25
	canAskAt = 12
)

var (
	canTicksAttr = dex.DefineAttribute[int]("ticks")
	canDone      = dex.DefineChannel[string]("done")
	canLast      = dex.DefineChannel[int]("last")
	canRuns      sync.Map // run IDs Tick saw
)

func (Kickoff) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.Move(dex.To[Early]("early"), dex.To[Finish]("finish"), dex.To[Tick](1)), nil
}

func (Early) Execute(_ dex.Context, in string) (dex.Decision, error) {
	return dex.GracefulComplete(in), nil
}

func (Tick) WaitFor(_ dex.Context, _ int) (dex.Wait, error) {
	return dex.Until(dex.Timer(20 * time.Millisecond)), nil
}

func (Tick) Execute(ctx dex.Context, n int, _ dex.Results) (dex.Decision, error) {
	info := ctx.Info()
	canRuns.Store(info.RunID, true)
	if want := fmt.Sprintf("Tick-%d", n); info.StepExecutionID != want {
		return dex.ForceFail(fmt.Sprintf("execution %s, want %s: the step counter was not carried", info.StepExecutionID, want)), nil
	}
	got, err := canTicksAttr.Get(ctx)
	if err != nil {
		return nil, err
	}
	if got != n-1 {
		return dex.ForceFail(fmt.Sprintf("ticks %d at tick %d: the attribute was not carried", got, n)), nil
	}
	canTicksAttr.Set(ctx, n)
	switch n {
	case canTicks:
		canLast.Publish(ctx, n)
		return dex.DeadEnd(), nil
	case canAskAt:
		return dex.ContinueAsNew(dex.Move(dex.To[Tick](n + 1))), nil
	}
	return dex.Move(dex.To[Tick](n + 1)), nil
}

func (Finish) WaitFor(_ dex.Context, _ string) (dex.Wait, error) {
	return dex.AllOf(canDone.ForOne(), canLast.ForOne()), nil
}

func (Finish) Execute(ctx dex.Context, _ string, res dex.Results) (dex.Decision, error) {
	done, _ := canDone.Received(res)
	last, _ := canLast.Received(res)
	ticks, err := canTicksAttr.Get(ctx)
	if err != nil {
		return nil, err
	}
	return dex.GracefulComplete(fmt.Sprintf("%s/%d/%d", done, last, ticks)), nil
}

var canFlow = dex.NewFlow("continue-as-new").Start(Kickoff{}).Steps(Early{}, Tick{}, Finish{}).
	Attributes(canTicksAttr).Channels(canDone, canLast)

// A long-lived flow on a dev server whose history threshold is 10 events
// (limits.continueAsNewHistoryEvents): it continues as new several times
// by itself and once on a decision's request, each new run carrying the
// waiting Finish step with its half-satisfied AllOf, the unconsumed second
// "done" message, the attribute, Early's output and the step counters;
// WaitForFlow on the flow ID follows to the run that completes, whose
// result holds both outputs. The first run is readable by its run ID,
// CONTINUED_AS_NEW and linked forward; a client's ContinueAsNew needs the
// exact latest run.
//
// Covers: E37
func TestContinueAsNew_LongFlowCarriesStateAndCompletes(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "dex.yaml")
	if err := os.WriteFile(cfg, []byte("limits:\n  continueAsNewHistoryEvents: 10\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--config", cfg, "--data-dir", filepath.Join(dir, "data"), "--listen", addr)
	p.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}}, dex.ClientOptions{}, canFlow)

	run, err := dex.Start[Kickoff](ctx, c, canFlow, "can-1", 0, dex.WithAttributes(canTicksAttr.Value(0)),
		dex.WithFlowTimeout(time.Hour, dex.TimeoutFail))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, run.FlowID, []dex.Message{canDone.Message("d1"), canDone.Message("d2")}); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dex.StatusCompleted {
		t.Fatalf("status %v, error %v; want COMPLETED", res.Status, res.Err())
	}
	var outs []string
	for _, o := range res.Outputs {
		var s string
		if err := o.Value.Decode(&s); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, o.StepExecutionID+"="+s)
	}
	if want := fmt.Sprintf("Early-1=early Finish-1=d1/%d/%d", canTicks, canTicks); strings.Join(outs, " ") != want {
		t.Fatalf("outputs %v, want %s", outs, want)
	}
	n := 0
	if _, err := fmt.Sscanf(strings.TrimPrefix(res.RunID, run.RunID), ".continued-%d", &n); err != nil || n < 4 {
		t.Fatalf("final run %q: want %s.continued-<n> with n >= 4 (the history threshold and one request), got n=%d (%v)", res.RunID, run.RunID, n, err)
	}
	runs := 0
	canRuns.Range(func(_, _ any) bool { runs++; return true })
	if runs < 4 {
		t.Fatalf("Tick ran in %d runs, want at least 4", runs)
	}

	old, err := c.GetFlowState(ctx, run.FlowID, dex.WithRunID(run.RunID))
	if err != nil {
		t.Fatal(err)
	}
	if old.Summary.Status != dex.StatusContinuedAsNew || old.ContinuedRunID != run.RunID+".continued-1" {
		t.Fatalf("first run: status %v, continued as %q; want CONTINUED_AS_NEW and %s.continued-1", old.Summary.Status, old.ContinuedRunID, run.RunID)
	}
	continued := 0
	for f, err := range c.Search(ctx, "FlowId = 'can-1' AND Status = 'CONTINUED_AS_NEW'", 100) {
		if err != nil {
			t.Fatal(err)
		}
		if f.Status != dex.StatusContinuedAsNew {
			t.Fatalf("search found %s %v", f.RunID, f.Status)
		}
		continued++
	}
	if continued != n {
		t.Fatalf("search finds %d CONTINUED_AS_NEW runs, want %d", continued, n)
	}
	last, err := c.GetFlowState(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if last.Summary.RunID != res.RunID {
		t.Fatalf("GetFlowState follows to %s, WaitForFlow answered %s", last.Summary.RunID, res.RunID)
	}
	h, err := c.GetFlowHistory(ctx, run.FlowID, dex.HistoryQuery{}, dex.WithRunID(run.RunID+".continued-1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) == 0 || h.Events[0].Kind != dex.EventFlowStarted || h.Events[0].ContinuedFromRunID != run.RunID {
		t.Fatalf("the second run's history starts with %+v, want FlowStarted continuing %s", h.Events[:min(1, len(h.Events))], run.RunID)
	}
	if len(last.Channels) != 1 || last.Channels[0].Channel != "done" || last.Channels[0].Size != 1 {
		t.Fatalf("queued messages %+v, want the second done message, carried through every run", last.Channels)
	}

	// A client's ContinueAsNew: the exact latest run of a running flow.
	run2, err := dex.Start[Kickoff](ctx, c, canFlow, "can-2", 0, dex.WithAttributes(canTicksAttr.Value(0)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ContinueAsNew(ctx, run2.FlowID, "", "no run"); err == nil {
		t.Fatal("ContinueAsNew without a run ID succeeded")
	}
	newRun, err := c.ContinueAsNew(ctx, run2.FlowID, run2.RunID, "by hand")
	if err != nil {
		t.Fatal(err)
	}
	if newRun != run2.RunID+".continued-1" {
		t.Fatalf("new run %q, want %s.continued-1", newRun, run2.RunID)
	}
	if _, err := c.ContinueAsNew(ctx, run2.FlowID, run2.RunID, "again"); err == nil {
		t.Fatal("ContinueAsNew of a run that is no longer the latest succeeded")
	}
	if err := c.Publish(ctx, run2.FlowID, []dex.Message{canDone.Message("d")}); err != nil {
		t.Fatal(err)
	}
	res2, err := c.WaitForFlow(ctx, run2.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Status != dex.StatusCompleted {
		t.Fatalf("second flow: status %v, error %v; want COMPLETED", res2.Status, res2.Err())
	}
}

// A SIGKILL of the dev server after the flow continued as new: the
// restarted server rebuilds the runs from its log (the switch and its
// carried state are records like any other) and the flow completes with
// the same result.
//
// Covers: E37
func TestContinueAsNew_SurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "dex.yaml")
	if err := os.WriteFile(cfg, []byte("limits:\n  continueAsNewHistoryEvents: 10\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--config", cfg, "--data-dir", filepath.Join(dir, "data"), "--listen", addr, "--durability", "strict"}
	p1 := testproc.Start(t, args...)
	p1.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	fast := dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}, ReconnectBackoff: fast},
		dex.ClientOptions{RetryBackoff: fast}, canFlow)

	run, err := dex.Start[Kickoff](ctx, c, canFlow, "can-kill", 0, dex.WithAttributes(canTicksAttr.Value(0)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, run.FlowID, []dex.Message{canDone.Message("d1")}); err != nil {
		t.Fatal(err)
	}
	for {
		st, err := c.GetFlowState(ctx, run.FlowID)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(st.Summary.RunID, ".continued-") {
			break
		}
		if st.Summary.Status != dex.StatusRunning {
			t.Fatalf("the flow closed %v before it continued as new", st.Summary.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p1.Signal(t, syscall.SIGKILL)
	p1.Wait(t, 10*time.Second)
	p2 := testproc.Start(t, args...)
	p2.Serving(t, 30*time.Second)

	res, err := c.WaitForFlow(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dex.StatusCompleted || !strings.Contains(res.RunID, ".continued-") {
		t.Fatalf("status %v in run %s, error %v; want COMPLETED in a continued run", res.Status, res.RunID, res.Err())
	}
	out, err := dex.Output[string](res)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("d1/%d/%d", canTicks, canTicks); out != want {
		t.Fatalf("output %q, want %q", out, want)
	}
}
