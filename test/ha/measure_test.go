package ha

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// TestMeasure_FailoverTimes measures the failover times the README quotes:
// for each backend, DEX_HA_MEASURE_RUNS runs (default 5) of a SIGKILL and
// of a SIGTERM of the active with a cold standby, with lease.duration set
// by DEX_HA_MEASURE (for example "10s"). Before the signal the active runs
// 100 chain flows to completion, so that the standby replays a log of a few
// hundred batches. It reports, per case, the median, minimum and maximum of
// the time from the signal to the standby serving, and of the standby's
// recovery alone (from "lease acquired" to "serving" in its log). Skipped
// unless DEX_HA_MEASURE is set. DEX_HA_MEASURE_MODE=hot measures a hot
// standby instead (it then also reports the batches the standby replayed
// at its takeover), DEX_HA_MEASURE_MODE=stepdown measures step downs with
// dexcli instead: hand-over to a hot standby, and take-back by a single
// process after the default 5 s hold-off. DEX_HA_MEASURE_MODE=client
// measures every event as SDK clients and a worker see it (see
// measureClients; DEX_HA_MEASURE_EVENT keeps the events whose name
// contains it):
//
//	DEX_HA_MEASURE=10s scripts/testenv.sh run -- go test -run TestMeasure -v -timeout 30m ./test/ha/
func TestMeasure_FailoverTimes(t *testing.T) {
	v := os.Getenv("DEX_HA_MEASURE")
	if v == "" {
		t.Skip("set DEX_HA_MEASURE to a lease duration (10s) to measure failover times")
	}
	lease, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("DEX_HA_MEASURE: %v", err)
	}
	runs := 5
	if r := os.Getenv("DEX_HA_MEASURE_RUNS"); r != "" {
		if runs, err = strconv.Atoi(r); err != nil || runs < 1 {
			t.Fatalf("DEX_HA_MEASURE_RUNS: %q", r)
		}
	}
	mode := os.Getenv("DEX_HA_MEASURE_MODE")
	if mode == "client" {
		measureClients(t, lease, runs, os.Getenv("DEX_HA_MEASURE_EVENT"))
		return
	}
	if mode == "stepdown" {
		measureStepDowns(t, lease, runs)
		return
	}
	hot := mode == "hot"
	var report []string
	for _, backend := range backends {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
			var total, recovery []time.Duration
			var batches, replays string
			for i := range runs {
				t.Run(fmt.Sprintf("%s/%v/%d", backend, sig, i), func(t *testing.T) {
					tot, rec, b, r := failoverOnce(t, backend, sig, lease, hot)
					total, recovery, batches = append(total, tot), append(recovery, rec), b
					replays += " " + r
				})
			}
			if len(total) == 0 {
				continue
			}
			line := fmt.Sprintf("%s %-8s %-10v lease %v, %d runs, log ~%s batches: signal to serving median %v (min %v, max %v); recovery median %v (min %v, max %v); batches replayed:%s",
				standbyKind(hot), backend, sig, lease, len(total), batches, ms(median(total)), ms(slices.Min(total)), ms(slices.Max(total)),
				ms(median(recovery)), ms(slices.Min(recovery)), ms(slices.Max(recovery)), replays)
			t.Log(line)
			report = append(report, line)
		}
	}
	for _, l := range report {
		t.Log(l)
	}
}

