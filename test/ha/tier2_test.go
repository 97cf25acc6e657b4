package ha

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
)

// The reset flow of the tier-2 failover test: Box writes the note and
// moves to Send; Send waits its input's delay, then fails the flow while
// t2Broken says so (the bug a reset gets past once the worker is fixed),
// otherwise completes with the note.
type (
	T2Box  struct{ dex.Step[T2Parcel] }
	T2Send struct{ dex.Step[T2Parcel] }
)

// T2Parcel is the reset flow's input.
type T2Parcel struct {
	Name  string
	Delay time.Duration
}

var (
	t2Note   = dex.DefineAttribute[string]("note")
	t2Broken atomic.Bool
	t2Flow   = dex.NewFlow("ha-t2-reset").Start(T2Box{}).Steps(T2Send{}).Attributes(t2Note)
)

func (T2Box) Execute(ctx dex.Context, p T2Parcel) (dex.Decision, error) {
	t2Note.Set(ctx, "packed "+p.Name)
	return dex.Move(dex.To[T2Send](p)), nil
}

func (T2Send) WaitFor(_ dex.Context, p T2Parcel) (dex.Wait, error) { return dex.Timer(p.Delay), nil }

func (T2Send) Execute(ctx dex.Context, _ T2Parcel, _ dex.Results) (dex.Decision, error) {
	if t2Broken.Load() {
		return nil, dex.NonRetryable(errors.New("nil carrier: the shipping bug"))
	}
	note, err := t2Note.Get(ctx)
	if err != nil {
		return nil, err
	}
	return dex.GracefulComplete(note), nil
}

