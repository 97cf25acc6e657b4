package ha

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
)

// The lock-hold flow: its start step locks the counter; attempt 1 holds
// the lock until its context ends (it never finishes on the active that
// dies), a later attempt adds one. Input 0 skips the step (RPCs drive the
// flow). RPC "lockhold" locks the counter and blocks until the test lets
// it go; RPC "lockbump" adds one under the lock.
var lhCount = dex.DefineAttribute[int]("count")

var (
	lhRelease    atomic.Pointer[chan struct{}] // closed to let "lockhold" return
	lhRPCHolding = make(chan struct{}, 1)
	lhStepRuns   sync.Map // flow ID -> true while attempt 1 holds the lock
)

var lhHold = dex.DefineRPC("lockhold", func(ctx dex.Context, _ struct{}) (int, error) {
	lhRPCHolding <- struct{}{}
	<-*lhRelease.Load()
	lhCount.Set(ctx, 1000) // must never commit: the call's locks went with the takeover
	return 0, nil
})

var lhBump = dex.DefineRPC("lockbump", func(ctx dex.Context, _ struct{}) (int, error) {
	n, err := lhCount.Get(ctx)
	if err != nil {
		return 0, err
	}
	lhCount.Set(ctx, n+1)
	return n + 1, nil
})

type LockHold struct{ dex.Step[int] }

func (LockHold) Options() dex.StepOptions {
	return dex.StepOptions{Execute: dex.MethodOptions{Locks: []dex.AttributeDef{lhCount},
		Retry: &dex.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 5}}}
}

func (LockHold) Execute(ctx dex.Context, in int) (dex.Decision, error) {
	if in == 0 {
		return dex.DeadEnd(), nil
	}
	if ctx.Info().Attempt == 1 {
		lhStepRuns.Store(ctx.Info().FlowID, true)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	n, err := lhCount.Get(ctx)
	if err != nil {
		return nil, err
	}
	lhCount.Set(ctx, n+1)
	return dex.GracefulComplete(n + 1), nil
}

var lockHoldFlow = dex.NewFlow("lockhold").Start(LockHold{}).Attributes(lhCount).RPCs(lhHold, lhBump)

// The active is SIGKILLed while a step attempt and an RPC hold attribute
// locks and long polls wait on the flows. The hot standby takes over and
// does not inherit the locks: their holders were handed out by the dead
// epoch and can never commit, so the takeover releases them (the step's
// attempt fails NOT_COMPLETED and its retry takes the lock; a locked RPC
// gets through at once; the old RPC's late result is refused). The long
// polls, repeated by the SDK, answer on the new active.
//
// Covers: E30, E35, T2
func TestHotStandby_LocksAndLongPollsSurviveSIGKILL(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { locksFailover(t, backend) })
	}
}

func locksFailover(t *testing.T, backend string) {
	a, b, pa, pb := startPairMode(t, storage(t, backend), leaseDuration, true)
	addrs := []string{a.addr, b.addr}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	runWorker(t, ctx, addrs, 16, lockHoldFlow)
	c := dialClient(t, ctx, addrs)
	stepFlow, rpcFlow := backend+"-lh-step", backend+"-lh-rpc"
	release := make(chan struct{})
	lhRelease.Store(&release)
	if _, err := c.StartFlow(ctx, lockHoldFlow, stepFlow, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartFlow(ctx, lockHoldFlow, rpcFlow, 0); err != nil {
		t.Fatal(err)
	}
	waitStored(t, &lhStepRuns, []string{stepFlow}, 10*time.Second)
	// The RPC flow's start step locks the counter too: wait until it ended.
	if n, err := c.WaitForStepCompletion(ctx, rpcFlow, dex.Ref[LockHold](), 1); err != nil || n != 1 {
		t.Fatalf("WaitForStepCompletion(%s) = %d, %v", rpcFlow, n, err)
	}
	held := make(chan error, 1)
	go func() {
		_, err := dex.InvokeRPC(ctx, c, rpcFlow, lhHold, struct{}{}, dex.WithLocks(lhCount))
		held <- err
	}()
	select {
	case <-lhRPCHolding:
	case err := <-held:
		t.Fatalf("the locked RPC ended before the kill: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the locked RPC did not start within 10 s")
	}
	// Both locks are held on the active.
	if _, err := dex.InvokeRPC(ctx, c, rpcFlow, lhBump, struct{}{}, dex.WithLocks(lhCount)); !errors.Is(err, dex.ErrLockHeld) {
		t.Fatalf("locked RPC while another holds the lock = %v, want ErrLockHeld", err)
	}
	if _, err := dex.InvokeRPC(ctx, c, stepFlow, lhBump, struct{}{}, dex.WithLocks(lhCount)); !errors.Is(err, dex.ErrLockHeld) {
		t.Fatalf("locked RPC while a step holds the lock = %v, want ErrLockHeld", err)
	}
	type polled struct {
		what string
		n    int
		err  error
	}
	polls := make(chan polled, 2)
	go func() {
		n, err := c.WaitForStepCompletion(ctx, stepFlow, dex.Ref[LockHold](), 1)
		polls <- polled{"WaitForStepCompletion", n, err}
	}()
	go func() {
		v, err := dex.WaitForAttribute(ctx, c, stepFlow, lhCount, dex.Equals(1))
		polls <- polled{"WaitForAttribute", v, err}
	}()
	time.Sleep(200 * time.Millisecond) // the polls wait on the active

	pa.Signal(t, syscall.SIGKILL)
	pa.Wait(t, 10*time.Second)
	pb.Serving(t, 30*time.Second)

	// The RPC lock was not inherited: a locked RPC gets through at once.
	if n, err := dex.InvokeRPC(ctx, c, rpcFlow, lhBump, struct{}{}, dex.WithLocks(lhCount)); err != nil || n != 1 {
		t.Fatalf("locked RPC after the takeover = %d, %v; want 1 (the dead epoch's lock released)", n, err)
	}
	// The step's lock was not either: its retry took it and completed.
	for range 2 {
		p := <-polls
		if p.err != nil || p.n != 1 {
			t.Fatalf("%s across the failover = %d, %v; want 1", p.what, p.n, p.err)
		}
	}
	res, err := c.WaitForFlow(ctx, stepFlow)
	if err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("%s = %+v, %v; want COMPLETED", stepFlow, res, err)
	}
	// The old RPC's caller got an error; its handler's late result is
	// refused and writes nothing.
	if err := <-held; err == nil {
		t.Fatal("the RPC that held the lock at the kill succeeded")
	}
	close(release)
	time.Sleep(300 * time.Millisecond)
	if n, err := dex.GetAttribute(ctx, c, rpcFlow, lhCount); err != nil || n != 1 {
		t.Fatalf("%s count = %d, %v; want 1 (the dead epoch's RPC must not commit)", rpcFlow, n, err)
	}
}