// measureStepDowns measures step downs with hand-over to a hot standby and
// with take-back on a single process (DEX_HA_MEASURE_MODE=stepdown).
func measureStepDowns(t *testing.T, lease time.Duration, runs int) {
	var report []string
	for _, backend := range backends {
		for _, handOver := range []bool{true, false} {
			kind := "take-back"
			if handOver {
				kind = "hand-over"
			}
			var serving, calls []time.Duration
			for i := range runs {
				t.Run(fmt.Sprintf("%s/%s/%d", backend, kind, i), func(t *testing.T) {
					s, c := stepDownOnce(t, backend, lease, handOver)
					serving, calls = append(serving, s), append(calls, c)
				})
			}
			if len(serving) == 0 {
				continue
			}
			line := fmt.Sprintf("step down %-9s %-8s lease %v, %d runs: to serving median %v (min %v, max %v); call median %v (min %v, max %v)",
				kind, backend, lease, len(serving), ms(median(serving)), ms(slices.Min(serving)), ms(slices.Max(serving)),
				ms(median(calls)), ms(slices.Min(calls)), ms(slices.Max(calls)))
			t.Log(line)
			report = append(report, line)
		}
	}
	for _, l := range report {
		t.Log(l)
	}
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

var logTime = regexp.MustCompile(`time=(\S+) level=INFO msg=(?:"lease acquired"|serving) `)

// measureLoad starts a worker and a client on addrs and runs 100 chain
// flows to completion, so that a takeover replays a log of a few hundred
// batches. The returned function stops the worker.
func measureLoad(t *testing.T, ctx context.Context, addrs []string) (*dex.Client, func()) {
	t.Helper()
	stop := runWorker(t, ctx, addrs, 32, chainFlow)
	c := dialClient(t, ctx, addrs)
	const n = 100
	for i := range n {
		if _, err := c.StartFlow(ctx, chainFlow, fmt.Sprintf("m-%d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if res, err := c.WaitForFlow(ctx, fmt.Sprintf("m-%d", i)); err != nil || res.Status != dex.StatusCompleted {
			t.Fatalf("m-%d: %v, %v", i, res, err)
		}
	}
	return c, stop
}

// stepDownOnce runs one step down with dexcli: with handOver, of the
// active of a hot pair (the standby takes over), else of a single process
// (it takes the lease back after the default 5 s hold-off). It returns the
// time from the command's start to a process serving again, and how long
// the command took.
func stepDownOnce(t *testing.T, backend string, lease time.Duration, handOver bool) (toServing, call time.Duration) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var next *testproc.Proc
	var addr string
	if handOver {
		a, b, _, pb := startPairMode(t, storage(t, backend), lease, true)
		_, stop := measureLoad(t, ctx, []string{a.addr, b.addr})
		defer stop()
		time.Sleep(750 * time.Millisecond) // the follower reads what the flows wrote
		next, addr = pb, a.addr
	} else {
		s := newServerWith(t, storage(t, backend), "", "", lease)
		p := s.start(t)
		p.Serving(t, 30*time.Second)
		_, stop := measureLoad(t, ctx, []string{s.addr})
		defer stop()
		next, addr = p, s.addr
	}
	began := time.Now()
	done := make(chan time.Duration, 1)
	var out stepDownOut
	go func() {
		o, took := cliStepDown(t, addr)
		out = o
		done <- took
	}()
	next.Serving(t, 30*time.Second)
	toServing = time.Since(began)
	call = <-done
	want := "takenBackByThisProcess"
	if handOver {
		want = "takenOverByAnotherProcess"
	}
	if out.LeaseHolderAfterStepDown != want {
		t.Fatalf("step down = %+v, want %s", out, want)
	}
	t.Logf("step down to serving %v, the call took %v", ms(toServing), ms(call))
	return toServing, call
}

// failoverOnce runs one failover: it returns the time from the signal to
// the standby serving, the standby's recovery (lease acquired to serving,
// from its log), the active's log batch count before the signal and the
// number of batches the standby replayed at its takeover (fence included).
func failoverOnce(t *testing.T, backend string, sig syscall.Signal, lease time.Duration, hot bool) (total, recovery time.Duration, batches, replay string) {
	a, b, pa, pb := startPairMode(t, storage(t, backend), lease, hot)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, stopWorker := measureLoad(t, ctx, []string{a.addr, b.addr})
	batches = scrape(t, a.metrics)["dexzd_log_batches_total"]

	at := time.Now()
	pa.Signal(t, sig)
	pb.Serving(t, lease+30*time.Second)
	total = time.Since(at)
	var stamps []time.Time
	for _, m := range logTime.FindAllStringSubmatch(pb.Log(), -1) {
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatal(err)
		}
		stamps = append(stamps, ts)
	}
	if len(stamps) != 2 {
		t.Fatalf("want the standby's lease acquired and serving lines:\n%s", pb.Log())
	}
	recovery = stamps[1].Sub(stamps[0])
	from, fence := replayed(t, pb)
	replay = strconv.FormatUint(fence-from+1, 10)
	t.Logf("signal to serving %v, recovery %v, replayed %s batches", total.Round(time.Millisecond), recovery, replay)
	if res, err := c.WaitForFlow(ctx, "m-0"); err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("m-0 on the new active: %v, %v", res, err)
	}
	stopWorker()
	pb.Signal(t, syscall.SIGTERM)
	pb.Wait(t, 30*time.Second)
	return total, recovery, batches, replay
}
