package ha

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
)

// Flows of the subflow failover test: a child that waits its input's delay
// and returns its number doubled, and a parent that fans out over
// children with AllOf and returns the sum with each child's run.

type Kid struct {
	N     int
	Delay time.Duration
}

type KidWork struct{ dex.Step[Kid] }

func (KidWork) WaitFor(_ dex.Context, k Kid) (dex.Wait, error) { return dex.Timer(k.Delay), nil }

func (KidWork) Execute(_ dex.Context, k Kid, _ dex.Results) (dex.Decision, error) {
	return dex.GracefulComplete(k.N * 2), nil
}

var (
	kidFlow = dex.NewFlow("ha-kid").Start(KidWork{})
	kidSub  = dex.SubFlow[KidWork, Kid, int](kidFlow)
)

type Brood struct{ dex.Step[[]Kid] }

func (Brood) WaitFor(_ dex.Context, ks []Kid) (dex.Wait, error) {
	conds := make([]dex.Condition, len(ks))
	for i, k := range ks {
		conds[i] = kidSub.Start(k)
	}
	return dex.AllOf(conds...), nil
}

// BroodSum is the parent's output: the sum of the children's outputs and
// the run each result came from, by child flow ID.
type BroodSum struct {
	Sum  int
	Runs map[string]string
}

func (Brood) Execute(_ dex.Context, _ []Kid, r dex.Results) (dex.Decision, error) {
	out := BroodSum{Runs: map[string]string{}}
	for _, res := range kidSub.Results(r) {
		n, err := res.Output()
		if err != nil {
			return nil, fmt.Errorf("child %s (%s): %w", res.FlowID, res.Status, err)
		}
		out.Sum += n
		out.Runs[res.FlowID] = res.RunID
	}
	return dex.GracefulComplete(out), nil
}

var broodFlow = dex.NewFlow("ha-brood").Start(Brood{})

// The active is SIGKILLed while parents wait for children in every stage
// (some children done, some waiting on their timers, some whose results
// the parent has not taken yet); the hot standby on MinIO takes over, and
// every parent completes once with every child's result, each child having
// run once: the run the parent got is the child's only run.
//
// Covers: E31, S3, T5, G3
func TestHotStandby_SubFlowsInFlightSurviveFailover(t *testing.T) {
	const parents, kids = 20, 3
	a, b, pa, pb := startPairMode(t, storage(t, "s3"), leaseDuration, true)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	addrs := []string{a.addr, b.addr}
	stopWorker := runWorker(t, ctx, addrs, 64, kidFlow, broodFlow)
	c := dialClient(t, ctx, addrs)

	want := map[string]int{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range parents {
		ks := make([]Kid, kids)
		sum := 0
		for j := range ks {
			// Delays from 0 to 1.5 s: the kill comes while some children
			// are done and others wait.
			ks[j] = Kid{N: i*10 + j, Delay: time.Duration((i*kids+j)%16) * 100 * time.Millisecond}
			sum += 2 * ks[j].N
		}
		id := fmt.Sprintf("brood-%02d", i)
		wg.Go(func() {
			if _, err := dex.Start[Brood](ctx, c, broodFlow, id, ks); err != nil {
				t.Errorf("start %s: %v", id, err)
				return
			}
			mu.Lock()
			want[id] = sum
			mu.Unlock()
		})
	}
	wg.Wait()
	time.Sleep(400 * time.Millisecond)
	killedAt := time.Now()
	pa.Signal(t, syscall.SIGKILL)
	pa.Wait(t, 10*time.Second)
	pb.Serving(t, 30*time.Second)
	from, fence := replayed(t, pb)
	t.Logf("the hot standby served, replaying batches %d to %d", from, fence)

	before, after := 0, 0
	for id, sum := range want {
		res, err := c.WaitForFlow(ctx, id)
		if err != nil {
			t.Fatalf("wait for %s: %v", id, err)
		}
		out, err := dex.Output[BroodSum](res)
		if err != nil || res.Status != dex.StatusCompleted || out.Sum != sum || len(out.Runs) != kids {
			t.Fatalf("%s: %v %+v (%v), want sum %d of %d children", id, res.Status, out, err, sum, kids)
		}
		for child, run := range out.Runs {
			s, err := c.GetFlowSummary(ctx, child)
			if err != nil {
				t.Fatalf("child %s: %v", child, err)
			}
			if s.RunID != run || s.Status != dex.StatusCompleted || s.ParentFlowID != id {
				t.Fatalf("child %s: %+v; want its one run %s COMPLETED under %s", child, s, run, id)
			}
			if s.CloseTime.Before(killedAt) {
				before++
			} else {
				after++
			}
		}
		h, err := c.GetFlowHistory(ctx, id, dex.HistoryQuery{})
		if err != nil {
			t.Fatal(err)
		}
		completed := 0
		for _, ev := range h.Events {
			if ev.Kind == dex.EventSubFlowCompleted {
				completed++
			}
		}
		if completed != kids {
			t.Fatalf("%s history has %d SubFlowCompleted events, want %d: %v", id, completed, kids, h.Events)
		}
	}
	// The kill came with children in both stages.
	t.Logf("%d children closed before the kill, %d after", before, after)
	if before == 0 || after == 0 {
		t.Errorf("%d children closed before the kill and %d after: want some of each", before, after)
	}
	stopWorker()
	pb.Signal(t, syscall.SIGTERM)
	if code := pb.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("graceful stop exited %d", code)
	}
}
