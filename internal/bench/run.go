package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
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

// Config configures Run.
type Config struct {
	// Workload is the workload to run; default WorkloadChain.
	Workload Workload
	// Addresses are the servers' API addresses, in order of preference.
	Addresses []string
	// DialOptions are added to the SDK's default dial options (plain gRPC
	// without TLS).
	DialOptions []grpc.DialOption
	// TracerProvider, when set, traces the driver's client calls and its
	// worker's attempts (dex.ClientOptions.TracerProvider).
	TracerProvider trace.TracerProvider
	// FlowType is the flow's type name and the prefix of its flow IDs;
	// default DefaultFlowType(Workload).
	FlowType string
	// Flows is the number of measured flows (at least 1).
	Flows int
	// Steps is the number of steps of every chain flow (chain: at least 1).
	Steps int
	// Branches is the number of parallel steps a fanout flow moves to
	// (fanout: at least 1).
	Branches int
	// Timer is the durable timer of every timer flow; default DefaultTimer.
	// It is sent in milliseconds.
	Timer time.Duration
	// Callers is the number of closed-loop callers (at least 1). With
	// Burst, the number of goroutines that start flows.
	Callers int
	// Burst starts every flow of a phase without waiting for results and
	// awaits each flow separately (a waiter per started flow), instead of
	// the closed loop.
	Burst bool
	// Rate, when positive, makes the measured phase open loop: Rate starts
	// per second for Duration, whatever the answers (rate.go); Flows is
	// then Rate × Duration. The warmup runs closed loop (or in a burst).
	Rate     float64
	Duration time.Duration
	// WorkerConcurrency is the worker's MaxConcurrentTasks (at least 1).
	WorkerConcurrency int
	// Warmup is the number of flows run before the measured ones and not
	// measured; DefaultWarmup suggests one.
	Warmup int
	// PayloadBytes is the size of the payload every step carries.
	PayloadBytes int
	// LargeFraction, in [0, 1], is the fraction of the flows that carry
	// LargePayloadBytes instead of PayloadBytes (large.go). LargePayloadBytes
	// is at most MaxLargePayloadBytes, its default when LargeFraction is
	// positive.
	LargeFraction     float64
	LargePayloadBytes int
	// ServerPID, when positive, names the server process whose CPU time and
	// peak RSS are measured too (Linux: it must run on this machine).
	ServerPID int
	// StoreCPU, when set, reads the CPU time the durable store's processes
	// (a PostgreSQL or MinIO on this machine) have used so far; Run reads it
	// at the start and at the end of the measured phase (Result.StoreCPU).
	StoreCPU func() (CPUTime, error)
	// MetricsURL, when set, is the server's Prometheus endpoint
	// (http://HOST:PORT/metrics): its store counters are read before and
	// after the measured phase (see StoreCounts).
	MetricsURL string
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

// ChainConfig is the configuration of RunChain: a Config whose Workload is
// chain (or empty).
type ChainConfig = Config

// DefaultWarmup is the default number of warmup flows for n measured
// flows: a tenth of them, at most 100.
func DefaultWarmup(n int) int { return max(min(100, n/10), 0) }

// Progress is a run's state while it runs.
type Progress struct {
	// Warmup is true during the warmup phase.
	Warmup bool
	// Done counts the phase's finished flows (completed or failed) out of
	// Total; Failures the failed ones; Started the flows whose start was
	// acknowledged (or failed).
	Done, Total, Failures, Started int
	// Elapsed is the time since the phase began.
	Elapsed time.Duration
}

// Result is what a run measured. When the run was interrupted it covers
// the flows that finished before.
type Result struct {
	// The run's parameters, defaults applied. Steps is set for chain,
	// Branches for fanout, Timer for timer (zero otherwise).
	Workload                                                       Workload
	FlowType                                                       string
	Flows, Steps, Callers, WorkerConcurrency, Warmup, PayloadBytes int
	Branches                                                       int
	Timer                                                          time.Duration
	Burst                                                          bool
	// LargeFraction and LargePayloadBytes are Config's (large.go).
	LargeFraction     float64
	LargePayloadBytes int
	// Rate and Duration are Config's, for an open-loop run. Accepted counts
	// its starts the server accepted, Refused those it refused with
	// RESOURCE_EXHAUSTED (neither a completion nor a failure); OfferElapsed
	// is the time over which the starts were offered.
	Rate              float64
	Duration          time.Duration
	Accepted, Refused int
	// Skipped counts the starts an open-loop run did not send because
	// MaxStartsInFlight were waiting for answers; Offered the starts it
	// sent or skipped (fewer than Flows when the run stopped early).
	Skipped, Offered int
	OfferElapsed     time.Duration
	// StepsPerFlow is the number of step executions of one flow: K for
	// chain, 1+F for fanout, 1 for timer and signal.
	StepsPerFlow int
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
	// Elapsed is the duration of the measured phase. StartElapsed, with
	// Burst, is the part of it until the last start was acknowledged.
	Elapsed, StartElapsed time.Duration
	// Latency summarises the latencies of the completed measured flows
	// without a large payload (all of them without LargeFraction); Large
	// those of the completed large ones (Large.Count of the Completed).
	Latency, Large Latency
	// CPU is this process's CPU time over the measured phase.
	CPU CPUTime
	// ServerPID is Config.ServerPID; ServerCPU its CPU time over the
	// measured phase, nil when not measured.
	ServerPID int
	ServerCPU *CPUTime
	// StoreCPU is the CPU time Config.StoreCPU measured over the measured
	// phase; nil when not measured.
	StoreCPU *CPUTime
	// PeakRSS and ServerPeakRSS are the peak resident set sizes (VmHWM, in
	// bytes, over each process's life) of this process and of the server,
	// read after the run; 0 when not measured.
	PeakRSS, ServerPeakRSS int64
	// Store is what the server's store counters grew by over the measured
	// phase; nil without MetricsURL or when they could not be read
	// (MetricsError says why).
	Store        *StoreCounts
	MetricsError string
}

// FlowsPerSecond is Completed over Elapsed.
func (r Result) FlowsPerSecond() float64 { return rate(r.Completed, r.Elapsed) }

// StepsPerSecond is Completed × StepsPerFlow over Elapsed.
func (r Result) StepsPerSecond() float64 { return rate(r.Completed*r.StepsPerFlow, r.Elapsed) }

func (c *Config) applyDefaults() error {
	if c.Workload == "" {
		c.Workload = WorkloadChain
	}
	if c.FlowType == "" {
		c.FlowType = DefaultFlowType(c.Workload)
	}
	if c.Workload == WorkloadTimer && c.Timer == 0 {
		c.Timer = DefaultTimer
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
	if c.Rate < 0 || c.Duration < 0 || (c.Rate > 0) != (c.Duration > 0) {
		errs = append(errs, fmt.Errorf("%s %g and %s %v: want both positive, or neither", "Rate", c.Rate, "Duration", c.Duration))
	} else if c.Rate > 0 {
		c.Flows = c.Offered()
	}
	checks := []struct {
		name     string
		v, least int
	}{
		{"Flows", c.Flows, 1}, {"Callers", c.Callers, 1},
		{"WorkerConcurrency", c.WorkerConcurrency, 1}, {"Warmup", c.Warmup, 0},
		{"PayloadBytes", c.PayloadBytes, 0}, {"ServerPID", c.ServerPID, 0},
	}
	switch c.Workload {
	case WorkloadChain:
		checks = append(checks, struct {
			name     string
			v, least int
		}{"Steps", c.Steps, 1})
	case WorkloadFanout:
		checks = append(checks, struct {
			name     string
			v, least int
		}{"Branches", c.Branches, 1})
	case WorkloadTimer:
		if c.Timer < time.Millisecond {
			errs = append(errs, fmt.Errorf("%s is %v, want at least 1ms", "Timer", c.Timer))
		}
	case WorkloadSignal:
	default:
		errs = append(errs, fmt.Errorf("unknown workload %q", c.Workload))
	}
	for _, f := range checks {
		if f.v < f.least {
			errs = append(errs, fmt.Errorf("%s is %d, want at least %d", f.name, f.v, f.least))
		}
	}
	errs = append(errs, c.checkLarge()...)
	if len(c.Addresses) == 0 {
		errs = append(errs, errors.New("no server address"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: invalid configuration: %w", err)
	}
	return nil
}

// RunChain runs Run with cfg's Workload set to chain.
func RunChain(ctx context.Context, cfg ChainConfig) (Result, error) {
	cfg.Workload = WorkloadChain
	return Run(ctx, cfg)
}

// Run runs cfg's workload (see the package documentation) and returns what
// it measured. The error is nil when every flow completed with the right
// output. Otherwise the Result still holds what was measured, and the error
// says why: ErrFlowsFailed when flows failed, the context's error when ctx
// ended first, or the failure that stopped the run (no server serving, the
// worker refused, the server unavailable).
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.applyDefaults(); err != nil {
		return Result{}, err
	}
	wl, err := newWorkload(&cfg)
	if err != nil {
		return Result{}, err
	}
	tag := dex.NewRequestID()[:8]
	res := Result{
		Workload: cfg.Workload, FlowType: cfg.FlowType, Flows: cfg.Flows, Callers: cfg.Callers,
		WorkerConcurrency: cfg.WorkerConcurrency, Warmup: cfg.Warmup, PayloadBytes: cfg.PayloadBytes,
		Burst: cfg.Burst, LargeFraction: cfg.LargeFraction, LargePayloadBytes: cfg.LargePayloadBytes, StepsPerFlow: wl.stepsPerFlow(), Rate: cfg.Rate, Duration: cfg.Duration,
		FlowIDPrefix: cfg.FlowType + "-" + tag + "-", ServerPID: cfg.ServerPID,
	}
	switch cfg.Workload {
	case WorkloadChain:
		res.Steps = cfg.Steps
	case WorkloadFanout:
		res.Branches = cfg.Branches
	case WorkloadTimer:
		res.Timer = cfg.Timer
	}
	if cfg.ServerPID > 0 {
		if _, err := ProcessCPU(cfg.ServerPID); err != nil {
			return res, fmt.Errorf("bench: %w", err)
		}
	}
	if err := waitServing(ctx, cfg.Addresses, cfg.DialOptions, cfg.ReadyTimeout); err != nil {
		return res, err
	}
	client, err := dex.NewClient(dex.ClientOptions{Addresses: cfg.Addresses, DialOptions: cfg.DialOptions, Logger: cfg.Logger,
		TracerProvider: cfg.TracerProvider})
	if err != nil {
		return res, fmt.Errorf("bench: client: %w", err)
	}
	defer client.Close()
	starter := client
	if cfg.Rate > 0 {
		// Refusals are counted, not retried: RetryTimeout ends the SDK's
		// back-off before its first retry.
		starter, err = dex.NewClient(dex.ClientOptions{Addresses: cfg.Addresses, DialOptions: cfg.DialOptions,
			Logger: cfg.Logger, RetryTimeout: time.Nanosecond, TracerProvider: cfg.TracerProvider})
		if err != nil {
			return res, fmt.Errorf("bench: client: %w", err)
		}
		defer starter.Close()
	}
	flow := wl.flow()
	worker, err := dex.NewWorker(dex.WorkerOptions{
		Addresses: cfg.Addresses, DialOptions: cfg.DialOptions, Logger: cfg.Logger,
		WorkerID: "bench-" + tag, MaxConcurrentTasks: cfg.WorkerConcurrency, DrainTimeout: time.Second,
		TracerProvider: cfg.TracerProvider,
	}, flow)
	if err != nil {
		return res, fmt.Errorf("bench: worker: %w", err)
	}

	// runCtx ends with ctx, or with the cause that stops the run early.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	// The worker stops when Run returns, after the callers. Its drain is
	// short: the workloads' tasks take microseconds, and the tasks of flows
	// that an interruption abandoned need not finish.
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

	r := &runner{cfg: cfg, wl: wl, client: client, flow: flow, idPrefix: res.FlowIDPrefix,
		pad: strings.Repeat("x", cfg.PayloadBytes), largePad: newLargePad(cfg), stop: stopRun}
	stopProgress := r.reportProgress()
	defer stopProgress()

	warm := r.phase(runCtx, 0, cfg.Warmup, true)
	res.WarmupFailures = int(warm.failures.Load())

	var measured *phase
	if runCtx.Err() == nil {
		var store0 *StoreCounts
		if cfg.MetricsURL != "" {
			if store0, err = ReadStoreCounts(runCtx, cfg.MetricsURL); err != nil {
				res.MetricsError = err.Error()
			}
		}
		cpu0, cpuErr := SelfCPU()
		var srv0 CPUTime
		srvErr := errors.New("not measured")
		if cfg.ServerPID > 0 {
			srv0, srvErr = ProcessCPU(cfg.ServerPID)
		}
		var st0 CPUTime
		stErr := errors.New("not measured")
		if cfg.StoreCPU != nil {
			st0, stErr = cfg.StoreCPU()
		}
		if cfg.Rate > 0 {
			measured = r.ratePhase(runCtx, starter, cfg.Warmup)
		} else {
			measured = r.phase(runCtx, cfg.Warmup, cfg.Flows, false)
		}
		if stErr == nil {
			if st1, err := cfg.StoreCPU(); err == nil {
				c := st1.Sub(st0)
				res.StoreCPU = &c
			}
		}
		res.Elapsed, res.StartElapsed = measured.elapsed, measured.startElapsed
		if cpu1, err := SelfCPU(); err == nil && cpuErr == nil {
			res.CPU = cpu1.Sub(cpu0)
		}
		if srvErr == nil {
			if srv1, err := ProcessCPU(cfg.ServerPID); err == nil {
				c := srv1.Sub(srv0)
				res.ServerCPU = &c
			}
		}
		if store0 != nil {
			// The counters are read even when the run was interrupted, with
			// a context of their own.
			mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			store1, err := ReadStoreCounts(mctx, cfg.MetricsURL)
			cancel()
			if err != nil {
				res.MetricsError = err.Error()
			} else {
				d := store1.Sub(*store0)
				res.Store = &d
			}
		}
		res.Completed = len(measured.latencies) + len(measured.largeLatencies)
		res.Failures = int(measured.failures.Load())
		res.Accepted, res.Refused = int(measured.accepted.Load()), int(measured.refused.Load())
		res.Skipped, res.Offered = int(measured.skipped.Load()), int(measured.next.Load())
		res.OfferElapsed = measured.offerElapsed
		res.Latency = Summarize(measured.latencies)
		res.Large = Summarize(measured.largeLatencies)
	}
	if rss, err := PeakRSS(os.Getpid()); err == nil {
		res.PeakRSS = rss
	}
	if cfg.ServerPID > 0 {
		if rss, err := PeakRSS(cfg.ServerPID); err == nil {
			res.ServerPeakRSS = rss
		}
	}
	res.FailureSamples = slices.Concat(warm.samples, measured.failureSamples())
	res.FailureSamples = res.FailureSamples[:min(len(res.FailureSamples), maxFailureSamples)]

	if done := res.Completed + res.Failures + res.Refused + res.Skipped; done < cfg.Flows {
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

// runner runs the flows of one Run.
type runner struct {
	cfg      Config
	wl       workload
	client   *dex.Client
	flow     *dex.Flow
	idPrefix string
	// pad is the ordinary flows' payload, largePad the large ones'.
	pad, largePad string
	stop          context.CancelCauseFunc

	current atomic.Pointer[phase]
}

// phase is one phase of a run: warmup or measured.
type phase struct {
	warmup  bool
	total   int
	started time.Time
	next    atomic.Int64 // the next flow to start, from 0
	starts  atomic.Int64 // flows whose start returned
	done    atomic.Int64
	// failures counts the failed flows; samples describes the first ones.
	failures atomic.Int64
	// accepted and refused count an open-loop phase's starts (rate.go);
	// offerElapsed is the time over which it offered them.
	accepted, refused, skipped atomic.Int64
	offerElapsed               time.Duration
	mu                         sync.Mutex
	latencies                  []time.Duration // of the completed ordinary flows
	largeLatencies             []time.Duration // of the completed large flows
	samples                    []string
	// elapsed is the phase's duration; startElapsed, in a burst, the time
	// until the last start returned.
	elapsed, startElapsed time.Duration
}

func (p *phase) failureSamples() []string {
	if p == nil {
		return nil
	}
	return p.samples
}

// phase runs n flows, numbered from first, closed loop or in a burst, and
// returns when they have all finished or ctx ended.
func (r *runner) phase(ctx context.Context, first, n int, warmup bool) *phase {
	p := &phase{warmup: warmup, total: n, started: time.Now(), latencies: make([]time.Duration, 0, n)}
	if n == 0 {
		return p
	}
	r.current.Store(p)
	var callers, waiters sync.WaitGroup
	for range min(r.cfg.Callers, n) {
		callers.Go(func() {
			for ctx.Err() == nil {
				i := int(p.next.Add(1)) - 1
				if i >= n {
					return
				}
				id := r.idPrefix + fmt.Sprint(first+i)
				pad, large := r.payload(i)
				t0 := time.Now()
				runID, err := r.wl.start(ctx, r.client, r.flow, id, first+i, pad)
				p.starts.Add(1)
				if err != nil {
					r.record(ctx, p, id, 0, large, fmt.Errorf("start: %w", err))
					continue
				}
				if !r.cfg.Burst {
					r.finish(ctx, p, id, runID, first+i, pad, large, t0)
					continue
				}
				waiters.Go(func() { r.finish(ctx, p, id, runID, first+i, pad, large, t0) })
			}
		})
	}
	callers.Wait()
	p.startElapsed = time.Since(p.started)
	waiters.Wait()
	p.elapsed = time.Since(p.started)
	if !r.cfg.Burst {
		p.startElapsed = 0
	}
	return p
}

// finish does what flow number i waits for from the driver, waits for its
// result, checks it (it was started with payload pad, a large one if
// large) and records its outcome in p; t0 is when its start call began.
func (r *runner) finish(ctx context.Context, p *phase, id, runID string, i int, pad string, large bool, t0 time.Time) {
	err := r.wl.release(ctx, r.client, id, i)
	if err == nil {
		var res *dex.FlowResult
		if res, err = r.client.WaitForFlow(ctx, id, dex.WithRunID(runID)); err == nil {
			if err = checkStatus(res); err == nil {
				err = r.wl.check(res, i, pad)
			}
		}
	}
	r.record(ctx, p, id, time.Since(t0), large, err)
}

// record records a flow's outcome in p: its latency (among the large
// flows' if large) when err is nil, a failure otherwise. A flow that ctx
// interrupted counts as neither completed nor failed.
func (r *runner) record(ctx context.Context, p *phase, id string, lat time.Duration, large bool, err error) {
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
	if err == nil && large {
		p.largeLatencies = append(p.largeLatencies, lat)
		return
	}
	if err == nil {
		p.latencies = append(p.latencies, lat)
		return
	}
	p.failures.Add(1)
	if len(p.samples) < maxFailureSamples {
		p.samples = append(p.samples, id+": "+err.Error())
	}
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
					Warmup: p.warmup, Done: int(p.done.Load()), Total: p.total, Started: int(p.starts.Load()),
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
