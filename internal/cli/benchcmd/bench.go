package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/internal/bench"
	"github.com/dexzd/dexzd/internal/cli/output"
	"github.com/dexzd/dexzd/internal/cli/session"
)

// New returns "dexcli bench": load drivers that run a built-in worker and
// measure the server. The workloads and the measuring live in
// internal/bench; this file is the command line around them.
func New(env *session.Env) *cobra.Command {
	g := &cobra.Command{
		Use:   "bench",
		Short: "Load a server with built-in workloads and measure throughput, latency, CPU, memory and store requests.",
	}
	for _, w := range bench.Workloads {
		g.AddCommand(benchCmd(env, w))
	}
	return g
}

// benchOptions are the flags of the bench commands.
type benchOptions struct {
	workload                          bench.Workload
	flows, callers, workerConcurrency int
	steps, branches                   int
	timer                             time.Duration
	burst                             bool
	rate                              float64
	duration                          time.Duration
	warmup                            session.OptUint
	payloadBytes                      int
	largeFraction                     float64
	largePayloadBytes                 byteSize
	flowType                          string
	serverPID                         int
	metricsURL                        string
	otlpEndpoint                      string
}

// benchWorkloadHelp is, per workload, the summary, what the flows do, the
// examples.
var benchWorkloadHelp = map[bench.Workload]struct {
	summary, flows string
	examples       []string
}{
	bench.WorkloadChain: {
		"Run flows of K sequential steps",
		`Each flow runs K steps one after the other: each adds 1 to its input and
moves to the next, and the last one completes the flow with the value; the
driver checks that it is the start value + K.`,
		[]string{
			"dexcli bench chain --flows 2000 --steps 3 --callers 32",
			"dexcli bench chain --flows 200 --callers 1 --output json",
			"dexcli bench chain --server 127.0.0.1:8801 --server-pid $(pgrep -n dex-server-zd) --metrics-url http://127.0.0.1:9090/metrics",
		},
	},
	bench.WorkloadFanout: {
		"Run flows whose first step moves to F parallel steps",
		`Each flow's first step moves to F steps at once, which run in parallel; each
completes its branch with the start value + its branch number + 1, and the
flow completes when all have (F outputs, which the driver checks). Steps
per flow: 1 + F.`,
		[]string{
			"dexcli bench fanout --flows 1000 --branches 8 --callers 32",
			"dexcli bench fanout --flows 2000 --branches 4 --burst",
		},
	},
	bench.WorkloadTimer: {
		"Run flows that each wait for a durable timer",
		`Each flow has one step whose WaitFor returns a durable timer of --timer
(default 1s); its Execute then completes the flow with the start value + 1.
A closed loop of C callers runs at most C/timer flows per second: use
--burst to load the timers.`,
		[]string{
			"dexcli bench timer --flows 2000 --burst",
			"dexcli bench timer --flows 200 --callers 50 --timer 500ms",
		},
	},
	bench.WorkloadSignal: {
		"Run flows that each wait for a channel message the driver publishes",
		`Each flow has one step whose WaitFor waits for one message on the channel
"signal"; the driver publishes it right after the start, and the step
completes the flow with the start value + the message's value. With --burst
every flow is started first, and the messages are published while the
results are awaited.`,
		[]string{
			"dexcli bench signal --flows 2000 --callers 32",
			"dexcli bench signal --flows 2000 --burst -o json",
		},
	},
}

