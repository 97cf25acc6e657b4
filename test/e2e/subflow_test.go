package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// The flows of the subflow tests: a child that waits its input's delay and
// doubles its number (or fails), a parent that fans out over children
// with AllOf and sums their outputs, and one that races two children with
// AnyOf and names the winner.

type ChildIn struct {
	N     int
	Delay time.Duration
	Fail  bool
}

type ChildWork struct{ dex.Step[ChildIn] }

func (ChildWork) WaitFor(_ dex.Context, in ChildIn) (dex.Wait, error) {
	return dex.Timer(in.Delay), nil
}

func (ChildWork) Execute(_ dex.Context, in ChildIn, _ dex.Results) (dex.Decision, error) {
	if in.Fail {
		return dex.ForceFail(fmt.Sprintf("child %d fails", in.N)), nil
	}
	return dex.GracefulComplete(in.N * 2), nil
}

var (
	sfChildFlow = dex.NewFlow("sf-child").Start(ChildWork{})
	sfChild     = dex.SubFlow[ChildWork, ChildIn, int](sfChildFlow)
)

type FanOut struct{ dex.Step[[]ChildIn] }

func (FanOut) WaitFor(_ dex.Context, ins []ChildIn) (dex.Wait, error) {
	conds := make([]dex.Condition, len(ins))
	for i, in := range ins {
		conds[i] = sfChild.Start(in)
	}
	return dex.AllOf(conds...), nil
}

// FanOutSum is the sum of the children's outputs and the failed count.
type FanOutSum struct{ Sum, Failed, Children int }

func (FanOut) Execute(_ dex.Context, _ []ChildIn, r dex.Results) (dex.Decision, error) {
	var s FanOutSum
	for _, res := range sfChild.Results(r) {
		s.Children++
		if res.Status != dex.StatusCompleted {
			s.Failed++
			continue
		}
		n, err := res.Output()
		if err != nil {
			return nil, err
		}
		s.Sum += n
	}
	return dex.GracefulComplete(s), nil
}

var sfFanOutFlow = dex.NewFlow("sf-fanout").Start(FanOut{})

type Race struct{ dex.Step[[2]ChildIn] }

func (Race) WaitFor(_ dex.Context, in [2]ChildIn) (dex.Wait, error) {
	return dex.AnyOf(sfChild.Start(in[0]).WithID("a"), sfChild.Start(in[1]).WithID("b")), nil
}

// RaceResult names the winner's output and the loser's flow ID and
// status as the parent saw them.
type RaceResult struct {
	Winner, Output      int
	LoserID, LoserState string
}

func (Race) Execute(_ dex.Context, _ [2]ChildIn, r dex.Results) (dex.Decision, error) {
	var out RaceResult
	for i, id := range []string{"a", "b"} {
		res, ok := sfChild.ResultOf(r, id)
		if !ok {
			return nil, fmt.Errorf("no result for %s", id)
		}
		if res.Satisfied {
			out.Winner = i
			n, err := res.Output()
			if err != nil {
				return nil, err
			}
			out.Output = n
		} else {
			out.LoserID, out.LoserState = res.FlowID, res.Status.String()
		}
	}
	return dex.GracefulComplete(out), nil
}

var sfRaceFlow = dex.NewFlow("sf-race").Start(Race{})

// subflowServer starts a dev server (args after the data dir and address)
// and a worker of the subflow flows; it returns the client, the process
// and the server's arguments.
func subflowWorker(t *testing.T, ctx context.Context, addr string) *dex.Client {
	t.Helper()
	fast := dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	return testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}, MaxConcurrentTasks: 64, ReconnectBackoff: fast},
		dex.ClientOptions{RetryBackoff: fast}, sfChildFlow, sfFanOutFlow, sfRaceFlow)
}

