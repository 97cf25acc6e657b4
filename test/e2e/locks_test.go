package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// The locked counter: RPC "inc" and step LockedInc each read the counter
// and write it plus one, after a pause that makes every unlocked
// read-modify-write race. Both lock the counter.
var lockedCount = dex.DefineAttribute[int]("count")

var lockedInc = dex.DefineRPC("inc", func(ctx dex.Context, _ struct{}) (int, error) {
	n, err := lockedCount.Get(ctx)
	if err != nil {
		return 0, err
	}
	time.Sleep(2 * time.Millisecond)
	lockedCount.Set(ctx, n+1)
	return n + 1, nil
})

// FanOutInc starts n LockedInc executions at once.
type FanOutInc struct{ dex.Step[int] }

func (FanOutInc) Execute(_ dex.Context, n int) (dex.Decision, error) {
	if n == 0 {
		return dex.DeadEnd(), nil // RPCs drive the flow
	}
	ms := make([]dex.Movement, n)
	for i := range ms {
		ms[i] = dex.To[LockedInc](i)
	}
	return dex.Move(ms...), nil
}

// LockedInc adds one to the counter under its lock.
type LockedInc struct{ dex.Step[int] }

func (LockedInc) Options() dex.StepOptions {
	return dex.StepOptions{Execute: dex.MethodOptions{Locks: []dex.AttributeDef{lockedCount}}}
}

func (LockedInc) Execute(ctx dex.Context, _ int) (dex.Decision, error) {
	n, err := lockedCount.Get(ctx)
	if err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Millisecond)
	lockedCount.Set(ctx, n+1)
	return dex.DeadEnd(), nil
}

var lockedCounterFlow = dex.NewFlow("lockedcounter").Start(FanOutInc{}).Steps(LockedInc{}).
	Attributes(lockedCount).RPCs(lockedInc)

// lockedServer starts a dev server, a worker of lockedCounterFlow and a
// client.
func lockedServer(t *testing.T, ctx context.Context) *dex.Client {
	t.Helper()
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	p.Serving(t, 30*time.Second)
	return testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}, MaxConcurrentTasks: 64}, dex.ClientOptions{}, lockedCounterFlow)
}

// incrementAll sends n concurrent locked "inc" RPCs to flowID, each
// called again after a refusal (ABORTED naming the lock, as the caller
// is meant to), and returns how many succeeded and how many refusals
// there were.
func incrementAll(t *testing.T, ctx context.Context, c *dex.Client, flowID string, n int) (ok, aborted int) {
	t.Helper()
	var okN, abortedN atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := dex.InvokeRPC(ctx, c, flowID, lockedInc, struct{}{}, dex.WithLocks(lockedCount))
				switch {
				case err == nil:
					okN.Add(1)
					return
				case errors.Is(err, dex.ErrLockHeld):
					if !strings.Contains(err.Error(), `lock "count"`) {
						errs <- fmt.Errorf("refusal does not name the lock: %w", err)
						return
					}
					abortedN.Add(1)
					time.Sleep(time.Duration(1+rand.IntN(5)) * time.Millisecond)
				default:
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("InvokeRPC: %v", err)
	}
	return int(okN.Load()), int(abortedN.Load())
}

// 100 concurrent locked "increment" RPCs on one counter end with the
// counter equal to the number of RPCs that succeeded: no update is lost.
// An RPC that finds the lock held fails at once with ABORTED naming it,
// and its caller calls again until it gets through.
// Then 100 more race 10 step executions that lock the counter too (and
// wait for it, going first when due): the counter gains the RPCs that
// succeeded plus the 10 steps. WaitForStepCompletion tells when the 10
// steps are done.
//
// Covers: E30, E35
func TestLocks_ConcurrentIncrementsLoseNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := lockedServer(t, ctx)
	const rpcs, steps = 100, 10
	if _, err := c.StartFlow(ctx, lockedCounterFlow, "counter-1", 0); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	ok, aborted := incrementAll(t, ctx, c, "counter-1", rpcs)
	took := time.Since(t0)
	got, err := dex.GetAttribute(ctx, c, "counter-1", lockedCount)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RPCs only: %d succeeded in %v, %d refused (lock held); counter %d", ok, took, aborted, got)
	if got != ok {
		t.Fatalf("counter = %d, want %d (the RPCs that succeeded): an update was lost", got, ok)
	}
	if ok != rpcs || aborted == 0 {
		t.Fatalf("%d of %d succeeded after %d refusals: want all, and refusals, or the test shows nothing", ok, rpcs, aborted)
	}

	if _, err := c.StartFlow(ctx, lockedCounterFlow, "counter-2", steps); err != nil {
		t.Fatal(err)
	}
	ok, aborted = incrementAll(t, ctx, c, "counter-2", rpcs)
	n, err := c.WaitForStepCompletion(ctx, "counter-2", dex.Ref[LockedInc](), steps)
	if err != nil || n != steps {
		t.Fatalf("WaitForStepCompletion = %d, %v; want %d", n, err, steps)
	}
	got, err = dex.GetAttribute(ctx, c, "counter-2", lockedCount)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RPCs and steps: %d RPCs succeeded, %d refused; counter %d", ok, aborted, got)
	if want := ok + steps; got != want {
		t.Fatalf("counter = %d, want %d (%d RPCs succeeded + %d steps): an update was lost", got, want, ok, steps)
	}
}

