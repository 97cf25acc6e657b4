package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// The checker is not blind: a second run of an acknowledged flow ID (what
// a server that forgot a request ID across a failover would start) counts
// as a duplicate, a timer flow that went on before its timer was due (here
// skipped with SkipTimer, as a server that fired it early would) counts as
// lost, and acknowledged flows whose data is gone (a dev node restarted on
// an emptied data directory) count as lost.
func TestChecker_SeesDuplicatesAndLosses(t *testing.T) {
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--data-dir", dir, "--listen", addr}
	p := testproc.Start(t, args...)
	p.Serving(t, 30*time.Second)
	ctx := t.Context()
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{addr}, Logger: quietLogger(), ReconnectBackoff: fastBackoff}, chainFlow, timerFlow)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { <-done })
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger(), RetryBackoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ch := newChecker("selfcheck", c, newTimeline())
	lctx, stopLoad := context.WithCancel(ctx)
	wait := ch.run(lctx, 2, 10*time.Millisecond)
	if !ch.progress(10, 30*time.Second) {
		t.Fatal("fewer than 10 starts acknowledged in 30 s")
	}
	stopLoad()
	wait()
	if failures := ch.verify(t, ctx, time.Minute); len(failures) != 0 {
		t.Fatalf("a clean run failed the check: %v", failures)
	}

	// A second run of an acknowledged flow ID.
	first := ch.acks[0]
	if _, err := c.StartFlow(ctx, chainFlow, first.id, Trail{N: first.n}, dex.WithIDReusePolicy(dex.ReuseAllowIfNotRunning)); err != nil {
		t.Fatal(err)
	}
	failures := ch.verify(t, ctx, time.Minute)
	if p := ch.phases[first.phase]; len(failures) != 1 || p.duplicated != 1 || p.lost != 0 {
		t.Fatalf("after a second run of %s: %d duplicated, %d lost, failures %v; want 1 duplicate", first.id, p.duplicated, p.lost, failures)
	}
	t.Logf("a second run: %s", failures[0])

	// A timer flow whose timer did not wait its time (first's second run
	// stays a duplicate).
	ch.phases[first.phase].duplicated = 0
	n := ch.next
	early := ack{id: fmt.Sprintf("selfcheck-early-%d", n), n: n, phase: first.phase, timer: true}
	run, err := c.StartFlow(ctx, timerFlow, early.id, Trail{N: n})
	if err != nil {
		t.Fatal(err)
	}
	early.run = run.RunID
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := c.SkipTimer(ctx, early.id, "T-1", dex.TimerIndex(0))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("skip the timer of %s: %v", early.id, err)
		}
		time.Sleep(20 * time.Millisecond) // its Wait is not stored yet
	}
	ch.acks = append(ch.acks, early)
	failures = ch.verify(t, ctx, time.Minute)
	if p := ch.phases[first.phase]; len(failures) != 2 || p.lost != 1 || p.duplicated != 1 || !strings.Contains(failures[1], early.id) {
		t.Fatalf("after a timer skipped: %d duplicated, %d lost, failures %v; want %s lost", p.duplicated, p.lost, failures, early.id)
	}
	t.Logf("a timer skipped: %s", failures[1])
	ch.acks = ch.acks[:len(ch.acks)-1]

	// The data directory emptied under a SIGKILLed node.
	p.Signal(t, syscall.SIGKILL)
	p.Wait(t, 10*time.Second)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	testproc.Start(t, args...).Serving(t, 30*time.Second)
	ch.phases[first.phase].duplicated, ch.phases[first.phase].lost = 0, 0
	failures = ch.verify(t, ctx, time.Minute)
	if p := ch.phases[first.phase]; len(failures) != len(ch.acks) || p.lost != len(ch.acks) {
		t.Fatalf("after the data was lost: %d of %d acknowledged flows lost, failures %d", p.lost, len(ch.acks), len(failures))
	}
	t.Logf("lost data: %d of %d acknowledged flows reported lost, e.g. %s", len(failures), len(ch.acks), failures[0])
}

// The run does not apply the next fault while a start call sent before the
// last fault ended is still waiting (settled): that call would span both
// faults, as the 42-45 s start of the first chaos run did.
func TestChecker_SettledWaitsForEveryCaller(t *testing.T) {
	t.Parallel()
	ch := &checker{tl: newTimeline()}
	faultEnd := time.Now()
	ch.returned = []time.Time{faultEnd.Add(time.Millisecond), faultEnd.Add(-time.Second)}
	if ch.settled(faultEnd, 50*time.Millisecond) {
		t.Fatal("settled while a caller's start sent before the fault ended has not returned")
	}
	ch.mu.Lock()
	ch.returned[1] = time.Now()
	ch.mu.Unlock()
	if !ch.settled(faultEnd, 0) {
		t.Fatal("not settled once every caller's start returned after the fault ended")
	}
}
