package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/dex"
)

// ErrFlowsFailed is returned, with the Result, when at least one flow
// failed: it got an error, ended other than COMPLETED, or completed with a
// wrong output.
var ErrFlowsFailed = errors.New("flows failed")

// maxFailureSamples bounds Result.FailureSamples.
const maxFailureSamples = 10

// ChainConfig configures RunChain.
type ChainConfig struct {
	// Addresses are the servers' API addresses, in order of preference.
	Addresses []string
	// DialOptions are added to the SDK's default dial options (plain gRPC
	// without TLS).
	DialOptions []grpc.DialOption
	// FlowType is the chain flow's type name and the prefix of its flow
	// IDs; default DefaultChainFlowType.
	FlowType string
	// Flows is the number of measured flows (at least 1).
	Flows int
	// Steps is the number of steps of every flow (at least 1).
	Steps int
	// Callers is the number of closed-loop callers (at least 1).
	Callers int
	// WorkerConcurrency is the worker's MaxConcurrentTasks (at least 1).
	WorkerConcurrency int
	// Warmup is the number of flows run before the measured ones and not
	// measured; DefaultWarmup suggests one.
	Warmup int
	// PayloadBytes is the size of the payload every step carries.
	PayloadBytes int
	// ServerPID, when positive, names the server process whose CPU time is
	// measured too (Linux: it must run on this machine).
	ServerPID int
	// Logger receives the SDK's logs (worker and client); nil discards them.
	Logger *slog.Logger
	// Progress, when set, is called every ProgressInterval (default 250 ms)
	// from another goroutine while flows run.
	Progress         func(Progress)
	ProgressInterval time.Duration
	// ReadyTimeout bounds the wait for a server to report dex.FlowService
	// SERVING before any flow starts; default 10 s.
	ReadyTimeout time.Duration
}

// DefaultWarmup is the default number of warmup flows for n measured
// flows: a tenth of them, at most 100.
func DefaultWarmup(n int) int { return max(min(100, n/10), 0) }

// Progress is a run's state while it runs.
type Progress struct {
	// Warmup is true during the warmup phase.
	Warmup bool
	// Done counts the phase's finished flows (completed or failed) out of
	// Total; Failures the failed ones.
	Done, Total, Failures int
	// Elapsed is the time since the phase began.
	Elapsed time.Duration
}

// Result is what a run measured. When the run was interrupted it covers
// the flows that finished before.
type Result struct {
	// The run's parameters, defaults applied.
	FlowType                                                       string
	Flows, Steps, Callers, WorkerConcurrency, Warmup, PayloadBytes int
	// FlowIDPrefix starts every flow ID of the run ("<FlowType>-<tag>-").
	FlowIDPrefix string

	// Completed counts the measured flows that completed with the right
	// output; Failures the measured flows that did not; WarmupFailures the
	// warmup flows that did not.
	Completed, Failures, WarmupFailures int
	// FailureSamples describe the first failures ("flow ID: what went
	// wrong"), warmup or measured, at most 10.
	FailureSamples []string
	// Interrupted is true when the run stopped before all its flows ran
	// (the context ended, the worker was refused, the server went away).
	Interrupted bool
	// Elapsed is the duration of the measured phase.
	Elapsed time.Duration
	// Latency summarises the completed measured flows' latencies.
	Latency Latency
	// CPU is this process's CPU time over the measured phase.
	CPU CPUTime
	// ServerPID is ChainConfig.ServerPID; ServerCPU its CPU time over the
	// measured phase, nil when not measured.
	ServerPID int
	ServerCPU *CPUTime
}

// FlowsPerSecond is Completed over Elapsed.
func (r Result) FlowsPerSecond() float64 { return rate(r.Completed, r.Elapsed) }

// StepsPerSecond is Completed × Steps over Elapsed.
func (r Result) StepsPerSecond() float64 { return rate(r.Completed*r.Steps, r.Elapsed) }