// benchCommonDetails is the part of --help that every workload shares.
const benchCommonDetails = `

The command runs, in its own process, a worker serving the workload's flow.
Closed loop (the default): C callers each start a flow, wait for its result,
check it, and start the next. --burst: C goroutines start every flow without
waiting, and each started flow is awaited separately; elapsed time runs from
the first start to the last result. Warmup flows run first, the same way,
and are not measured.

--rate R --duration D (overload, open loop): R starts per second for D,
each sent at its time whatever the earlier ones got; a start the server
refuses as overloaded (RESOURCE_EXHAUSTED) is counted as refused, not sent
again; every accepted flow is awaited and checked. The report adds the
accepted starts per second and the refused starts; latency, failures and
flows/s cover the accepted flows.

Latency is from the start call to the result; percentiles are exact (nearest
rank over every measured flow). CPU is this process's user+system time (the
driver and the worker together) over the measured flows; with --server-pid,
also the server's, read from /proc/PID/stat (Linux, 10 ms resolution). Peak
RSS is VmHWM from /proc/PID/status (over each process's life). With
--metrics-url, the server's store counters (dexzd_store_requests_total by op,
dexzd_store_fsyncs_total, dexzd_log_batches_total) are read before and after
the measured flows, and their growth is shown per flow and per step; a
counter the server does not export shows as n/a.

A progress bar is shown on stderr when it is a terminal. Ctrl-C stops the run
and prints what was measured so far (exit 130). A failed flow (an error,
another end than COMPLETED, a wrong output) is counted, the first ones are
listed, and the command exits 1.`

func benchCmd(env *session.Env, w bench.Workload) *cobra.Command {
	h := benchWorkloadHelp[w]
	cmd := &cobra.Command{
		Use:     string(w),
		Short:   h.summary + "; report flows/s, latency, CPU, RSS, store requests",
		Long:    h.flows + benchCommonDetails,
		Example: session.Examples(h.examples),
		Args:    session.Args(0, 0),
	}
	fs := cmd.Flags()
	o := newBenchOptions(w, fs)
	cmd.RunE = env.Run(0, func(ctx context.Context, s *session.Session, _ []string) error {
		return runBench(ctx, s, o)
	})
	return cmd
}

// newBenchOptions registers the flags of workload w's command on fs and
// returns the options they fill in.
func newBenchOptions(w bench.Workload, fs *pflag.FlagSet) *benchOptions {
	o := &benchOptions{workload: w, warmup: session.OptUint{Bits: 31}}
	fs.IntVar(&o.flows, "flows", 1000, "run `N` measured flows")
	switch w {
	case bench.WorkloadChain:
		fs.IntVar(&o.steps, "steps", 3, "run `K` steps in every flow")
	case bench.WorkloadFanout:
		fs.IntVar(&o.branches, "branches", 4, "move to `F` parallel steps in every flow")
	case bench.WorkloadTimer:
		fs.DurationVar(&o.timer, "timer", bench.DefaultTimer, "wait for a durable timer of `DURATION` in every flow (at least 1ms)")
	}
	fs.IntVar(&o.callers, "callers", 32, "run `C` closed-loop callers, each waiting for its flow's result before starting the next (with --burst: C goroutines start the flows)")
	fs.BoolVar(&o.burst, "burst", false, "start every flow without waiting, then await each separately")
	fs.Float64Var(&o.rate, "rate", 0, "overload: offer `R` starts per second for --duration, open loop (refused starts are counted, accepted ones awaited); --flows is then R × duration")
	fs.DurationVar(&o.duration, "duration", 0, "with --rate, offer starts for `DURATION`")
	fs.IntVar(&o.workerConcurrency, "worker-concurrency", 64, "let the built-in worker run at most `N` tasks at once")
	fs.Var(&o.warmup, "warmup", "run `N` flows first, not measured (default min(100, flows/10))")
	fs.IntVar(&o.payloadBytes, "payload-bytes", 0, "carry `B` bytes of payload through every step")
	fs.Float64Var(&o.largeFraction, "large-fraction", 0, "give a fraction `F` (0 to 1) of the flows, spread evenly, --large-payload-bytes of payload instead; report them apart")
	o.largePayloadBytes.v = bench.MaxLargePayloadBytes
	fs.Var(&o.largePayloadBytes, "large-payload-bytes", fmt.Sprintf("with --large-fraction, carry `B` bytes (or NKiB, NMiB) of payload through every step of the large flows (at most %d: the server's default limits.maxPayloadBytes, 4 MiB, less %d for the rest of the value)", bench.MaxLargePayloadBytes, bench.LargeEnvelopeBytes))
	fs.StringVar(&o.flowType, "flow-type", bench.DefaultFlowType(w), "the flow type's `NAME`, also the prefix of the flow IDs")
	fs.IntVar(&o.serverPID, "server-pid", 0, "also measure the CPU time and peak RSS of the server process `PID` (Linux, same machine)")
	fs.StringVar(&o.metricsURL, "metrics-url", "", "read the server's store counters from its Prometheus endpoint `URL` (http://HOST:PORT/metrics) before and after the run")
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "trace every flow of the driver's client and worker (all sampled) to the OTLP/gRPC receiver at `URL` (http://HOST:4317)")
	return o
}

