package bench

import (
	"context"
	"math"
	"testing"
	"time"
)

// Every workload, closed loop and burst, against one real dev server with
// /metrics: the flows complete with the right outputs, and every figure of
// the Result is measured. Run one after the other, so that each run's store
// counters are its own.
func TestRun_WorkloadsOnDevServer(t *testing.T) {
	t.Parallel()
	srv, err := StartDevServer(context.Background(), DevOptions{Binary: serverBinary(t), DataDir: t.TempDir(),
		Durability: "strict", Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	if srv.MetricsURL == "" {
		t.Fatal("no metrics URL")
	}
	const timer = 500 * time.Millisecond
	tests := []struct {
		name string
		cfg  Config
	}{
		{"chain", Config{Workload: WorkloadChain, Flows: 60, Steps: 3, Callers: 8}},
		{"chain-burst", Config{Workload: WorkloadChain, Flows: 60, Steps: 2, Callers: 4, Burst: true}},
		{"fanout", Config{Workload: WorkloadFanout, Flows: 40, Branches: 4, Callers: 8}},
		{"fanout-burst", Config{Workload: WorkloadFanout, Flows: 40, Branches: 3, Callers: 4, Burst: true}},
		{"timer", Config{Workload: WorkloadTimer, Flows: 16, Timer: timer, Callers: 16}},
		{"timer-burst", Config{Workload: WorkloadTimer, Flows: 60, Timer: timer, Callers: 8, Burst: true}},
		{"signal", Config{Workload: WorkloadSignal, Flows: 60, Callers: 8}},
		{"signal-burst", Config{Workload: WorkloadSignal, Flows: 60, Callers: 4, Burst: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Addresses, cfg.WorkerConcurrency, cfg.PayloadBytes = []string{srv.Addr}, 32, 16
			cfg.Warmup, cfg.ServerPID, cfg.MetricsURL = 4, srv.PID(), srv.MetricsURL
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			res, err := Run(ctx, cfg)
			if err != nil {
				t.Fatalf("Run: %v\nresult: %+v\nserver log:\n%s", err, res, srv.Log())
			}
			if res.Completed != cfg.Flows || res.Failures != 0 || res.Interrupted || res.Workload != cfg.Workload || res.Burst != cfg.Burst {
				t.Errorf("completed %d, failures %d, interrupted %v, workload %s, burst %v",
					res.Completed, res.Failures, res.Interrupted, res.Workload, res.Burst)
			}
			l := res.Latency
			if l.Count != cfg.Flows || l.Min <= 0 || l.Min > l.P50 || l.P50 > l.P95 || l.P95 > l.P99 || l.P99 > l.Max || l.Max > res.Elapsed {
				t.Errorf("latencies out of order: %+v (elapsed %v)", l, res.Elapsed)
			}
			if cfg.Workload == WorkloadTimer && l.Min < timer {
				t.Errorf("a timer flow completed in %v, before its %v timer", l.Min, timer)
			}
			if cfg.Burst != (res.StartElapsed > 0) || res.StartElapsed > res.Elapsed {
				t.Errorf("start phase %v of %v (burst %v)", res.StartElapsed, res.Elapsed, cfg.Burst)
			}
			wantSteps := map[Workload]int{WorkloadChain: cfg.Steps, WorkloadFanout: 1 + cfg.Branches, WorkloadTimer: 1, WorkloadSignal: 1}[cfg.Workload]
			if f, st := res.FlowsPerSecond(), res.StepsPerSecond(); res.StepsPerFlow != wantSteps || f <= 0 ||
				math.Abs(st-float64(wantSteps)*f) > 1e-9*st {
				t.Errorf("steps per flow %d (want %d), flows/s %v, steps/s %v", res.StepsPerFlow, wantSteps, f, st)
			}
			if res.CPU.Total() <= 0 || res.ServerCPU == nil {
				t.Errorf("CPU %+v, server CPU %v: want both measured", res.CPU, res.ServerCPU)
			}
			if res.PeakRSS <= 0 || res.ServerPeakRSS <= 0 {
				t.Errorf("peak RSS %d, server %d: want both measured", res.PeakRSS, res.ServerPeakRSS)
			}
			// The dev server exports the log batch counter; every measured
			// flow wrote at least one batch. The store's request and fsync
			// counters are checked once the server meters its store.
			st := res.Store
			if st == nil || res.MetricsError != "" {
				t.Fatalf("store counters not read: %q", res.MetricsError)
			}
			if !st.HasLogBatches || st.LogBatches < 1 {
				t.Errorf("log batches %v (present %v), want at least 1", st.LogBatches, st.HasLogBatches)
			}
			if st.HasRequests && st.Requests > 0 {
				if st.Puts < 1 || st.Puts+st.Gets > st.Requests {
					t.Errorf("%v PUTs and %v GETs of %v requests over %d flows", st.Puts, st.Gets, st.Requests, res.Completed)
				}
				if st.HasFsyncs && st.Fsyncs < 1 {
					t.Errorf("strict dev server: %v fsyncs over %d flows", st.Fsyncs, res.Completed)
				}
			}
			t.Logf("%s: %.0f flows/s, %.0f steps/s, p50 %v, p99 %v, CPU/flow %v + server %v, RSS %d/%d MiB, store %+v, took %v",
				tt.name, res.FlowsPerSecond(), res.StepsPerSecond(), l.P50, l.P99, res.CPU.Per(res.Completed),
				res.ServerCPU.Per(res.Completed), res.PeakRSS>>20, res.ServerPeakRSS>>20, *st, time.Since(start).Round(time.Millisecond))
		})
	}
	stopDev(t, srv)
}