// The active is SIGKILLed while tier-2 work is in flight at once: parents
// waiting on subflows (E31), locked RPCs incrementing a counter (E30), and
// resets (E37), some answered before the kill, some sent across it, some
// of whose new runs wait on their timers. The hot standby on MinIO takes
// over and nothing is lost or done twice:
//   - every parent completes once with every child's one run;
//   - the counter moved exactly once per acknowledged increment (plus at
//     most the increments whose outcome the kill made unknown), and no two
//     acknowledged increments saw the same value: the lock held;
//   - every reset flow has exactly one reset run, from its failed run, and
//     it completed with the state the failed run left.
//
// Covers: E30, E31, E37, S3, T5
func TestHotStandby_Tier2InFlightSurviveFailover(t *testing.T) {
	const parents, kids, resets, bumpers = 10, 3, 12, 4
	a, b, pa, pb := startPairMode(t, storage(t, "s3"), leaseDuration, true)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	addrs := []string{a.addr, b.addr}
	stopWorker := runWorker(t, ctx, addrs, 64, kidFlow, broodFlow, lockHoldFlow, t2Flow)
	c := dialClient(t, ctx, addrs)

	// Resets: runs that fail with the bug before the kill.
	t2Broken.Store(true)
	failed := map[string]string{} // flow ID -> failed run ID
	for i := range resets {
		id := fmt.Sprintf("t2-reset-%02d", i)
		// Delays up to 1.1 s: after the kill some new runs still wait.
		p := T2Parcel{Name: id, Delay: time.Duration(i%12) * 100 * time.Millisecond}
		run, err := dex.Start[T2Box](ctx, c, t2Flow, id, p)
		if err != nil {
			t.Fatal(err)
		}
		failed[id] = run.RunID
	}
	for id := range failed {
		if res, err := c.WaitForFlow(ctx, id); err != nil || res.Status != dex.StatusFailed {
			t.Fatalf("%s with the bug = %+v, %v; want FAILED", id, res, err)
		}
	}
	t2Broken.Store(false) // the fix ships

	// Subflows: parents fan out over children with delays up to 1.5 s.
	want := map[string]int{}
	for i := range parents {
		ks := make([]Kid, kids)
		sum := 0
		for j := range ks {
			ks[j] = Kid{N: i*10 + j, Delay: time.Duration((i*kids+j)%16) * 100 * time.Millisecond}
			sum += 2 * ks[j].N
		}
		id := fmt.Sprintf("t2-brood-%02d", i)
		if _, err := dex.Start[Brood](ctx, c, broodFlow, id, ks); err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		want[id] = sum
	}

	// Locks: bumpers increment one counter under its lock until stopped.
	const counter = "t2-counter"
	if _, err := c.StartFlow(ctx, lockHoldFlow, counter, 0); err != nil {
		t.Fatal(err)
	}
	var (
		bumpMu   sync.Mutex
		seen     = map[int]bool{}
		acked    int
		unknown  int
		stopBump atomic.Bool
		bumpWG   sync.WaitGroup
	)
	for range bumpers {
		bumpWG.Go(func() {
			for !stopBump.Load() && ctx.Err() == nil {
				n, err := dex.InvokeRPC(ctx, c, counter, lhBump, struct{}{}, dex.WithLocks(lhCount))
				bumpMu.Lock()
				switch {
				case err == nil:
					if seen[n] {
						t.Errorf("two acknowledged increments saw the counter at %d: the lock did not hold", n-1)
					}
					seen[n] = true
					acked++
				case errors.Is(err, dex.ErrLockHeld):
					// refused at once: changed nothing
				default:
					unknown++ // the kill: it may or may not have committed
				}
				bumpMu.Unlock()
				if err != nil {
					time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
				}
			}
		})
	}

	// Resets across the kill: each sent at 0-500 ms, the kill at 250 ms.
	resetRun := map[string]string{} // flow ID -> the reset run, when its call answered
	var resetMu sync.Mutex
	var resetWG sync.WaitGroup
	i := 0
	for id, run := range failed {
		delay := time.Duration(i%6) * 100 * time.Millisecond
		i++
		resetWG.Go(func() {
			time.Sleep(delay)
			newRun, err := c.Reset(ctx, id, run, dex.ResetToStepType(dex.Ref[T2Send]()), dex.WithResetReason("shipping bug fixed"))
			if err != nil {
				t.Logf("reset %s: %v (checked after the takeover)", id, err)
				return
			}
			resetMu.Lock()
			resetRun[id] = newRun
			resetMu.Unlock()
		})
	}
	time.Sleep(250 * time.Millisecond)
	killedAt := time.Now()
	pa.Signal(t, syscall.SIGKILL)
	pa.Wait(t, 10*time.Second)
	pb.Serving(t, 30*time.Second)
	from, fence := replayed(t, pb)
	t.Logf("the hot standby served, replaying batches %d to %d", from, fence)
	resetWG.Wait()

	// A reset whose call did not answer: done if the latest run links
	// back to the failed run, else sent again (the run ID must be exact,
	// so a reset can never happen twice).
	answered := len(resetRun)
	for id, run := range failed {
		if resetRun[id] != "" {
			continue
		}
		st, err := c.GetFlowState(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.ResetFromRunID == run {
			resetRun[id] = st.Summary.RunID
			continue
		}
		newRun, err := c.Reset(ctx, id, run, dex.ResetToStepType(dex.Ref[T2Send]()), dex.WithResetReason("shipping bug fixed"))
		if err != nil {
			t.Fatalf("reset %s after the takeover: %v", id, err)
		}
		resetRun[id] = newRun
	}
	t.Logf("%d of %d resets answered across the kill", answered, resets)

	for id, run := range failed {
		res, err := c.WaitForFlow(ctx, id)
		if err != nil {
			t.Fatalf("wait for %s: %v", id, err)
		}
		note, err := dex.Output[string](res)
		if err != nil || res.Status != dex.StatusCompleted || note != "packed "+id {
			t.Fatalf("%s after the reset = %v %q (%v); want COMPLETED with the failed run's note", id, res.Status, note, err)
		}
		st, err := c.GetFlowState(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Summary.RunID != resetRun[id] || st.ResetFromRunID != run {
			t.Fatalf("%s: latest run %s reset from %q; want the one reset run %s, from the failed run %s",
				id, st.Summary.RunID, st.ResetFromRunID, resetRun[id], run)
		}
	}

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
		}
	}

	// Let the bumpers run on the new active for a while, then stop them.
	time.Sleep(500 * time.Millisecond)
	stopBump.Store(true)
	bumpWG.Wait()
	n, err := dex.GetAttribute(ctx, c, counter, lhCount)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counter %d: %d increments acknowledged, %d unknown (the kill at %s)", n, acked, unknown, killedAt.Format(time.TimeOnly))
	if n < acked || n > acked+unknown {
		t.Fatalf("counter %d after %d acknowledged and %d unknown increments: want %d to %d", n, acked, unknown, acked, acked+unknown)
	}
	if acked == 0 {
		t.Fatal("no increment was acknowledged")
	}

	stopWorker()
	pb.Signal(t, syscall.SIGTERM)
	if code := pb.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("graceful stop exited %d", code)
	}
}
