package benchcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/dexzd/dexzd/internal/bench"
	"github.com/dexzd/dexzd/internal/cli/clitest"
	"github.com/dexzd/dexzd/internal/cli/session"
)

func fixtureChainResult() bench.Result {
	return bench.Result{
		Workload: bench.WorkloadChain, FlowType: "bench-chain", Flows: 2000, Steps: 3, StepsPerFlow: 3,
		Callers: 32, WorkerConcurrency: 64, Warmup: 100,
		FlowIDPrefix: "bench-chain-1a2b3c4d-",
		Completed:    2000,
		Elapsed:      4*time.Second + 250*time.Millisecond,
		Latency: bench.Latency{
			Count: 2000, Min: 5 * time.Millisecond, Mean: 60500 * time.Microsecond, P50: 55 * time.Millisecond,
			P95: 90250 * time.Microsecond, P99: 120125 * time.Microsecond, Max: 150 * time.Millisecond,
		},
		CPU:       bench.CPUTime{User: 2500 * time.Millisecond, System: 500 * time.Millisecond},
		ServerPID: 4242,
		ServerCPU: &bench.CPUTime{User: 6 * time.Second, System: 2 * time.Second},
		PeakRSS:   48 << 20, ServerPeakRSS: 96 << 20,
	}
}

// chainOutcome runs the outcome of a chain run through a session, as the
// command does, and returns the exit code with what was printed. parent
// stands for the run's context (cancelled for Ctrl-C).
func chainOutcome(t *testing.T, parent context.Context, output string, res bench.Result, runErr error) clitest.Result {
	t.Helper()
	var out, errb bytes.Buffer
	env := &session.Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" },
		Globals: session.Globals{Server: "127.0.0.1:1", Output: output}}
	s, err := session.New(env, 0, false, []string{"bench", "chain"})
	if err != nil {
		t.Fatal(err)
	}
	code := session.ExitCode(s.Finish(parent, benchOutcome(parent, s, res, runErr)))
	return clitest.Result{Code: code, Stdout: out.String(), Stderr: errb.String()}
}