// config checks the flags and turns them into a bench.Config.
func (o *benchOptions) config(s *session.Session) (bench.Config, error) {
	checks := []struct {
		name     string
		v, least int
	}{
		{"--flows", o.flows, 1}, {"--callers", o.callers, 1},
		{"--worker-concurrency", o.workerConcurrency, 1}, {"--payload-bytes", o.payloadBytes, 0},
		{"--server-pid", o.serverPID, 0},
	}
	switch o.workload {
	case bench.WorkloadChain:
		checks = append(checks, struct {
			name     string
			v, least int
		}{"--steps", o.steps, 1})
	case bench.WorkloadFanout:
		checks = append(checks, struct {
			name     string
			v, least int
		}{"--branches", o.branches, 1})
	case bench.WorkloadTimer:
		if o.timer < time.Millisecond {
			return bench.Config{}, session.Usagef("--timer must be at least 1ms, not %s", o.timer)
		}
	}
	for _, f := range checks {
		if f.v < f.least {
			return bench.Config{}, session.Usagef("%s must be at least %d, not %d", f.name, f.least, f.v)
		}
	}
	switch lb := o.largePayloadBytes.v; {
	case math.IsNaN(o.largeFraction) || o.largeFraction < 0 || o.largeFraction > 1:
		return bench.Config{}, session.Usagef("--large-fraction must be a fraction from 0 to 1, not %v", o.largeFraction)
	case lb < 1 || lb > bench.MaxLargePayloadBytes:
		return bench.Config{}, session.Usagef("--large-payload-bytes must be from 1 to %d (limits.maxPayloadBytes %d less %d for the rest of the value), not %d",
			bench.MaxLargePayloadBytes, bench.MaxPayloadBytes, bench.LargeEnvelopeBytes, lb)
	case o.largePayloadBytes.set && o.largeFraction == 0:
		return bench.Config{}, session.Usagef("--large-payload-bytes applies only with a positive --large-fraction")
	}
	largeBytes := 0
	if o.largeFraction > 0 {
		largeBytes = int(o.largePayloadBytes.v)
	}
	if o.flowType == "" {
		return bench.Config{}, session.Usagef("--flow-type is empty")
	}
	if o.serverPID > 0 {
		if _, err := bench.ProcessCPU(o.serverPID); err != nil {
			return bench.Config{}, session.Usagef("--server-pid: %v", err)
		}
	}
	if o.metricsURL != "" {
		u, err := url.Parse(o.metricsURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bench.Config{}, session.Usagef("--metrics-url %q is not an http:// or https:// URL", o.metricsURL)
		}
	}
	switch {
	case o.rate < 0 || math.IsNaN(o.rate) || math.IsInf(o.rate, 0):
		return bench.Config{}, session.Usagef("--rate must be a positive number of starts per second, not %v", o.rate)
	case o.rate > 0 && o.duration <= 0:
		return bench.Config{}, session.Usagef("--rate needs a positive --duration, not %s", o.duration)
	case o.rate == 0 && o.duration != 0:
		return bench.Config{}, session.Usagef("--duration applies only with --rate")
	case o.rate > 0 && o.burst:
		return bench.Config{}, session.Usagef("--rate and --burst exclude each other")
	}
	if o.rate > 0 {
		o.flows = bench.Config{Rate: o.rate, Duration: o.duration}.Offered()
	}
	warmup := bench.DefaultWarmup(o.flows)
	if o.warmup.Given {
		warmup = int(o.warmup.V)
	}
	return bench.Config{
		Workload: o.workload, Addresses: s.Addresses(), DialOptions: s.DialOptions(), FlowType: o.flowType,
		Flows: o.flows, Steps: o.steps, Branches: o.branches, Timer: o.timer,
		Callers: o.callers, Burst: o.burst, Rate: o.rate, Duration: o.duration, WorkerConcurrency: o.workerConcurrency,
		Warmup: warmup, PayloadBytes: o.payloadBytes, LargeFraction: o.largeFraction, LargePayloadBytes: largeBytes, ServerPID: o.serverPID, MetricsURL: o.metricsURL,
		Logger: slog.New(slog.NewTextHandler(s.Stderr(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, nil
}

func runBench(ctx context.Context, s *session.Session, o *benchOptions) error {
	cfg, err := o.config(s)
	if err != nil {
		return err
	}
	if o.otlpEndpoint != "" {
		tp, err := benchTracer(ctx, o.otlpEndpoint)
		if err != nil {
			return session.Usagef("--otlp-endpoint: %v", err)
		}
		defer func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) }()
		cfg.TracerProvider = tp
	}
	progress := output.IsTerminal(s.Stderr())
	if progress {
		cfg.Progress = progressBar(s.Stderr(), cfg.Burst)
	}
	res, err := bench.Run(ctx, cfg)
	if progress {
		// Run has stopped calling Progress; clear its line before the
		// results go to the same terminal.
		fmt.Fprint(s.Stderr(), "\r\x1b[K")
	}
	return benchOutcome(ctx, s, res, err)
}

// benchOutcome prints a run's result and returns the command's error: nil
// when every flow completed right; otherwise a failure that, in JSON,
// carries the result's fields beside the error, so that the output stays
// one document.
func benchOutcome(ctx context.Context, s *session.Session, res bench.Result, err error) error {
	if err != nil && !res.Interrupted && !errors.Is(err, bench.ErrFlowsFailed) {
		// Nothing ran: no server answered, or the worker was refused.
		return s.Fail(ctx, err, session.CallInfo{})
	}
	if !s.Out.JSON {
		if perr := benchTable(s.Out.W, res); perr != nil {
			return perr
		}
	}
	if err == nil {
		if s.Out.JSON {
			return s.Out.Document(benchJSON(res))
		}
		return nil
	}
	name := "bench " + string(res.Workload)
	f := &session.Failure{Fields: benchJSON(res)}
	switch {
	case errors.Is(err, bench.ErrFlowsFailed):
		f.Msg = fmt.Sprintf("%s: %d of %d flows failed", name, res.Failures+res.WarmupFailures, res.Flows+res.Warmup)
		f.Hint = "the first failures are listed (failureSamples in JSON); see one with \"dexcli flow describe FLOW_ID\""
	default:
		st := status.Convert(err)
		switch {
		case errors.Is(err, context.Canceled):
			st = status.New(codes.Canceled, err.Error())
		case errors.Is(err, context.DeadlineExceeded):
			st = status.New(codes.DeadlineExceeded, err.Error())
		}
		msg := strings.TrimPrefix(st.Message(), "bench: ")
		f.Code, f.ServerMsg = st.Code(), msg
		f.Msg = fmt.Sprintf("%s: %s: %s", name, output.CodeName(st.Code()), msg)
		switch st.Code() {
		case codes.Canceled:
			f.Hint = "interrupted; the figures cover the flows that finished before"
		case codes.DeadlineExceeded:
			f.Hint = fmt.Sprintf("stopped by --timeout %s; the figures cover the flows that finished before", s.Timeout)
		default:
			f.Hint = "the run stopped early; the figures cover the flows that finished before"
		}
	}
	return f
}

// progressBarWidth is the number of cells of the progress bar.
const progressBarWidth = 30

// progressBar returns a bench.Progress callback that redraws a progress bar
// on one line of w, a terminal.
func progressBar(w io.Writer, burst bool) func(bench.Progress) {
	return func(p bench.Progress) { fmt.Fprintf(w, "\r%s\x1b[K", progressText(p, burst)) }
}

// progressText renders one state of the progress bar:
//
//	measured [#########.....................]  612/2000 31%  498 flows/s  0 failed  1s
func progressText(p bench.Progress, burst bool) string {
	frac := 0.0
	if p.Total > 0 {
		frac = min(float64(p.Done)/float64(p.Total), 1)
	}
	full := int(frac * progressBarWidth)
	phase := "measured"
	if p.Warmup {
		phase = "warmup  "
	}
	line := fmt.Sprintf("%s [%s%s] %*d/%d %3.0f%%", phase, strings.Repeat("#", full), strings.Repeat(".", progressBarWidth-full),
		len(strconv.Itoa(p.Total)), p.Done, p.Total, 100*frac)
	if burst {
		line += fmt.Sprintf("  started %d", p.Started)
	}
	if !p.Warmup && p.Elapsed > 0 {
		line += fmt.Sprintf("  %.0f flows/s", float64(p.Done)/p.Elapsed.Seconds())
	}
	line += fmt.Sprintf("  %d failed  %s", p.Failures, p.Elapsed.Truncate(time.Second))
	return line
}

// benchJSON is the JSON document of a run, one schema for every workload:
// stable camelCase fields, every field present (null when it does not
// apply or was not measured), durations in milliseconds or seconds as the
// field name says, rates per second, rounded to three decimals.
func benchJSON(r bench.Result) output.Object {
	samples := r.FailureSamples
	if samples == nil {
		samples = []string{}
	}
	var serverCPU any
	if r.ServerCPU != nil {
		serverCPU = output.Object{
			{"pid", r.ServerPID},
			{"userSeconds", round3(r.ServerCPU.User.Seconds())},
			{"systemSeconds", round3(r.ServerCPU.System.Seconds())},
			{"msPerFlow", millis(r.ServerCPU.Per(r.Completed))},
		}
	}
	mode := "closed"
	var startSeconds, ratePerSecond, offeredPerSecond, accepted, refused, skipped, acceptedPerSecond any
	if r.Burst {
		mode = "burst"
		startSeconds = round3(r.StartElapsed.Seconds())
	}
	if r.Rate > 0 {
		mode = "open"
		ratePerSecond, accepted, refused, skipped = round3(r.Rate), r.Accepted, r.Refused, r.Skipped
		acceptedPerSecond = round3(r.AcceptedPerSecond())
		offeredPerSecond = round3(rate(r.Offered, r.OfferElapsed))
	}
	var largeFraction, largePayloadBytes, ordinaryCompleted, ordinaryPerSecond, large any
	if r.LargeFraction > 0 {
		largeFraction, largePayloadBytes = r.LargeFraction, r.LargePayloadBytes
		ordinaryCompleted, ordinaryPerSecond = r.OrdinaryCompleted(), round3(r.OrdinaryFlowsPerSecond())
		large = output.Object{
			{"planned", bench.LargeFlows(r.Flows, r.LargeFraction)},
			{"completed", r.Large.Count},
			{"flowsPerSecond", round3(r.LargeFlowsPerSecond())},
			{"latencyMs", output.Object{
				{"p50", millis(r.Large.P50)},
				{"p99", millis(r.Large.P99)},
				{"max", millis(r.Large.Max)},
			}},
		}
	}
	var branches, timerMs any
	if r.Workload == bench.WorkloadFanout {
		branches = r.Branches
	}
	if r.Workload == bench.WorkloadTimer {
		timerMs = millis(r.Timer)
	}
	return output.Object{
		{"workload", string(r.Workload)},
		{"mode", mode},
		{"flowType", r.FlowType},
		{"flowIdPrefix", r.FlowIDPrefix},
		{"flows", r.Flows},
		{"stepsPerFlow", r.StepsPerFlow},
		{"branches", branches},
		{"timerMs", timerMs},
		{"callers", r.Callers},
		{"workerConcurrency", r.WorkerConcurrency},
		{"warmup", r.Warmup},
		{"payloadBytes", r.PayloadBytes},
		{"largeFraction", largeFraction},
		{"largePayloadBytes", largePayloadBytes},
		{"ratePerSecond", ratePerSecond},
		{"offeredPerSecond", offeredPerSecond},
		{"accepted", accepted},
		{"refused", refused},
		{"skipped", skipped},
		{"acceptedPerSecond", acceptedPerSecond},
		{"completed", r.Completed},
		{"failures", r.Failures},
		{"warmupFailures", r.WarmupFailures},
		{"interrupted", r.Interrupted},
		{"elapsedSeconds", round3(r.Elapsed.Seconds())},
		{"startSeconds", startSeconds},
		{"flowsPerSecond", round3(r.FlowsPerSecond())},
		{"stepsPerSecond", round3(r.StepsPerSecond())},
		{"ordinaryCompleted", ordinaryCompleted},
		{"ordinaryFlowsPerSecond", ordinaryPerSecond},
		{"latencyMs", output.Object{
			{"p50", millis(r.Latency.P50)},
			{"p95", millis(r.Latency.P95)},
			{"p99", millis(r.Latency.P99)},
			{"max", millis(r.Latency.Max)},
			{"min", millis(r.Latency.Min)},
			{"mean", millis(r.Latency.Mean)},
		}},
		{"cpu", output.Object{
			{"userSeconds", round3(r.CPU.User.Seconds())},
			{"systemSeconds", round3(r.CPU.System.Seconds())},
			{"msPerFlow", millis(r.CPU.Per(r.Completed))},
		}},
		{"large", large},
		{"serverCpu", serverCPU},
		{"peakRssBytes", output.Object{
			{"driver", nullIfZero(r.PeakRSS)},
			{"server", nullIfZero(r.ServerPeakRSS)},
		}},
		{"store", storeJSON(r)},
		{"failureSamples", samples},
	}
}

// storeJSON is the store counters' part of the JSON document: null without
// --metrics-url; each figure null when the server does not export its
// counter or the counters could not be read (error says why).
func storeJSON(r bench.Result) any {
	if r.Store == nil && r.MetricsError == "" {
		return nil
	}
	st := r.Store
	if st == nil {
		st = &bench.StoreCounts{}
	}
	per := func(has bool, v float64, n int) any {
		if !has || n <= 0 {
			return nil
		}
		return round3(v / float64(n))
	}
	var errMsg any
	if r.MetricsError != "" {
		errMsg = r.MetricsError
	}
	steps := r.Completed * r.StepsPerFlow
	return output.Object{
		{"putsPerFlow", per(st.HasRequests, st.Puts, r.Completed)},
		{"putsPerStep", per(st.HasRequests, st.Puts, steps)},
		{"getsPerFlow", per(st.HasRequests, st.Gets, r.Completed)},
		{"getsPerStep", per(st.HasRequests, st.Gets, steps)},
		{"requestsPerFlow", per(st.HasRequests, st.Requests, r.Completed)},
		{"fsyncsPerFlow", per(st.HasFsyncs, st.Fsyncs, r.Completed)},
		{"logBatchesPerFlow", per(st.HasLogBatches, st.LogBatches, r.Completed)},
		{"error", errMsg},
	}
}

func nullIfZero(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// benchTable prints a run for people.
func benchTable(w io.Writer, r bench.Result) error {
	payload := ""
	if r.PayloadBytes > 0 {
		payload = fmt.Sprintf(", payload %d B", r.PayloadBytes)
	}
	var what string
	switch r.Workload {
	case bench.WorkloadChain:
		what = fmt.Sprintf("%d flows of %d steps", r.Flows, r.Steps)
	case bench.WorkloadFanout:
		what = fmt.Sprintf("%d flows of 1 step moving to %d parallel steps", r.Flows, r.Branches)
	case bench.WorkloadTimer:
		what = fmt.Sprintf("%d flows waiting for a %s timer", r.Flows, r.Timer)
	default:
		what = fmt.Sprintf("%d flows waiting for a message", r.Flows)
	}
	mode := fmt.Sprintf("closed loop, %d callers", r.Callers)
	if r.Burst {
		mode = fmt.Sprintf("burst, %d starting goroutines", r.Callers)
	}
	if r.Rate > 0 {
		mode = fmt.Sprintf("open loop, %g starts/s for %s", r.Rate, r.Duration)
	}
	kv := []string{
		"Workload", fmt.Sprintf("%s: %s, %s, worker concurrency %d, warmup %d%s",
			r.Workload, what, mode, r.WorkerConcurrency, r.Warmup, payload),
		"Flow type", fmt.Sprintf("%s (flow IDs %sN)", r.FlowType, r.FlowIDPrefix),
		"Completed", strconv.Itoa(r.Completed),
	}
	if r.LargeFraction > 0 {
		kv[len(kv)-1] = fmt.Sprintf("%d (%d ordinary, %d large)", r.Completed, r.OrdinaryCompleted(), r.Large.Count)
		kv = append(kv, "Large inputs", fmt.Sprintf("%g of the flows (%d of %d measured), payload %d B (%s)",
			r.LargeFraction, bench.LargeFlows(r.Flows, r.LargeFraction), r.Flows, r.LargePayloadBytes, textBytes(int64(r.LargePayloadBytes))))
	}
	if r.Rate > 0 {
		kv = append(kv, "Offered starts", fmt.Sprintf("%d over %s (%.1f/s)", r.Offered, r.OfferElapsed.Round(time.Millisecond), rate(r.Offered, r.OfferElapsed)),
			"Accepted starts", fmt.Sprintf("%d (%.1f/s over %s)", r.Accepted, r.AcceptedPerSecond(), r.OfferElapsed.Round(time.Millisecond)),
			"Refused starts", fmt.Sprintf("%d (RESOURCE_EXHAUSTED)", r.Refused),
			"Skipped starts", fmt.Sprintf("%d (not sent: %d starts in flight)", r.Skipped, bench.MaxStartsInFlight))
	}
	kv = append(kv,
		"Failures", fmt.Sprintf("%d (warmup: %d)", r.Failures, r.WarmupFailures),
	)
	if r.Interrupted {
		kv = append(kv, "Interrupted", fmt.Sprintf("yes, after %d of %d measured flows", r.Completed+r.Failures, r.Flows))
	}
	kv = append(kv, "Elapsed", r.Elapsed.Round(time.Millisecond).String())
	if r.Burst {
		kv = append(kv, "All started after", r.StartElapsed.Round(time.Millisecond).String())
	}
	flows, p50 := strconv.FormatFloat(r.FlowsPerSecond(), 'f', 1, 64), textLatency(r.Latency.P50)
	if r.LargeFraction > 0 {
		flows += fmt.Sprintf(" (ordinary %.1f, large %.1f)", r.OrdinaryFlowsPerSecond(), r.LargeFlowsPerSecond())
		p50 += " (latency of the ordinary flows; large ones below)"
	}
	kv = append(kv,
		"Flows/s", flows,
		"Steps/s", fmt.Sprintf("%.1f (%d per flow)", r.StepsPerSecond(), r.StepsPerFlow),
		"Latency p50", p50,
		"Latency p95", textLatency(r.Latency.P95),
		"Latency p99", textLatency(r.Latency.P99),
		"Latency max", textLatency(r.Latency.Max),
	)
	if r.LargeFraction > 0 {
		kv = append(kv, "Large flows", fmt.Sprintf("%d completed, latency p50 %s, p99 %s, max %s",
			r.Large.Count, textLatency(r.Large.P50), textLatency(r.Large.P99), textLatency(r.Large.Max)))
	}
	kv = append(kv,
		"CPU per flow", fmt.Sprintf("%s (driver and worker: user %s, system %s)", textLatency(r.CPU.Per(r.Completed)),
			r.CPU.User.Round(time.Millisecond), r.CPU.System.Round(time.Millisecond)),
	)
	if r.ServerCPU != nil {
		kv = append(kv, "Server CPU per flow", fmt.Sprintf("%s (pid %d: user %s, system %s)", textLatency(r.ServerCPU.Per(r.Completed)),
			r.ServerPID, r.ServerCPU.User.Round(time.Millisecond), r.ServerCPU.System.Round(time.Millisecond)))
	}
	rss := "driver and worker " + textBytes(r.PeakRSS)
	if r.ServerPID > 0 {
		rss += ", server " + textBytes(r.ServerPeakRSS)
	}
	kv = append(kv, "Peak RSS", rss, "Store per flow", storeText(r))
	if err := output.KeyValues(w, kv...); err != nil {
		return err
	}
	if len(r.FailureSamples) > 0 {
		fmt.Fprintln(w, "\nFirst failures:")
		for _, f := range r.FailureSamples {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
	return nil
}

// storeText renders the store counters per flow (and PUTs and GETs per
// step), "n/a" for a counter the server does not export.
func storeText(r bench.Result) string {
	switch {
	case r.Store == nil && r.MetricsError != "":
		return "n/a (" + r.MetricsError + ")"
	case r.Store == nil:
		return "n/a (no --metrics-url)"
	case r.Completed == 0:
		return "n/a (no flow completed)"
	}
	st, n, steps := r.Store, float64(r.Completed), float64(r.Completed*r.StepsPerFlow)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	parts := []string{"PUTs n/a", "GETs n/a"}
	if st.HasRequests {
		parts = []string{
			fmt.Sprintf("PUTs %s (%s per step)", f(st.Puts/n), f(st.Puts/steps)),
			fmt.Sprintf("GETs %s (%s per step)", f(st.Gets/n), f(st.Gets/steps)),
			"requests " + f(st.Requests/n),
		}
	}
	if st.HasFsyncs {
		parts = append(parts, "fsyncs "+f(st.Fsyncs/n))
	} else {
		parts = append(parts, "fsyncs n/a")
	}
	if st.HasLogBatches {
		parts = append(parts, "log batches "+f(st.LogBatches/n))
	}
	return strings.Join(parts, ", ")
}

// textBytes renders a size in MiB, "n/a" for 0.
func textBytes(b int64) string {
	if b <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB"
}

// textLatency renders a duration in milliseconds with three decimals.
func textLatency(d time.Duration) string {
	return strconv.FormatFloat(millis(d), 'f', 3, 64) + "ms"
}

// millis is d in milliseconds, rounded to the microsecond.
func millis(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

// rate is n per second of d; 0 when d is not positive.
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// byteSize is a flag holding a number of bytes, given as an integer or
// with the suffix KiB or MiB, that records whether it was given.
type byteSize struct {
	v   int64
	set bool
}

func (b *byteSize) String() string {
	if b == nil {
		return ""
	}
	return strconv.FormatInt(b.v, 10)
}

func (b *byteSize) Set(s string) error {
	num, unit := s, int64(1)
	for _, u := range []struct {
		suffix string
		unit   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, unit = n, u.unit
			break
		}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || v > math.MaxInt32/unit || v < math.MinInt32/unit {
		return errors.New("not a number of bytes (N, NKiB or NMiB)")
	}
	b.v, b.set = v*unit, true
	return nil
}

// Type names the value in help when the usage names none.
func (b *byteSize) Type() string { return "bytes" }
