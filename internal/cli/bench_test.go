package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/bench"
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
func chainOutcome(t *testing.T, parent context.Context, output string, res bench.Result, runErr error) result {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, groups: groups()}
	g := a.findGroup("bench")
	s, err := newSession(a, &globals{server: "127.0.0.1:1", output: output}, g.find("chain"), false, []string{"bench", "chain"})
	if err != nil {
		t.Fatal(err)
	}
	code := s.finish(parent, s.benchOutcome(parent, res, runErr))
	return result{code: code, stdout: out.String(), stderr: errb.String()}
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
				r.wantCode(t, tt.wantCode)
				r.wantStderr(t, tt.stderr...)
				if format == "json" {
					var doc map[string]any
					dec := json.NewDecoder(strings.NewReader(r.stdout))
					if err := dec.Decode(&doc); err != nil {
						t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
					}
					if dec.More() {
						t.Fatalf("stdout holds more than one JSON document:\n%s", r.stdout)
					}
					if _, hasErr := doc["error"]; hasErr != (tt.err != nil) {
						t.Errorf("error field present: %v, want %v", hasErr, tt.err != nil)
					}
				}
				checkGolden(t, tt.name, format, r.stdout)
			})
		}
	}
}

func TestBenchChain_UsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--flows", "0"}, "--flows must be at least 1, not 0"},
		{[]string{"--steps", "-1"}, "--steps must be at least 1, not -1"},
		{[]string{"--callers", "0"}, "--callers must be at least 1"},
		{[]string{"--worker-concurrency", "0"}, "--worker-concurrency must be at least 1"},
		{[]string{"--payload-bytes", "-5"}, "--payload-bytes must be at least 0"},
		{[]string{"--warmup", "-1"}, "invalid value"},
		{[]string{"--flow-type", ""}, "--flow-type is empty"},
		{[]string{"--server-pid", "2147483647"}, "--server-pid: read the CPU time of process 2147483647"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--metrics-url", "127.0.0.1:9090"}, `--metrics-url "127.0.0.1:9090" is not an http:// or https:// URL`},
		{[]string{"--branches", "2"}, "flag provided but not defined: -branches"},
	}
	for _, tt := range tests {
		r := runCLI(t, append([]string{"bench", "chain", "--server", "127.0.0.1:1"}, tt.args...)...)
		r.wantCode(t, exitUsage)
		r.wantStderr(t, tt.want, "usage: dexcli bench chain [flags]")
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"fanout", "--branches", "0"}, "--branches must be at least 1, not 0"},
		{[]string{"fanout", "--steps", "2"}, "flag provided but not defined: -steps"},
		{[]string{"timer", "--timer", "500us"}, "--timer must be at least 1ms, not 500µs"},
		{[]string{"signal", "--callers", "0"}, "--callers must be at least 1"},
		{[]string{"signal", "--burst=maybe"}, "invalid boolean value"},
	} {
		r := runCLI(t, append([]string{"bench", tt.args[0], "--server", "127.0.0.1:1"}, tt.args[1:]...)...)
		r.wantCode(t, exitUsage)
		r.wantStderr(t, tt.want, "usage: dexcli bench "+tt.args[0]+" [flags]")
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

func TestBenchChain_Help(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "help")
	r.wantCode(t, exitOK)
	r.wantStdout(t, "bench chain")
	r = runCLI(t, "bench", "chain", "--help")
	r.wantCode(t, exitOK)
	r.wantStdout(t, "--flows N", "--warmup N", "default min(100, flows/10)", "--server-pid PID", "--metrics-url URL", "--burst", "Ctrl-C")
	for w, flag := range map[string]string{"fanout": "--branches F", "timer": "--timer DURATION", "signal": "publishes"} {
		r = runCLI(t, "bench", w, "--help")
		r.wantCode(t, exitOK)
		r.wantStdout(t, "dexcli bench "+w+" [flags]", flag, "--burst", "--metrics-url URL")
	}
}

// Without a server the run stops at --timeout, before any flow, with the
// usual error document.
func TestBenchChain_NoServer(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "bench", "chain", "--server", "127.0.0.1:1", "--timeout", "300ms", "-o", "json")
	r.wantCode(t, exitFailure)
	r.wantStdout(t, `"code": "DEADLINE_EXCEEDED"`)
	if strings.Contains(r.stdout, "completed") {
		t.Errorf("a run that started no flow printed results:\n%s", r.stdout)
	}
}

// The command end to end against the real dev server: a complete run, then
// a run interrupted as Ctrl-C does.
func TestBenchChain_DevServer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs dex-server-zd")
	}
	dir := t.TempDir()
	bin := dir + "/dex-server-zd"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := bench.BuildServer(ctx, bin); err != nil {
		t.Fatal(err)
	}
	srv, err := bench.StartDevServer(ctx, bench.DevOptions{Binary: bin, DataDir: dir + "/data", Durability: "processCrashSafe"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)

	var out, errb bytes.Buffer
	code := run(ctx, []string{"bench", "chain", "--server", srv.Addr, "--flows", "60", "--callers", "4", "--steps", "2",
		"--payload-bytes", "10", "--server-pid", fmt.Sprint(srv.PID()), "-o", "json"}, &out, &errb, os.Getenv)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	var doc struct {
		Completed, Failures, Warmup int
		FlowsPerSecond              float64
		LatencyMs                   struct{ P99 float64 }
		ServerCPU                   *struct{ Pid int } `json:"serverCpu"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if doc.Completed != 60 || doc.Failures != 0 || doc.Warmup != 6 || doc.FlowsPerSecond <= 0 || doc.LatencyMs.P99 <= 0 ||
		doc.ServerCPU == nil || doc.ServerCPU.Pid != srv.PID() {
		t.Errorf("unexpected result:\n%s", out.String())
	}

	// Ctrl-C: the command's context ends midway.
	ictx, interrupt := context.WithCancel(ctx)
	out.Reset()
	errb.Reset()
	done := make(chan int)
	go func() {
		done <- run(ictx, []string{"bench", "chain", "--server", srv.Addr, "--flows", "1000000", "--warmup", "0",
			"--flow-type", "bench-interrupted", "-o", "json"}, &out, &errb, os.Getenv)
	}()
	waitCompleted(t, srv.Addr, "bench-interrupted", 20)
	interrupt()
	select {
	case code = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("bench chain did not stop within 20s of the interruption")
	}
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitInterrupted, out.String(), errb.String())
	}
	var idoc struct {
		Error       struct{ Code string }
		Interrupted bool
		Completed   int
	}
	if err := json.Unmarshal(out.Bytes(), &idoc); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if idoc.Error.Code != "CANCELLED" || !idoc.Interrupted || idoc.Completed == 0 {
		t.Errorf("unexpected result after the interruption:\n%s", out.String())
	}
	if err := srv.Stop(30 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, srv.Log())
	}
}

// waitCompleted waits until n flows of flowType have completed.
func waitCompleted(t *testing.T, addr, flowType string, n int) {
	t.Helper()
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := c.ListFlows(ctx, dex.FlowQuery{FlowType: flowType, Statuses: []dex.FlowStatus{dex.StatusCompleted}, PageSize: n})
		cancel()
		if err == nil && len(l.Flows) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d flows of %s not completed within 30s (last error %v)", n, flowType, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
