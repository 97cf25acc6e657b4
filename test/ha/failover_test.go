package ha

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/wal"
)

// backends are the shared durable stores the failover tests run on.
var backends = []string{"s3", "postgres"}

// Bounds of a hot standby's takeover: the batches it replays (the fence
// and what the follower had not applied yet: what the active wrote since
// the follower's last poll) and its recovery after taking the lease.
const (
	hotReplayMax = 20
	hotRecovery  = 750 * time.Millisecond
)

func standbyKind(hot bool) string {
	if hot {
		return "hot"
	}
	return "cold"
}

// The active process is SIGKILLed while flows run; the cold standby, with
// an empty local store, takes over once the lease has expired plus 1 s and
// not before (L13), replays the whole log and fences it (T1), and every
// flow whose start was acknowledged completes with the right output (G3):
// the SDK's worker and client move to the standby's address on their own
// (P5). Recovery fails the attempts the dead process had handed out, which
// then run as attempt 2 (T2), dispatches attempts that no worker had
// received yet as attempt 1 (T4), and fires the durable timers that came
// due during the outage (T5).
//
// Covers: S1, S2, L13, T1, T2, T4, T5, G3, P1, P5
func TestColdStandby_TakesOverAfterSIGKILL(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { killActive(t, backend, false) })
	}
}

// killActive runs the SIGKILL case with a cold standby, or a hot one if
// hot is set.
func killActive(t *testing.T, backend string, hot bool) {
	const chains = 150
	st, openStore := storageWithStore(t, backend)
	a, b, pa, pb := startPairMode(t, st, leaseDuration, hot)
	kind := standbyKind(hot)
	addrs := []string{a.addr, b.addr}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	stopWorker := runWorker(t, ctx, addrs, 32, chainFlow, napFlow, holdFlow)
	c := dialClient(t, ctx, addrs)

	// Before the kill: attempts that a worker runs (hold), timers armed
	// (nap), attempts that no worker can take yet (later).
	ids := func(kind string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%s-%d", backend, kind, i)
		}
		return out
	}
	holds, naps, laters := ids("hold", 3), ids("nap", 5), ids("later", 3)
	for i, id := range naps {
		if _, err := c.StartFlow(ctx, napFlow, id, i); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range holds {
		if _, err := c.StartFlow(ctx, holdFlow, id, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range laters {
		if _, err := c.StartFlow(ctx, laterFlow, id, 0); err != nil {
			t.Fatal(err)
		}
	}
	waitStored(t, &holdsRunning, holds, 10*time.Second)
	waitStored(t, &napsWaiting, naps, 10*time.Second)

	// Start the chains from 16 callers; kill the active after a third of
	// the starts were acknowledged, while steps run.
	var (
		mu    sync.Mutex
		acked = map[string]int{}
		acks  atomic.Int64
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	killed := make(chan time.Time, 1)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= chains {
					return
				}
				id, in := fmt.Sprintf("%s-chain-%03d", backend, i), i*10
				if _, err := c.StartFlow(ctx, chainFlow, id, in); err != nil {
					t.Logf("start %s not acknowledged: %v", id, err)
					continue
				}
				mu.Lock()
				acked[id] = in
				mu.Unlock()
				if acks.Add(1) == chains/3 {
					pa.Signal(t, syscall.SIGKILL)
					killed <- time.Now()
				}
			}
		})
	}
	killedAt := <-killed
	pa.Wait(t, 10*time.Second)
	pb.Serving(t, 30*time.Second)
	took := time.Since(killedAt)
	from, fence := replayed(t, pb)
	t.Logf("%s: the %s standby served %v after the SIGKILL (lease %v), replaying batches %d to %d", backend, kind,
		took.Round(time.Millisecond), leaseDuration, from, fence)
	// The last renewal was at most a third of the lease before the kill:
	// the standby may not take over before renewal + lease + 1 s.
	if earliest := leaseDuration - leaseDuration/3 + time.Second - 200*time.Millisecond; took < earliest {
		t.Errorf("the standby served %v after the kill: before the lease could have expired plus 1 s (%v)", took, earliest)
	}
	// It takes over at expiry + 1 s, one standby poll later at most, then
	// replays and recovers. A hot standby takes it at the expiry plus its
	// 0-50 ms jitter, and its replay is only the fence and what the
	// follower had not applied yet (S3, S7).
	if latest := leaseDuration + time.Second + time.Second + 1500*time.Millisecond; !hot && took > latest {
		t.Errorf("the standby served %v after the kill, want at most %v (lease + 1 s + poll + recovery)", took, latest)
	}
	if latest := leaseDuration + time.Second + hotRecovery; hot && took > latest {
		t.Errorf("the hot standby served %v after the kill, want at most %v (lease + 1 s + recovery)", took, latest)
	}
	if hot && fence-from > hotReplayMax {
		t.Errorf("the hot standby replayed batches %d to %d at its takeover, want at most %d", from, fence, hotReplayMax)
	}

	// The attempts of the later flow were never handed out: a worker of
	// its type connects only now.
	stopWorker2 := runWorker(t, ctx, addrs, 0, laterFlow)

	wg.Wait()
	wantOutput := func(id string, want int) {
		t.Helper()
		res, err := c.WaitForFlow(ctx, id)
		if err != nil {
			t.Fatalf("wait for %s: %v", id, err)
		}
		if res.Status != dex.StatusCompleted {
			t.Fatalf("%s ended %v (%v), want COMPLETED", id, res.Status, res.Error)
		}
		if out, err := dex.Output[int](res); err != nil || out != want {
			t.Fatalf("%s output = %d (%v), want %d", id, out, err, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < chains/3 {
		t.Fatalf("only %d starts were acknowledged", len(acked))
	}
	for id, in := range acked {
		wantOutput(id, in+3)
	}
	for i, id := range naps {
		wantOutput(id, i+1) // T5: the timer fired after the takeover
	}
	for _, id := range holds {
		wantOutput(id, 2) // T2: attempt 1 failed NOT_COMPLETED, attempt 2 ran
	}
	for _, id := range laters {
		wantOutput(id, 1) // T4: not failed, dispatched as attempt 1
	}
	t.Logf("%d of %d chain starts acknowledged, all completed after the takeover", len(acked), chains)

	d, err := dexpb.NewAdminServiceClient(dial(t, b.addr)).Describe(ctx, &dexpb.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetNodeEpoch() != 2 {
		t.Fatalf("node epoch after the takeover = %d, want 2", d.GetNodeEpoch())
	}
	// The lease and the log live in the shared store (an object in the
	// bucket, a row in the table): the lease names the new holder with the
	// epoch raised by the takeover, and the log starts with the first
	// holder's fence (P1, L1, L3).
	blobs, layout := openStore(t)
	rec, _, err := lease.Read(ctx, blobs, layout.LeaseKey())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Epoch != 2 || rec.Holder != d.GetHolderProcessId() || rec.Released {
		t.Fatalf("lease in the store = %+v, want epoch 2 held by %s", rec, d.GetHolderProcessId())
	}
	if first, _, err := wal.ReadBatch(ctx, blobs, layout, 0); err != nil || first.Kind != wal.KindFence || first.Epoch != 1 {
		t.Fatalf("batch 0 = %+v, %v; want the fence of epoch 1", first, err)
	}
	stopWorker()
	stopWorker2()
	pb.Signal(t, syscall.SIGTERM)
	if code := pb.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("graceful stop exited %d", code)
	}
}

// SIGTERM of the active drains, releases the lease and exits 0; the cold
// standby takes the released lease at its next poll (250 ms), replays the
// log and serves within about a second (L12), with the state the old
// active committed (T1). dexzd_leader moves from the old process to the
// new one (P4).
//
// Covers: L12, T1, P4, P5
func TestColdStandby_TakesOverAtOnceAfterSIGTERM(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { terminateActive(t, backend, false) })
	}
}