func TestBench_Output(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	failed := fixtureChainResult()
	failed.Completed, failed.Failures, failed.ServerCPU, failed.ServerPID = 1998, 2, nil, 0
	failed.FailureSamples = []string{
		"bench-chain-1a2b3c4d-117: wrong output: value 117002, want 117003 (started at 117000 with 3 steps)",
		"bench-chain-1a2b3c4d-1204: flow ended FAILED: WORKER_API_FAIL: boom",
	}
	fanout := fixtureChainResult()
	fanout.Workload, fanout.FlowType, fanout.FlowIDPrefix = bench.WorkloadFanout, "bench-fanout", "bench-fanout-1a2b3c4d-"
	fanout.Steps, fanout.Branches, fanout.StepsPerFlow, fanout.Burst = 0, 4, 5, true
	fanout.StartElapsed = 1250 * time.Millisecond
	// 2000 flows of 5 steps: 3.5 PUTs and 0.25 GETs per flow; no fsync
	// counter.
	fanout.Store = &bench.StoreCounts{Puts: 7000, Gets: 500, Requests: 7600, HasRequests: true, LogBatches: 3000, HasLogBatches: true}
	timer := fixtureChainResult()
	timer.Workload, timer.FlowType, timer.FlowIDPrefix = bench.WorkloadTimer, "bench-timer", "bench-timer-1a2b3c4d-"
	timer.Steps, timer.StepsPerFlow, timer.Timer, timer.ServerCPU, timer.ServerPID, timer.ServerPeakRSS = 0, 1, time.Second, nil, 0, 0
	timer.MetricsError = "read metrics: GET http://127.0.0.1:1/metrics: 404 Not Found"
	signal := fixtureChainResult()
	signal.Workload, signal.FlowType, signal.FlowIDPrefix = bench.WorkloadSignal, "bench-signal", "bench-signal-1a2b3c4d-"
	signal.Steps, signal.StepsPerFlow = 0, 1
	signal.Store = &bench.StoreCounts{Fsyncs: 3000, HasFsyncs: true}

	interrupted := fixtureChainResult()
	interrupted.Completed, interrupted.Interrupted, interrupted.ServerCPU, interrupted.ServerPID = 812, true, nil, 0
	interrupted.Elapsed = 1500 * time.Millisecond

	tests := []struct {
		name     string
		parent   context.Context
		res      bench.Result
		err      error
		wantCode int
		stderr   []string
	}{
		{"bench_chain", context.Background(), fixtureChainResult(), nil, exitOK, nil},
		{"bench_fanout_burst", context.Background(), fanout, nil, exitOK, nil},
		{"bench_timer_metrics_error", context.Background(), timer, nil, exitOK, nil},
		{"bench_signal_fsyncs", context.Background(), signal, nil, exitOK, nil},
		{"bench_chain_failed", context.Background(), failed,
			fmt.Errorf("bench: 2 of 2100 flows failed (0 in the warmup), first: x: %w", bench.ErrFlowsFailed), exitFailure,
			[]string{"bench chain: 2 of 2100 flows failed", "dexcli flow describe FLOW_ID"}},
		{"bench_chain_interrupted", cancelled, interrupted,
			fmt.Errorf("bench: interrupted after 812 of 2000 measured flows: %w", context.Canceled), exitInterrupted,
			[]string{"bench chain: CANCELLED: interrupted after 812 of 2000 measured flows", "the figures cover the flows that finished"}},
	}
	for _, tt := range tests {
		for _, format := range []string{"table", "json"} {
			t.Run(tt.name+"/"+format, func(t *testing.T) {
				t.Parallel()
				r := chainOutcome(t, tt.parent, format, tt.res, tt.err)
				r.WantCode(t, tt.wantCode)
				r.WantStderr(t, tt.stderr...)
				if format == "json" {
					var doc map[string]any
					dec := json.NewDecoder(strings.NewReader(r.Stdout))
					if err := dec.Decode(&doc); err != nil {
						t.Fatalf("stdout is not JSON: %v\n%s", err, r.Stdout)
					}
					if dec.More() {
						t.Fatalf("stdout holds more than one JSON document:\n%s", r.Stdout)
					}
					if _, hasErr := doc["error"]; hasErr != (tt.err != nil) {
						t.Errorf("error field present: %v, want %v", hasErr, tt.err != nil)
					}
				}
				clitest.CheckGolden(t, tt.name, format, r.Stdout)
			})
		}
	}
}

func TestBench_ProgressText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p     bench.Progress
		burst bool
		want  string
	}{
		{bench.Progress{Warmup: true, Done: 50, Total: 100, Elapsed: 1500 * time.Millisecond}, false,
			"warmup   [###############...............]  50/100  50%  0 failed  1s"},
		{bench.Progress{Done: 612, Total: 2000, Failures: 2, Elapsed: 2 * time.Second}, false,
			"measured [#########.....................]  612/2000  31%  306 flows/s  2 failed  2s"},
		{bench.Progress{Done: 0, Total: 2000, Started: 1500, Elapsed: 500 * time.Millisecond}, true,
			"measured [..............................]    0/2000   0%  started 1500  0 flows/s  0 failed  0s"},
		{bench.Progress{Done: 7, Total: 7, Elapsed: time.Second}, false,
			"measured [##############################] 7/7 100%  7 flows/s  0 failed  1s"},
	}
	for _, tt := range tests {
		if got := progressText(tt.p, tt.burst); got != tt.want {
			t.Errorf("progressText(%+v, %v)\n got %q\nwant %q", tt.p, tt.burst, got, tt.want)
		}
	}
}