func (c *ChainConfig) applyDefaults() error {
	if c.FlowType == "" {
		c.FlowType = DefaultChainFlowType
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = 250 * time.Millisecond
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	for _, f := range []struct {
		name     string
		v, least int
	}{
		{"Flows", c.Flows, 1}, {"Steps", c.Steps, 1}, {"Callers", c.Callers, 1},
		{"WorkerConcurrency", c.WorkerConcurrency, 1}, {"Warmup", c.Warmup, 0},
		{"PayloadBytes", c.PayloadBytes, 0}, {"ServerPID", c.ServerPID, 0},
	} {
		if f.v < f.least {
			errs = append(errs, fmt.Errorf("%s is %d, want at least %d", f.name, f.v, f.least))
		}
	}
	if len(c.Addresses) == 0 {
		errs = append(errs, errors.New("no server address"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: invalid configuration: %w", err)
	}
	return nil
}

// RunChain runs the chain workload (see the package documentation) and
// returns what it measured. The error is nil when every flow completed with
// the right output. Otherwise the Result still holds what was measured, and
// the error says why: ErrFlowsFailed when flows failed, the context's error
// when ctx ended first, or the failure that stopped the run (no server
// serving, the worker refused, the server unavailable).
func RunChain(ctx context.Context, cfg ChainConfig) (Result, error) {
	if err := cfg.applyDefaults(); err != nil {
		return Result{}, err
	}
	tag := dex.NewRequestID()[:8]
	res := Result{
		FlowType: cfg.FlowType, Flows: cfg.Flows, Steps: cfg.Steps, Callers: cfg.Callers,
		WorkerConcurrency: cfg.WorkerConcurrency, Warmup: cfg.Warmup, PayloadBytes: cfg.PayloadBytes,
		FlowIDPrefix: cfg.FlowType + "-" + tag + "-", ServerPID: cfg.ServerPID,
	}
	if cfg.ServerPID > 0 {
		if _, err := ProcessCPU(cfg.ServerPID); err != nil {
			return res, fmt.Errorf("bench: %w", err)
		}
	}
	if err := waitServing(ctx, cfg.Addresses, cfg.DialOptions, cfg.ReadyTimeout); err != nil {
		return res, err
	}
	client, err := dex.Dial(ctx, dex.ClientOptions{Addresses: cfg.Addresses, DialOptions: cfg.DialOptions, Logger: cfg.Logger})
	if err != nil {
		return res, fmt.Errorf("bench: client: %w", err)
	}
	defer client.Close()
	flow := ChainFlow(cfg.FlowType)
	worker, err := dex.NewWorker(dex.WorkerOptions{
		Addresses: cfg.Addresses, DialOptions: cfg.DialOptions, Logger: cfg.Logger,
		WorkerID: "bench-" + tag, MaxConcurrentTasks: cfg.WorkerConcurrency, DrainTimeout: time.Second,
	}, flow)
	if err != nil {
		return res, fmt.Errorf("bench: worker: %w", err)
	}

	// runCtx ends with ctx, or with the cause that stops the run early.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	// The worker stops when RunChain returns, after the callers. Its drain
	// is short: the chain's tasks take microseconds, and the tasks of
	// flows that an interruption abandoned need not finish.
	workerCtx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		if err := worker.Run(workerCtx); err != nil {
			stopRun(fmt.Errorf("bench: %w", err))
		}
	}()
	defer func() {
		stopWorker()
		<-workerDone
	}()

	r := &runner{cfg: cfg, client: client, flow: flow, idPrefix: res.FlowIDPrefix,
		pad: strings.Repeat("x", cfg.PayloadBytes), stop: stopRun}
	stopProgress := r.reportProgress()
	defer stopProgress()

	warm := r.phase(runCtx, 0, cfg.Warmup, true)
	res.WarmupFailures = int(warm.failures.Load())

	var measured *phase
	if runCtx.Err() == nil {
		cpu0, cpuErr := SelfCPU()
		var srv0 CPUTime
		srvErr := errors.New("not measured")
		if cfg.ServerPID > 0 {
			srv0, srvErr = ProcessCPU(cfg.ServerPID)
		}
		t0 := time.Now()
		measured = r.phase(runCtx, cfg.Warmup, cfg.Flows, false)
		res.Elapsed = time.Since(t0)
		if cpu1, err := SelfCPU(); err == nil && cpuErr == nil {
			res.CPU = cpu1.Sub(cpu0)
		}
		if srvErr == nil {
			if srv1, err := ProcessCPU(cfg.ServerPID); err == nil {
				c := srv1.Sub(srv0)
				res.ServerCPU = &c
			}
		}
		res.Completed = len(measured.latencies)
		res.Failures = int(measured.failures.Load())
		res.Latency = Summarize(measured.latencies)
	}
	res.FailureSamples = slices.Concat(warm.samples, measured.failureSamples())
	res.FailureSamples = res.FailureSamples[:min(len(res.FailureSamples), maxFailureSamples)]

	if done := res.Completed + res.Failures; done < cfg.Flows {
		res.Interrupted = true
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("bench: interrupted after %d of %d measured flows: %w", done, cfg.Flows, err)
		}
		// Only a cancellation with a cause stops the callers otherwise.
		return res, fmt.Errorf("bench: stopped after %d of %d measured flows: %w", done, cfg.Flows, context.Cause(runCtx))
	}
	if n := res.Failures + res.WarmupFailures; n > 0 {
		return res, fmt.Errorf("bench: %d of %d flows failed (%d in the warmup), first: %s: %w",
			n, cfg.Flows+cfg.Warmup, res.WarmupFailures, res.FailureSamples[0], ErrFlowsFailed)
	}
	return res, nil
}

// runner runs the flows of one RunChain.
type runner struct {
	cfg      ChainConfig
	client   *dex.Client
	flow     *dex.Flow
	idPrefix string
	pad      string
	stop     context.CancelCauseFunc

	current atomic.Pointer[phase]
}

// phase is one phase of a run: warmup or measured.
type phase struct {
	warmup  bool
	total   int
	started time.Time
	next    atomic.Int64 // the next flow to start, from 0
	done    atomic.Int64
	// failures counts the failed flows; samples describes the first ones.
	failures  atomic.Int64
	mu        sync.Mutex
	latencies []time.Duration // of the completed flows
	samples   []string
}

func (p *phase) failureSamples() []string {
	if p == nil {
		return nil
	}
	return p.samples
}

// phase runs n flows, numbered from first, with the configured callers,
// and returns when they have all finished or ctx ended.
func (r *runner) phase(ctx context.Context, first, n int, warmup bool) *phase {
	p := &phase{warmup: warmup, total: n, started: time.Now(), latencies: make([]time.Duration, 0, n)}
	if n == 0 {
		return p
	}
	r.current.Store(p)
	var wg sync.WaitGroup
	for range min(r.cfg.Callers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(p.next.Add(1)) - 1
				if i >= n {
					return
				}
				r.runFlow(ctx, p, first+i)
			}
		})
	}
	wg.Wait()
	return p
}