// A fan-out over subflows with AllOf: every child is a flow of its own
// whose summary names its parent, the parent's state shows them while it
// waits, a failed child is a result like the others, and the parent's
// Execute gets each typed output. A race with AnyOf: the first child to
// finish wins, the loser is RUNNING in the parent's results and keeps
// running after the parent completed, until it is stopped by its ID.
//
// Covers: E31
func TestSubFlows_FanOutAndRace(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	p.Serving(t, 30*time.Second)
	c := subflowWorker(t, ctx, addr)

	ins := []ChildIn{{N: 1, Delay: 300 * time.Millisecond}, {N: 2}, {N: 3, Fail: true}, {N: 4}}
	if _, err := dex.Start[FanOut](ctx, c, sfFanOutFlow, "fan-1", ins); err != nil {
		t.Fatal(err)
	}
	// While the slow child waits, the parent's state lists every child.
	waitUntil(t, ctx, func() (bool, string) {
		st, err := c.GetFlowState(ctx, "fan-1")
		if err != nil || len(st.Steps) != 1 {
			return false, fmt.Sprintf("state %v, err %v", st, err)
		}
		sfs := st.Steps[0].SubFlows
		if len(sfs) != 4 || sfs[0].RunID == "" {
			return false, fmt.Sprintf("subflows %+v", sfs)
		}
		return sfs[0].FlowID == "SubFlow:fan-1-FanOut-1-0" && sfs[0].Status == dex.StatusRunning, fmt.Sprintf("subflows %+v", sfs)
	})
	res, err := c.WaitForFlow(ctx, "fan-1")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := dex.Output[FanOutSum](res)
	if err != nil || sum != (FanOutSum{Sum: 2 + 4 + 8, Failed: 1, Children: 4}) {
		t.Fatalf("fan-out result %+v (%v), status %v %v", sum, err, res.Status, res.Error)
	}
	for i := range ins {
		id := fmt.Sprintf("SubFlow:fan-1-FanOut-1-%d", i)
		s, err := c.GetFlowSummary(ctx, id)
		if err != nil {
			t.Fatalf("child %s: %v", id, err)
		}
		if s.ParentFlowID != "fan-1" || s.FlowType != "sf-child" {
			t.Fatalf("child %s summary %+v: want parent fan-1, type sf-child", id, s)
		}
	}
	// Search finds a parent's children by the built-in ParentFlowId (E36).
	var children []string
	for f, err := range c.Search(ctx, "ParentFlowId = 'fan-1'", 0) {
		if err != nil {
			t.Fatal(err)
		}
		if f.ParentFlowID != "fan-1" {
			t.Fatalf("search for fan-1's children found %+v", f.FlowSummary)
		}
		children = append(children, f.FlowID)
	}
	if len(children) != len(ins) {
		t.Fatalf("search for fan-1's children found %q, want %d", children, len(ins))
	}

	race := [2]ChildIn{{N: 10, Delay: time.Hour}, {N: 20, Delay: 50 * time.Millisecond}}
	if _, err := dex.Start[Race](ctx, c, sfRaceFlow, "race-1", race); err != nil {
		t.Fatal(err)
	}
	res, err = c.WaitForFlow(ctx, "race-1")
	if err != nil {
		t.Fatal(err)
	}
	rr, err := dex.Output[RaceResult](res)
	want := RaceResult{Winner: 1, Output: 40, LoserID: "SubFlow:race-1-Race-1-0", LoserState: dex.StatusRunning.String()}
	if err != nil || rr != want {
		t.Fatalf("race result %+v (%v), want %+v", rr, err, want)
	}
	// The parent completed; the loser still runs until it is stopped.
	s, err := c.GetFlowSummary(ctx, rr.LoserID)
	if err != nil || s.Status != dex.StatusRunning {
		t.Fatalf("loser %s after the parent completed: %+v, %v", rr.LoserID, s, err)
	}
	if st, err := c.StopFlow(ctx, rr.LoserID, dex.StopCancel, "lost the race"); err != nil || st != dex.StatusCanceled {
		t.Fatalf("stop loser: %v %v", st, err)
	}
}

// Parents with children in flight survive a SIGKILL of the server: after
// the restart on the same data directory every parent completes once,
// with every child's output, whether the kill came before a child started,
// while it ran or after it closed and before its parent heard of it.
//
// Covers: E31
func TestSubFlows_SurviveSIGKILL(t *testing.T) {
	const parents = 30
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--data-dir", dir, "--listen", addr, "--durability", "strict"}
	p1 := testproc.Start(t, args...)
	p1.Serving(t, 30*time.Second)
	c := subflowWorker(t, ctx, addr)

	var wg sync.WaitGroup
	for i := range parents {
		wg.Go(func() {
			ins := []ChildIn{{N: i, Delay: time.Duration(i*20) * time.Millisecond}, {N: 1000 + i, Delay: 200 * time.Millisecond}}
			if _, err := dex.Start[FanOut](ctx, c, sfFanOutFlow, fmt.Sprintf("kfan-%02d", i), ins); err != nil {
				t.Errorf("start kfan-%02d: %v", i, err)
			}
		})
	}
	wg.Wait()
	time.Sleep(250 * time.Millisecond) // children start, some finish
	p1.Signal(t, syscall.SIGKILL)
	p1.Wait(t, 10*time.Second)
	p2 := testproc.Start(t, args...)
	p2.Serving(t, 30*time.Second)

	for i := range parents {
		id := fmt.Sprintf("kfan-%02d", i)
		res, err := c.WaitForFlow(ctx, id)
		if err != nil {
			t.Fatalf("wait %s: %v", id, err)
		}
		sum, err := dex.Output[FanOutSum](res)
		if want := (FanOutSum{Sum: 2*i + 2*(1000+i), Children: 2}); err != nil || sum != want {
			t.Fatalf("%s: %+v (%v), want %+v; status %v %v", id, sum, err, want, res.Status, res.Error)
		}
	}
}

// waitUntil polls cond until it holds or ctx ends, and fails with what
// cond last said.
func waitUntil(t *testing.T, ctx context.Context, cond func() (bool, string)) {
	t.Helper()
	var last string
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		select {
		case <-ctx.Done():
			t.Fatalf("condition never held: %s", last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