// terminateActive runs the SIGTERM case with a cold standby, or a hot one
// if hot is set.
func terminateActive(t *testing.T, backend string, hot bool) {
	a, b, pa, pb := startPairMode(t, storage(t, backend), leaseDuration, hot)
	addrs := []string{a.addr, b.addr}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stopWorker := runWorker(t, ctx, addrs, 0, chainFlow)
	c := dialClient(t, ctx, addrs)

	const n = 20
	for i := range n {
		if _, err := c.StartFlow(ctx, chainFlow, fmt.Sprintf("before-%d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		res, err := c.WaitForFlow(ctx, fmt.Sprintf("before-%d", i))
		if err != nil || res.Status != dex.StatusCompleted {
			t.Fatalf("before-%d: %v, %v", i, res, err)
		}
	}
	if m := scrape(t, a.metrics); m["dexzd_leader"] != "1" {
		t.Fatalf("dexzd_leader on the active = %s, want 1", m["dexzd_leader"])
	}

	if hot {
		// The follower polls every 250 ms: let it read what the flows
		// wrote, so that the replay bound below tests the handover, not
		// a burst written within the last poll interval.
		time.Sleep(750 * time.Millisecond)
	}
	termAt := time.Now()
	pa.Signal(t, syscall.SIGTERM)
	if code := pa.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the active's graceful stop exited %d", code)
	}
	exitedAfter := time.Since(termAt)
	pb.Serving(t, 30*time.Second)
	took := time.Since(termAt)
	from, fence := replayed(t, pb)
	t.Logf("%s: the %s standby served %v after the SIGTERM (the active exited after %v), replaying batches %d to %d",
		backend, standbyKind(hot), took.Round(time.Millisecond), exitedAfter.Round(time.Millisecond), from, fence)
	if took > 2*time.Second {
		t.Errorf("the standby served %v after the SIGTERM, want about a poll interval (250 ms) plus recovery", took)
	}
	if hot && took-exitedAfter > 250*time.Millisecond+hotRecovery {
		t.Errorf("the hot standby served %v after the active exited, want at most a poll interval plus %v", took-exitedAfter, hotRecovery)
	}
	if hot && fence-from > hotReplayMax {
		t.Errorf("the hot standby replayed batches %d to %d at its takeover, want at most %d", from, fence, hotReplayMax)
	}

	// The new active has what the old one committed and serves new flows.
	for i := range n {
		res, err := c.WaitForFlow(ctx, fmt.Sprintf("before-%d", i))
		if err != nil || res.Status != dex.StatusCompleted {
			t.Fatalf("before-%d on the new active: %v, %v", i, res, err)
		}
		if out, err := dex.Output[int](res); err != nil || out != i+3 {
			t.Fatalf("before-%d output = %d (%v), want %d", i, out, err, i+3)
		}
	}
	if _, err := c.StartFlow(ctx, chainFlow, "after", 100); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, "after")
	if err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("after: %v, %v", res, err)
	}
	m := scrape(t, b.metrics)
	if m["dexzd_leader"] != "1" || m["dexzd_node_epoch"] != "2" || m[`dexzd_hot_standby_state{state="not_standby"}`] != "1" {
		t.Fatalf("metrics of the new active: leader %s, epoch %s, not_standby %s; want 1, 2, 1",
			m["dexzd_leader"], m["dexzd_node_epoch"], m[`dexzd_hot_standby_state{state="not_standby"}`])
	}
	stopWorker()
	pb.Signal(t, syscall.SIGTERM)
	if code := pb.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("graceful stop exited %d", code)
	}
}