// The long polls: WaitForAttribute returns once the attribute exists or
// equals a value; WaitForStepCompletion once enough executions finished;
// both keep polling until the caller's deadline, and refuse a run that
// closed without meeting them.
//
// Covers: E35
func TestLongPolls_AttributeAndStepCompletion(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := lockedServer(t, ctx)
	if _, err := c.StartFlow(ctx, lockedCounterFlow, "polls-1", 0); err != nil {
		t.Fatal(err)
	}
	// Waiting before the value exists: answered when an RPC writes it.
	got := make(chan int, 2)
	go func() {
		v, err := dex.WaitForAttribute(ctx, c, "polls-1", lockedCount, dex.Exists[int]())
		if err != nil {
			t.Errorf("WaitForAttribute exists: %v", err)
		}
		got <- v
	}()
	go func() {
		v, err := dex.WaitForAttribute(ctx, c, "polls-1", lockedCount, dex.Equals(3))
		if err != nil {
			t.Errorf("WaitForAttribute equals 3: %v", err)
		}
		got <- v
	}()
	time.Sleep(100 * time.Millisecond) // both are waiting (a late poll answers the same)
	for i := 1; i <= 3; i++ {
		if _, err := dex.InvokeRPC(ctx, c, "polls-1", lockedInc, struct{}{}); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if v := <-got; v != 1 {
				t.Fatalf("exists answered %d, want 1 (the first value)", v)
			}
		}
	}
	if v := <-got; v != 3 {
		t.Fatalf("equals answered %d, want 3", v)
	}

	// The caller's deadline ends a poll that is not met.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if _, err := dex.WaitForAttribute(short, c, "polls-1", lockedCount, dex.Equals(99)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForAttribute past its deadline = %v, want DeadlineExceeded", err)
	}
	// The start step has finished; no LockedInc ran (0 fanned out).
	if n, err := c.WaitForStepCompletion(ctx, "polls-1", dex.Ref[FanOutInc](), 1); err != nil || n != 1 {
		t.Fatalf("WaitForStepCompletion(FanOutInc) = %d, %v", n, err)
	}
	short2, cancelShort2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort2()
	if _, err := c.WaitForStepCompletion(short2, "polls-1", dex.Ref[LockedInc](), 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForStepCompletion past its deadline = %v, want DeadlineExceeded", err)
	}
	// A closed run can no longer meet them.
	if _, err := c.StopFlow(ctx, "polls-1", dex.StopCancel, "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := dex.WaitForAttribute(ctx, c, "polls-1", lockedCount, dex.Equals(99)); !errors.Is(err, dex.ErrFailedPrecondition) {
		t.Fatalf("WaitForAttribute on a closed run = %v, want FAILED_PRECONDITION", err)
	}
	if _, err := c.WaitForStepCompletion(ctx, "polls-1", dex.Ref[LockedInc](), 1); !errors.Is(err, dex.ErrFailedPrecondition) {
		t.Fatalf("WaitForStepCompletion on a closed run = %v, want FAILED_PRECONDITION", err)
	}
}

