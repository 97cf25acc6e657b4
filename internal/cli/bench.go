package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/internal/bench"
)

// benchGroup is "dexcli bench": load drivers that run a built-in worker and
// measure the server. The workloads and the measuring live in
// internal/bench; this file is the command line around them.
func benchGroup() *group {
	return &group{
		name:     "bench",
		summary:  "Load a server with built-in workloads and measure throughput, latency and CPU.",
		commands: []*command{benchChainCmd()},
	}
}

// chainOptions are the flags of "bench chain".
type chainOptions struct {
	flows, steps, callers, workerConcurrency int
	warmup                                   optUint
	payloadBytes                             int
	flowType                                 string
	serverPID                                int
}

func benchChainCmd() *command {
	return &command{
		name: "chain", minArgs: 0, maxArgs: 0,
		summary: "Run flows of K steps from closed-loop callers; report flows/s, latency and CPU",
		details: `The command runs, in its own process, a worker serving the "chain" flow: each
step adds 1 to its input and moves to the next step, and the last one
completes the flow with the value. C callers each start a flow, wait for its
result, check that it is the start value + K, and start the next. Warmup flows
run first and are not measured.

Latency is from the start call to the result; percentiles are exact (nearest
rank over every measured flow). CPU is this process's user+system time (the
driver and the worker together) over the measured flows; with --server-pid,
also the server's, read from /proc/PID/stat (Linux, 10 ms resolution).

A progress line is shown on stderr when it is a terminal. Ctrl-C stops the run
and prints what was measured so far (exit 130). A failed flow (an error,
another end than COMPLETED, a wrong output) is counted, the first ones are
listed, and the command exits 1.`,
		examples: []string{
			"dexcli bench chain --flows 2000 --steps 3 --callers 32",
			"dexcli bench chain --flows 200 --callers 1 --output json",
			"dexcli bench chain --server 127.0.0.1:8801 --server-pid $(pgrep -n dex-server-zd) --payload-bytes 1024",
		},
		setup: func(fs *flag.FlagSet) runFunc {
			o := &chainOptions{warmup: optUint{bits: 31}}
			fs.IntVar(&o.flows, "flows", 1000, "run `N` measured flows")
			fs.IntVar(&o.steps, "steps", 3, "run `K` steps in every flow")
			fs.IntVar(&o.callers, "callers", 32, "run `C` closed-loop callers, each waiting for its flow's result before starting the next")
			fs.IntVar(&o.workerConcurrency, "worker-concurrency", 64, "let the built-in worker run at most `N` tasks at once")
			fs.Var(&o.warmup, "warmup", "run `N` flows first, not measured (default min(100, flows/10))")
			fs.IntVar(&o.payloadBytes, "payload-bytes", 0, "carry `B` bytes of payload through every step")
			fs.StringVar(&o.flowType, "flow-type", bench.DefaultChainFlowType, "the flow type's `NAME`, also the prefix of the flow IDs")
			fs.IntVar(&o.serverPID, "server-pid", 0, "also measure the CPU time of the server process `PID` (Linux, same machine)")
			return func(ctx context.Context, s *session, _ []string) error {
				return s.benchChain(ctx, o)
			}
		},
	}
}

