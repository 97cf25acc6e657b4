package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// End-to-end tests: they build the real dex-server-zd, run "dev" on a free
// port with a temporary data directory and drive it with RunChain.

var (
	buildOnce sync.Once
	serverBin string
	buildErr  error
)

// serverBinary builds cmd/dex-server-zd once per test binary.
func serverBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end tests build and run dex-server-zd")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dex-bench-bin-")
		if err != nil {
			buildErr = err
			return
		}
		serverBin = filepath.Join(dir, "dex-server-zd")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		buildErr = BuildServer(ctx, serverBin)
	})
	if buildErr != nil {
		t.Fatalf("build dex-server-zd: %v", buildErr)
	}
	return serverBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// RunChain stops every goroutine it starts (callers, worker,
		// client connections, progress).
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left running: %v\n", err)
			code = 1
		}
	}
	if serverBin != "" {
		_ = os.RemoveAll(filepath.Dir(serverBin))
	}
	os.Exit(code)
}

// startDev starts "dev" and waits until it serves; the cleanup kills it.
func startDev(t *testing.T, durability string) *DevServer {
	t.Helper()
	srv, err := StartDevServer(context.Background(), DevOptions{Binary: serverBinary(t), DataDir: t.TempDir(), Durability: durability})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	return srv
}

// stopDev sends SIGTERM and expects exit status 0.
func stopDev(t *testing.T, srv *DevServer) {
	t.Helper()
	if err := srv.Stop(30 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, srv.Log())
	}
}

func TestRunChain_DevServer(t *testing.T) {
	t.Parallel()
	for _, durability := range []string{"strict", "processCrashSafe"} {
		t.Run(durability, func(t *testing.T) {
			t.Parallel()
			srv := startDev(t, durability)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := RunChain(ctx, ChainConfig{
				Addresses: []string{srv.Addr}, Flows: 200, Steps: 3, Callers: 16,
				WorkerConcurrency: 64, Warmup: 20, PayloadBytes: 100, ServerPID: srv.PID(),
			})
			if err != nil {
				t.Fatalf("RunChain: %v\nresult: %+v\nserver log:\n%s", err, res, srv.Log())
			}
			if res.Completed != 200 || res.Failures != 0 || res.WarmupFailures != 0 || res.Interrupted {
				t.Errorf("completed %d, failures %d+%d, interrupted %v; want 200 completed",
					res.Completed, res.Failures, res.WarmupFailures, res.Interrupted)
			}
			l := res.Latency
			if l.Count != 200 || l.Min <= 0 || l.Min > l.P50 || l.P50 > l.P95 || l.P95 > l.P99 || l.P99 > l.Max || l.Max > res.Elapsed {
				t.Errorf("latencies out of order: %+v (elapsed %v)", l, res.Elapsed)
			}
			if f, st := res.FlowsPerSecond(), res.StepsPerSecond(); f <= 0 || math.Abs(st-3*f) > 1e-9*st {
				t.Errorf("flows/s %v, steps/s %v", f, st)
			}
			if res.CPU.Total() <= 0 || res.ServerCPU == nil {
				t.Fatalf("CPU %+v, server CPU %v: want both measured", res.CPU, res.ServerCPU)
			}
			t.Logf("%s: %.0f flows/s, %.0f steps/s, p50 %v, p99 %v, CPU/flow %v, server CPU/flow %v",
				durability, res.FlowsPerSecond(), res.StepsPerSecond(), l.P50, l.P99,
				res.CPU.Per(res.Completed), res.ServerCPU.Per(res.Completed))
			stopDev(t, srv)
		})
	}
}

// A run cancelled midway returns what it measured, with the context's
// error, and leaves the server able to stop cleanly.
func TestRunChain_CancelledReturnsPartialResult(t *testing.T) {
	t.Parallel()
	srv := startDev(t, "processCrashSafe")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	res, err := RunChain(ctx, ChainConfig{
		Addresses: []string{srv.Addr}, Flows: 1_000_000, Steps: 2, Callers: 8, WorkerConcurrency: 16,
		Progress: func(p Progress) {
			if !p.Warmup && p.Done >= 50 {
				cancel()
			}
		},
		ProgressInterval: 10 * time.Millisecond,
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunChain = %v, want context.Canceled", err)
	}
	if !res.Interrupted || res.Completed < 50 || res.Completed >= 1_000_000 || res.Failures != 0 || res.Elapsed <= 0 {
		t.Errorf("result: interrupted %v, completed %d, failures %d, elapsed %v",
			res.Interrupted, res.Completed, res.Failures, res.Elapsed)
	}
	if res.Latency.Count != res.Completed {
		t.Errorf("latency count %d, completed %d", res.Latency.Count, res.Completed)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("RunChain took %v to return after the cancellation", d)
	}
	stopDev(t, srv)
}

// Without a server, RunChain fails fast with UNAVAILABLE instead of
// retrying every flow.
func TestRunChain_NoServer(t *testing.T) {
	t.Parallel()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = RunChain(context.Background(), ChainConfig{
		Addresses: []string{addr}, Flows: 10, Steps: 1, Callers: 1, WorkerConcurrency: 1,
		ReadyTimeout: 300 * time.Millisecond,
	})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("RunChain = %v, want UNAVAILABLE", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("RunChain took %v to fail", d)
	}
}