// A run with --large-fraction reports the ordinary flows apart from the
// large ones: flows/s and latency of the ordinary flows, count, flows/s
// and latency of the large ones.
func TestBench_LargeOutput(t *testing.T) {
	t.Parallel()
	res := fixtureChainResult()
	res.LargeFraction, res.LargePayloadBytes = 0.01, bench.MaxLargePayloadBytes
	// 2000 completed flows: 1980 ordinary (Latency), 20 large (Large).
	res.Latency.Count = 1980
	res.Large = bench.Latency{Count: 20, Min: 80 * time.Millisecond, Mean: 140 * time.Millisecond,
		P50: 130 * time.Millisecond, P95: 240 * time.Millisecond, P99: 250500 * time.Microsecond, Max: 250500 * time.Microsecond}
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			r := chainOutcome(t, context.Background(), format, res, nil)
			r.WantCode(t, exitOK)
			clitest.CheckGolden(t, "bench_chain_large", format, r.Stdout)
			if format == "table" {
				r.WantStdout(t, "2000 (1980 ordinary, 20 large)", "ordinary 465.9, large 4.7", "p99 250.500ms")
				return
			}
			var doc struct {
				LargeFraction          *float64
				LargePayloadBytes      *int
				OrdinaryCompleted      *int
				OrdinaryFlowsPerSecond *float64
				LatencyMs              struct{ P99 float64 }
				Large                  *struct {
					Planned, Completed int
					FlowsPerSecond     float64
					LatencyMs          struct{ P50, P99 float64 }
				}
			}
			if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
				t.Fatalf("%v\n%s", err, r.Stdout)
			}
			if doc.LargeFraction == nil || *doc.LargeFraction != 0.01 || doc.LargePayloadBytes == nil || *doc.LargePayloadBytes != bench.MaxLargePayloadBytes ||
				doc.OrdinaryCompleted == nil || *doc.OrdinaryCompleted != 1980 || doc.OrdinaryFlowsPerSecond == nil || *doc.OrdinaryFlowsPerSecond != 465.882 ||
				doc.LatencyMs.P99 != 120.125 || doc.Large == nil || doc.Large.Planned != 20 || doc.Large.Completed != 20 ||
				doc.Large.FlowsPerSecond != 4.706 || doc.Large.LatencyMs.P50 != 130 || doc.Large.LatencyMs.P99 != 250.5 {
				t.Errorf("the figures are not split as expected:\n%s", r.Stdout)
			}
		})
	}
	// Without large flows the split fields are null.
	r := chainOutcome(t, context.Background(), "json", fixtureChainResult(), nil)
	r.WantStdout(t, `"largeFraction": null`, `"ordinaryFlowsPerSecond": null`, `"large": null`)
}

// The flags that pass validation reach bench.Config: the default size
// is the largest, and a size with a suffix is read in bytes.
func TestBenchChain_LargeConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args         []string
		wantFraction float64
		wantBytes    int
	}{
		{nil, 0, 0},
		{[]string{"--large-fraction", "0.01"}, 0.01, bench.MaxLargePayloadBytes},
		{[]string{"--large-fraction", "1", "--large-payload-bytes", "512KiB"}, 1, 512 << 10},
		{[]string{"--large-fraction", "0.5", "--large-payload-bytes", "4095KiB"}, 0.5, 4095 << 10},
	} {
		env := &session.Env{Getenv: func(string) string { return "" }, Globals: session.Globals{Server: "127.0.0.1:1", Output: "table"}}
		s, err := session.New(env, 0, false, []string{"bench", "chain"})
		if err != nil {
			t.Fatal(err)
		}
		fs := pflag.NewFlagSet("chain", pflag.ContinueOnError)
		o := newBenchOptions(bench.WorkloadChain, fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		cfg, err := o.config(s)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if cfg.LargeFraction != tt.wantFraction || cfg.LargePayloadBytes != tt.wantBytes {
			t.Errorf("%v: LargeFraction %v, LargePayloadBytes %d; want %v, %d", tt.args, cfg.LargeFraction, cfg.LargePayloadBytes, tt.wantFraction, tt.wantBytes)
		}
	}
}

// An open-loop run (--rate) prints its accepted and refused starts.
func TestBench_OpenLoopOutput(t *testing.T) {
	t.Parallel()
	res := fixtureChainResult()
	res.Rate, res.Duration = 10000, time.Minute
	res.Flows, res.Offered, res.Accepted, res.Refused, res.Skipped, res.Completed = 600000, 600000, 70000, 520000, 10000, 70000
	res.OfferElapsed = time.Minute
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			r := chainOutcome(t, context.Background(), format, res, nil)
			r.WantCode(t, exitOK)
			clitest.CheckGolden(t, "bench_chain_open", format, r.Stdout)
		})
	}
}
