package e2e

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// The declined flow: Charge always fails; it has two attempts at most,
// then its recovery step Refund completes the flow.
type (
	Charge struct{ dex.Step[int] }
	Refund struct{ dex.Step[int] }
)

var chargeAttempts atomic.Int64

func (Charge) Execute(dex.Context, int) (dex.Decision, error) {
	chargeAttempts.Add(1)
	return nil, errors.New("card declined")
}

func (Charge) Options() dex.StepOptions {
	return dex.StepOptions{
		Execute:  dex.MethodOptions{Retry: &dex.RetryPolicy{InitialInterval: 50 * time.Millisecond, MaximumAttempts: 2}},
		Recovery: dex.Ref[Refund](),
	}
}

func (Refund) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.GracefulComplete(-n), nil
}

var declinedFlow = dex.NewFlow("declined").Start(Charge{}).Steps(Refund{})

// A worker declared its flow type to a dev server, which is then killed
// and restarted: the declaration lived in that process's memory. A flow
// started before the worker reconnects gets the step's declared options
// once it does: two attempts, then the recovery step, not unlimited
// retries.
//
// Covers: W5, E9, E12, E13
func TestDevRestart_FlowStartedBeforeTheDeclarationFollowsIt(t *testing.T) {
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--data-dir", dir, "--listen", addr}
	p1 := testproc.Start(t, args...)
	p1.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	newWorker := func() (stop func()) {
		w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{addr}, Logger: quietLogger()}, declinedFlow)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		return func() { cancel(); <-done }
	}
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// The worker declares the type to the first process, which dies.
	stop := newWorker()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p1.Log(), "worker connected"); {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not connect within 10 s:\n%s", p1.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.StartFlow(ctx, declinedFlow, "declined-1", 7); err != nil {
		t.Fatal(err)
	}
	if res, err := c.WaitForFlow(ctx, "declined-1"); err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("declined-1 = %+v, %v; want COMPLETED by the recovery step", res, err)
	}
	stop()
	p1.Signal(t, syscall.SIGKILL)
	p1.Wait(t, 10*time.Second)
	p2 := testproc.Start(t, args...)
	p2.Serving(t, 30*time.Second)

	// No worker is connected: the restarted process knows no declaration.
	if _, err := c.StartFlow(ctx, declinedFlow, "declined-2", 8); err != nil {
		t.Fatal(err)
	}
	chargeAttempts.Store(0)
	stop = newWorker()
	defer stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if n := chargeAttempts.Load(); n > 2 {
			t.Fatalf("Charge ran %d attempts; the worker declared 2 at most, then the recovery step", n)
		}
		sum, err := c.GetFlowSummary(ctx, "declined-2")
		if err == nil && sum.Status != dex.StatusRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("declined-2 still running after 20 s (%d Charge attempts): %+v, %v", chargeAttempts.Load(), sum, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res, err := c.WaitForFlow(ctx, "declined-2")
	if err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("declined-2 = %+v, %v; want COMPLETED by the recovery step", res, err)
	}
	if out, err := dex.Output[int](res); err != nil || out != -8 {
		t.Fatalf("declined-2 output = %d (%v), want -8 from Refund", out, err)
	}
	if n := chargeAttempts.Load(); n != 2 {
		t.Fatalf("Charge ran %d attempts, want the declared 2", n)
	}
}
