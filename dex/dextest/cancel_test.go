package dextest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dextest"
)

// blocked records, per flow ID, that a handler blocked on its context has
// started and why its context ended.
type blocked struct {
	mu      sync.Mutex
	started map[string]chan struct{}
	ended   map[string]chan error
}

var blockers = &blocked{started: map[string]chan struct{}{}, ended: map[string]chan error{}}

// watch registers flowID; the returned channels report the handler.
func (b *blocked) watch(flowID string) (started <-chan struct{}, ended <-chan error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, e := make(chan struct{}), make(chan error, 1)
	b.started[flowID], b.ended[flowID] = s, e
	return s, e
}

// block runs a handler that waits for its context and reports its cause.
func (b *blocked) block(ctx dex.Context) error {
	id := ctx.Info().FlowID
	b.mu.Lock()
	s, e := b.started[id], b.ended[id]
	b.mu.Unlock()
	if s != nil {
		close(s)
	}
	<-ctx.Done()
	if e != nil {
		e <- context.Cause(ctx)
	}
	return context.Cause(ctx)
}

// Lagging blocks until the server cancels it; its attempt timeout is far
// beyond the tests' bounds, so only a cancellation ends it in time.
type Lagging struct{ dex.Step[string] }

func (Lagging) Options() dex.StepOptions {
	return dex.StepOptions{Execute: dex.MethodOptions{AttemptTimeout: 5 * time.Minute}}
}

func (Lagging) Execute(ctx dex.Context, _ string) (dex.Decision, error) {
	return nil, blockers.block(ctx)
}

// Winning waits until Lagging runs, then completes and cancels it as its
// sibling.
type Winning struct{ dex.Step[string] }

func (Winning) Execute(ctx dex.Context, _ string) (dex.Decision, error) {
	blockers.mu.Lock()
	s := blockers.started[ctx.Info().FlowID]
	blockers.mu.Unlock()
	select {
	case <-s:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return dex.AndCancel(dex.GracefulComplete("won"), dex.CancelSiblingSteps(dex.Ref[Lagging]())), nil
}

// Racing forks into Winning and Lagging.
type Racing struct{ dex.Step[string] }

func (Racing) Execute(_ dex.Context, in string) (dex.Decision, error) {
	return dex.Move(dex.To[Winning](in), dex.To[Lagging](in)), nil
}

var raceFlow = dex.NewFlow("race").Start(Racing{}).Steps(Winning{}, Lagging{})

// waitCause waits for a blocked handler's context to end and checks that
// the server cancelled it.
func waitCause(t *testing.T, ended <-chan error, within time.Duration) {
	t.Helper()
	select {
	case cause := <-ended:
		if !errors.Is(cause, dex.ErrTaskCanceled) {
			t.Fatalf("the handler's context ended with %v, want dex.ErrTaskCanceled", cause)
		}
	case <-time.After(within):
		t.Fatalf("the handler's context did not end within %v", within)
	}
}

// A race: the winner cancels its sibling, which is blocked on its context.
// The sibling's handler sees the cancellation at once (not after its 5 min
// attempt timeout), its result is discarded, history names the winner, and
// the flow completes with the winner's output as the cancelled branch was
// the last one.
//
// Covers: E29, E38
func TestCancelSiblingSteps_EndsTheLoser(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, raceFlow)
	ctx, c := ctxT(t), env.Client()
	_, ended := blockers.watch("race-1")
	start := time.Now()
	if _, err := c.StartFlow(ctx, raceFlow, "race-1", "go"); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, "race-1")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := dex.Output[string](res); res.Status != dex.StatusCompleted || err != nil || out != "won" {
		t.Fatalf("result %+v, output %q (%v); want COMPLETED with \"won\"", res, out, err)
	}
	waitCause(t, ended, 10*time.Second)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the race took %v", d)
	}
	var canceled []dex.HistoryEvent
	for _, e := range history(ctx, t, c, "race-1") {
		if e.Kind == dex.EventStepCanceled {
			canceled = append(canceled, e)
		}
		if e.Kind == dex.EventExecuteCompleted && e.StepType == "Lagging" {
			t.Fatalf("the cancelled step completed: %v", e)
		}
	}
	if len(canceled) != 1 || canceled[0].StepExecutionID != "Lagging-1" || canceled[0].CanceledBy != "Winning-1" ||
		!canceled[0].SiblingsOnly {
		t.Fatalf("StepCanceled events %v; want Lagging-1 as a sibling, by Winning-1", canceled)
	}
}