// runFlow runs flow number i and records its outcome in p. A flow that ctx
// interrupted counts as neither completed nor failed.
func (r *runner) runFlow(ctx context.Context, p *phase, i int) {
	id := r.idPrefix + fmt.Sprint(i)
	start := int64(i) * 1000
	t0 := time.Now()
	err := r.chain(ctx, id, start)
	lat := time.Since(t0)
	if err != nil && ctx.Err() != nil {
		return
	}
	if status.Code(err) == codes.Unavailable {
		// The SDK retried the call for its RetryTimeout: the server is
		// gone, and every further flow would wait as long.
		r.stop(fmt.Errorf("flow %s: %w", id, err))
	}
	p.done.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.latencies = append(p.latencies, lat)
		return
	}
	p.failures.Add(1)
	if len(p.samples) < maxFailureSamples {
		p.samples = append(p.samples, id+": "+err.Error())
	}
}

// chain starts one flow, waits for its result and checks it.
func (r *runner) chain(ctx context.Context, id string, start int64) error {
	run, err := r.client.StartFlow(ctx, r.flow, id, ChainInput{Value: start, Left: r.cfg.Steps, Pad: r.pad})
	if err != nil {
		return err
	}
	res, err := r.client.WaitForFlow(ctx, id, dex.WithRunID(run.RunID))
	if err != nil {
		return err
	}
	if res.Status != dex.StatusCompleted {
		if ferr := res.Err(); ferr != nil {
			return fmt.Errorf("flow ended %s: %w", strings.TrimPrefix(res.Status.String(), "FLOW_STATUS_"), ferr)
		}
		return fmt.Errorf("flow ended %s", strings.TrimPrefix(res.Status.String(), "FLOW_STATUS_"))
	}
	out, err := dex.Output[ChainOutput](res)
	if err != nil {
		return fmt.Errorf("decode the output: %w", err)
	}
	if want := start + int64(r.cfg.Steps); out.Value != want {
		return fmt.Errorf("wrong output: value %d, want %d (started at %d with %d steps)", out.Value, want, start, r.cfg.Steps)
	}
	if out.Pad != r.pad {
		return fmt.Errorf("wrong output: the payload came back with %d bytes, want the %d sent", len(out.Pad), len(r.pad))
	}
	return nil
}

// reportProgress calls cfg.Progress periodically until the returned
// function is called.
func (r *runner) reportProgress() (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(r.cfg.ProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if p := r.current.Load(); p != nil {
				r.cfg.Progress(Progress{
					Warmup: p.warmup, Done: int(p.done.Load()), Total: p.total,
					Failures: int(p.failures.Load()), Elapsed: time.Since(p.started),
				})
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