// config checks the flags and turns them into a bench.ChainConfig.
func (o *chainOptions) config(s *session) (bench.ChainConfig, error) {
	for _, f := range []struct {
		name     string
		v, least int
	}{
		{"--flows", o.flows, 1}, {"--steps", o.steps, 1}, {"--callers", o.callers, 1},
		{"--worker-concurrency", o.workerConcurrency, 1}, {"--payload-bytes", o.payloadBytes, 0},
		{"--server-pid", o.serverPID, 0},
	} {
		if f.v < f.least {
			return bench.ChainConfig{}, usagef("%s must be at least %d, not %d", f.name, f.least, f.v)
		}
	}
	if o.flowType == "" {
		return bench.ChainConfig{}, usagef("--flow-type is empty")
	}
	if o.serverPID > 0 {
		if _, err := bench.ProcessCPU(o.serverPID); err != nil {
			return bench.ChainConfig{}, usagef("--server-pid: %v", err)
		}
	}
	warmup := bench.DefaultWarmup(o.flows)
	if o.warmup.set {
		warmup = int(o.warmup.v)
	}
	var dial []grpc.DialOption
	if s.conns.token != "" {
		dial = append(dial, grpc.WithPerRPCCredentials(bearerToken(s.conns.token)))
	}
	return bench.ChainConfig{
		Addresses: s.conns.addrs, DialOptions: dial, FlowType: o.flowType,
		Flows: o.flows, Steps: o.steps, Callers: o.callers, WorkerConcurrency: o.workerConcurrency,
		Warmup: warmup, PayloadBytes: o.payloadBytes, ServerPID: o.serverPID,
		Logger: slog.New(slog.NewTextHandler(s.stderr(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, nil
}

func (s *session) benchChain(ctx context.Context, o *chainOptions) error {
	cfg, err := o.config(s)
	if err != nil {
		return err
	}
	progress := isTerminal(s.stderr())
	if progress {
		cfg.Progress = progressLine(s.stderr(), cfg.Warmup)
	}
	res, err := bench.RunChain(ctx, cfg)
	if progress {
		// RunChain has stopped calling Progress; clear its line before the
		// results go to the same terminal.
		fmt.Fprint(s.stderr(), "\r\x1b[K")
	}
	return s.chainOutcome(ctx, res, err)
}

// chainOutcome prints a chain run's result and returns the command's
// error: nil when every flow completed right; otherwise a failure that, in
// JSON, carries the result's fields beside the error, so that the output
// stays one document.
func (s *session) chainOutcome(ctx context.Context, res bench.Result, err error) error {
	if err != nil && !res.Interrupted && !errors.Is(err, bench.ErrFlowsFailed) {
		// Nothing ran: no server answered, or the worker was refused.
		return s.fail(ctx, err, callInfo{})
	}
	if !s.out.json {
		if perr := chainTable(s.out.w, res); perr != nil {
			return perr
		}
	}
	if err == nil {
		if s.out.json {
			return s.out.document(chainJSON(res))
		}
		return nil
	}
	f := &failure{fields: chainJSON(res)}
	switch {
	case errors.Is(err, bench.ErrFlowsFailed):
		f.msg = fmt.Sprintf("bench chain: %d of %d flows failed", res.Failures+res.WarmupFailures, res.Flows+res.Warmup)
		f.hint = "the first failures are listed (failureSamples in JSON); see one with \"dexcli flow describe FLOW_ID\""
	default:
		st := status.Convert(err)
		switch {
		case errors.Is(err, context.Canceled):
			st = status.New(codes.Canceled, err.Error())
		case errors.Is(err, context.DeadlineExceeded):
			st = status.New(codes.DeadlineExceeded, err.Error())
		}
		msg := strings.TrimPrefix(st.Message(), "bench: ")
		f.code, f.serverMsg = st.Code(), msg
		f.msg = fmt.Sprintf("bench chain: %s: %s", codeName(st.Code()), msg)
		switch st.Code() {
		case codes.Canceled:
			f.hint = "interrupted; the figures cover the flows that finished before"
		case codes.DeadlineExceeded:
			f.hint = fmt.Sprintf("stopped by --timeout %s; the figures cover the flows that finished before", s.timeout)
		default:
			f.hint = "the run stopped early; the figures cover the flows that finished before"
		}
	}
	return f
}

// progressLine returns a bench.Progress callback that redraws one line on
// w, a terminal.
func progressLine(w io.Writer, warmup int) func(bench.Progress) {
	return func(p bench.Progress) {
		phase := "measured"
		if p.Warmup {
			phase = "warmup"
		}
		line := fmt.Sprintf("%s %d/%d flows, %d failed, %s", phase, p.Done, p.Total, p.Failures, p.Elapsed.Truncate(time.Second))
		if !p.Warmup && p.Elapsed > 0 {
			line += fmt.Sprintf(", %.0f flows/s", float64(p.Done)/p.Elapsed.Seconds())
		} else if warmup > 0 {
			line += " (not measured)"
		}
		fmt.Fprintf(w, "\r%s\x1b[K", line)
	}
}

// chainJSON is the JSON document of a chain run: stable camelCase fields,
// durations in milliseconds or seconds as the field name says, rates per
// second, rounded to three decimals.
func chainJSON(r bench.Result) jsonObject {
	samples := r.FailureSamples
	if samples == nil {
		samples = []string{}
	}
	var serverCPU any
	if r.ServerCPU != nil {
		serverCPU = jsonObject{
			{"pid", r.ServerPID},
			{"userSeconds", round3(r.ServerCPU.User.Seconds())},
			{"systemSeconds", round3(r.ServerCPU.System.Seconds())},
			{"msPerFlow", millis(r.ServerCPU.Per(r.Completed))},
		}
	}
	return jsonObject{
		{"workload", "chain"},
		{"flowType", r.FlowType},
		{"flowIdPrefix", r.FlowIDPrefix},
		{"flows", r.Flows},
		{"steps", r.Steps},
		{"callers", r.Callers},
		{"workerConcurrency", r.WorkerConcurrency},
		{"warmup", r.Warmup},
		{"payloadBytes", r.PayloadBytes},
		{"completed", r.Completed},
		{"failures", r.Failures},
		{"warmupFailures", r.WarmupFailures},
		{"interrupted", r.Interrupted},
		{"elapsedSeconds", round3(r.Elapsed.Seconds())},
		{"flowsPerSecond", round3(r.FlowsPerSecond())},
		{"stepsPerSecond", round3(r.StepsPerSecond())},
		{"latencyMs", jsonObject{
			{"p50", millis(r.Latency.P50)},
			{"p95", millis(r.Latency.P95)},
			{"p99", millis(r.Latency.P99)},
			{"max", millis(r.Latency.Max)},
			{"min", millis(r.Latency.Min)},
			{"mean", millis(r.Latency.Mean)},
		}},
		{"cpu", jsonObject{
			{"userSeconds", round3(r.CPU.User.Seconds())},
			{"systemSeconds", round3(r.CPU.System.Seconds())},
			{"msPerFlow", millis(r.CPU.Per(r.Completed))},
		}},
		{"serverCpu", serverCPU},
		{"failureSamples", samples},
	}
}

// chainTable prints a chain run for people.
func chainTable(w io.Writer, r bench.Result) error {
	payload := ""
	if r.PayloadBytes > 0 {
		payload = fmt.Sprintf(", payload %d B", r.PayloadBytes)
	}
	kv := []string{
		"Workload", fmt.Sprintf("chain: %d flows of %d steps, %d callers, worker concurrency %d, warmup %d%s",
			r.Flows, r.Steps, r.Callers, r.WorkerConcurrency, r.Warmup, payload),
		"Flow type", fmt.Sprintf("%s (flow IDs %sN)", r.FlowType, r.FlowIDPrefix),
		"Completed", strconv.Itoa(r.Completed),
		"Failures", fmt.Sprintf("%d (warmup: %d)", r.Failures, r.WarmupFailures),
	}
	if r.Interrupted {
		kv = append(kv, "Interrupted", fmt.Sprintf("yes, after %d of %d measured flows", r.Completed+r.Failures, r.Flows))
	}
	kv = append(kv,
		"Elapsed", r.Elapsed.Round(time.Millisecond).String(),
		"Flows/s", strconv.FormatFloat(r.FlowsPerSecond(), 'f', 1, 64),
		"Steps/s", strconv.FormatFloat(r.StepsPerSecond(), 'f', 1, 64),
		"Latency p50", textLatency(r.Latency.P50),
		"Latency p95", textLatency(r.Latency.P95),
		"Latency p99", textLatency(r.Latency.P99),
		"Latency max", textLatency(r.Latency.Max),
		"CPU per flow", fmt.Sprintf("%s (driver and worker: user %s, system %s)", textLatency(r.CPU.Per(r.Completed)),
			r.CPU.User.Round(time.Millisecond), r.CPU.System.Round(time.Millisecond)),
	)
	if r.ServerCPU != nil {
		kv = append(kv, "Server CPU per flow", fmt.Sprintf("%s (pid %d: user %s, system %s)", textLatency(r.ServerCPU.Per(r.Completed)),
			r.ServerPID, r.ServerCPU.User.Round(time.Millisecond), r.ServerCPU.System.Round(time.Millisecond)))
	}
	if err := keyValues(w, kv...); err != nil {
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

// textLatency renders a duration in milliseconds with three decimals.
func textLatency(d time.Duration) string {
	return strconv.FormatFloat(millis(d), 'f', 3, 64) + "ms"
}

// millis is d in milliseconds, rounded to the microsecond.
func millis(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