// Done completes the flow.
type Done struct{ dex.Step[string] }

func (Done) Execute(_ dex.Context, in string) (dex.Decision, error) {
	return dex.GracefulComplete(in), nil
}

var (
	holdRPC = dex.DefineRPC("hold", func(ctx dex.Context, in string) (string, error) {
		dex.Schedule(ctx, dex.To[Lagging](in))
		return "holding", nil
	})
	// releaseRPC cancels Lagging flow-wide and moves on to Done.
	releaseRPC = dex.DefineRPC("release", func(ctx dex.Context, in string) (string, error) {
		dex.ScheduleCancel(ctx, dex.CancelSteps(dex.Ref[Lagging]()))
		dex.Schedule(ctx, dex.To[Done](in))
		return "released", nil
	})
	// siblingRPC tries to cancel siblings, which an RPC has none of.
	siblingRPC = dex.DefineRPC("sibling", func(ctx dex.Context, _ string) (string, error) {
		dex.ScheduleCancel(ctx, dex.CancelSiblingSteps(dex.Ref[Lagging]()))
		return "", nil
	})
	holdFlow = dex.NewFlow("hold").Steps(Lagging{}, Done{}).RPCs(holdRPC, releaseRPC, siblingRPC)
)

// An RPC cancels a running step flow-wide and moves on in the same commit;
// the running handler's context ends with dex.ErrTaskCanceled. An RPC
// cannot cancel siblings: the call fails and commits nothing.
//
// Covers: E29, E38, E22
func TestRPC_CancelSteps(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, holdFlow)
	ctx, c := ctxT(t), env.Client()
	started, ended := blockers.watch("hold-1")
	if _, err := c.StartFlow(ctx, holdFlow, "hold-1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := dex.InvokeRPC(ctx, c, "hold-1", holdRPC, "x"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("Lagging did not start")
	}
	if _, err := dex.InvokeRPC(ctx, c, "hold-1", siblingRPC, ""); err == nil {
		t.Fatal("an RPC cancelled siblings")
	}
	if out, err := dex.InvokeRPC(ctx, c, "hold-1", releaseRPC, "done"); err != nil || out != "released" {
		t.Fatalf("release = %q, %v", out, err)
	}
	waitCause(t, ended, 10*time.Second)
	res, err := c.WaitForFlow(ctx, "hold-1")
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := dex.Output[string](res); res.Status != dex.StatusCompleted || out != "done" {
		t.Fatalf("result %+v, output %q; want COMPLETED with \"done\"", res, out)
	}
	found := false
	for _, e := range history(ctx, t, c, "hold-1") {
		if e.Kind == dex.EventStepCanceled && e.StepExecutionID == "Lagging-1" && e.CanceledBy == "rpc:release" && !e.SiblingsOnly {
			found = true
		}
	}
	if !found {
		t.Fatal("no StepCanceled event for Lagging-1 by rpc:release")
	}
}

// StopFlow reaches a running handler: its context ends with
// dex.ErrTaskCanceled within moments, not at its attempt timeout.
//
// Covers: E38, E23
func TestStopFlow_EndsRunningHandler(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, holdFlow)
	ctx, c := ctxT(t), env.Client()
	started, ended := blockers.watch("hold-2")
	if _, err := c.StartFlow(ctx, holdFlow, "hold-2", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := dex.InvokeRPC(ctx, c, "hold-2", holdRPC, "x"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("Lagging did not start")
	}
	stop := time.Now()
	if _, err := c.StopFlow(ctx, "hold-2", dex.StopCancel, "operator"); err != nil {
		t.Fatal(err)
	}
	waitCause(t, ended, 10*time.Second)
	t.Logf("the handler's context ended %v after StopFlow was called", time.Since(stop))
}