// dexcli's locked RPC and long polls against a dev server: flow rpc
// --lock takes the lock, flow wait-attribute and flow wait-step print
// what they waited for, and a locked RPC while the lock is held exits 1
// with ABORTED naming it.
//
// Covers: E30, E35
func TestDexcli_LockedRPCAndLongPolls(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	p.Serving(t, 30*time.Second)
	hold := make(chan struct{})
	holding := make(chan struct{}, 1)
	slow := dex.DefineRPC("slow", func(ctx dex.Context, _ struct{}) (int, error) {
		holding <- struct{}{}
		<-hold
		return 0, nil
	})
	flow := dex.NewFlow("clicounter").Start(FanOutInc{}).Steps(LockedInc{}).Attributes(lockedCount).RPCs(lockedInc, slow)
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}}, dex.ClientOptions{}, flow)
	if _, err := c.StartFlow(ctx, flow, "cli-1", 2); err != nil {
		t.Fatal(err)
	}
	dexcli := func(args ...string) (string, int) {
		cmd := exec.CommandContext(ctx, testproc.CLI(t), append([]string{"--server", addr}, args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := dexcli("flow", "wait-step", "cli-1", "LockedInc", "--count", "2", "-o", "json"); code != 0 || !strings.Contains(out, `"finished": 2`) {
		t.Fatalf("flow wait-step = %d:\n%s", code, out)
	}
	if out, code := dexcli("flow", "rpc", "cli-1", "inc", "--lock", "count"); code != 0 || !strings.Contains(out, "3") {
		t.Fatalf("flow rpc --lock = %d:\n%s", code, out)
	}
	if out, code := dexcli("flow", "wait-attribute", "cli-1", "count", "3", "--timeout", "10s"); code != 0 || !strings.Contains(out, "Value      3") {
		t.Fatalf("flow wait-attribute = %d:\n%s", code, out)
	}
	go func() { _, _ = dex.InvokeRPC(ctx, c, "cli-1", slow, struct{}{}, dex.WithLocks(lockedCount)) }()
	<-holding
	out, code := dexcli("flow", "rpc", "cli-1", "inc", "--lock", "count")
	close(hold)
	if code != 1 || !strings.Contains(out, "ABORTED") || !strings.Contains(out, `lock "count"`) {
		t.Fatalf("flow rpc --lock while held = %d:\n%s", code, out)
	}
}

// The lock view: step HoldCount holds the counter's lock until
// viewRelease closes, RPC "holdnote" the note's until viewRPCRelease does
// (first: the step's completion closes the flow, which then refuses the
// RPC's result).
var (
	viewNote       = dex.DefineAttribute[string]("note")
	viewRelease    chan struct{}
	viewRPCRelease chan struct{}
	viewStepHolds  = make(chan struct{}, 1)
	viewRPCHolds   = make(chan struct{}, 1)
)

var viewHoldNote = dex.DefineRPC("holdnote", func(ctx dex.Context, _ struct{}) (int, error) {
	viewRPCHolds <- struct{}{}
	<-viewRPCRelease
	return 0, nil
})

type HoldCount struct{ dex.Step[int] }

func (HoldCount) Options() dex.StepOptions {
	return dex.StepOptions{Execute: dex.MethodOptions{Locks: []dex.AttributeDef{lockedCount}}}
}

func (HoldCount) Execute(ctx dex.Context, _ int) (dex.Decision, error) {
	viewStepHolds <- struct{}{}
	select {
	case <-viewRelease:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return dex.GracefulComplete(0), nil
}

var lockViewFlow = dex.NewFlow("lockview").Start(HoldCount{}).Attributes(lockedCount, viewNote).RPCs(viewHoldNote)

// GetFlowState names who holds each lock: the step execution's running
// attempt and the RPC call, and nothing once they are done.
//
// Covers: E30
func TestLocks_FlowStateNamesTheHolders(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	p.Serving(t, 30*time.Second)
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}}, dex.ClientOptions{}, lockViewFlow)
	viewRelease, viewRPCRelease = make(chan struct{}), make(chan struct{})
	if _, err := dex.Start[HoldCount](ctx, c, lockViewFlow, "lockview-1", 0); err != nil {
		t.Fatal(err)
	}
	rpcDone := make(chan error, 1)
	go func() {
		<-viewStepHolds
		_, err := dex.InvokeRPC(ctx, c, "lockview-1", viewHoldNote, struct{}{}, dex.WithLocks(viewNote))
		rpcDone <- err
	}()
	<-viewRPCHolds     // and the step holds its lock before the RPC is sent
	t.Cleanup(func() { // a failed check must not leave the handlers blocked
		for _, ch := range []chan struct{}{viewRPCRelease, viewRelease} {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	})
	st, err := c.GetFlowState(ctx, "lockview-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.HeldLocks) != 2 {
		t.Fatalf("held locks %+v, want the count's and the note's", st.HeldLocks)
	}
	step, rpc := st.HeldLocks[0], st.HeldLocks[1]
	if step.Attribute != "count" || step.StepExecutionID != "HoldCount-1" || step.Method != dex.KindExecute || step.Attempt != 1 {
		t.Errorf("count's lock: %+v, want HoldCount-1's Execute attempt 1", step)
	}
	if rpc.Attribute != "note" || rpc.RPCName != "holdnote" || rpc.CallID == "" || rpc.StepExecutionID != "" {
		t.Errorf("note's lock: %+v, want the holdnote call", rpc)
	}
	close(viewRPCRelease)
	if err := <-rpcDone; err != nil {
		t.Fatal(err)
	}
	close(viewRelease)
	if _, err := c.WaitForFlow(ctx, "lockview-1"); err != nil {
		t.Fatal(err)
	}
	st, err = c.GetFlowState(ctx, "lockview-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.HeldLocks) != 0 {
		t.Fatalf("held locks after both finished: %+v", st.HeldLocks)
	}
}
