// Package bench holds Dex-ZD's load workloads and the logic that measures
// them: "dexcli bench" is its command line, and a comparison harness can
// call it directly.
//
// # The chain workload
//
// The chain flow (ChainFlow) has one step type, ChainStep, whose input is
// ChainInput{Value, Left, Pad}. Each execution returns Value+1: while Left
// is above 1 it moves to a new ChainStep execution with Left-1, otherwise it
// completes the flow (GracefulComplete) with ChainOutput{Value+1, Pad}. A
// flow started with Value v and Left K therefore runs K step executions and
// completes with v+K; the driver checks that, and that Pad came back
// unchanged. Pad carries PayloadBytes bytes through every step, so the
// payload crosses the API on the start, on every task and result, and on
// the flow's result.
//
// K travels in the input, so any worker serving the flow type serves every
// run, whatever its --steps.
//
// # The driver (RunChain)
//
// RunChain runs, in the calling process, an SDK worker serving the chain
// flow and a closed loop of Callers goroutines: each starts a flow
// (StartFlow), waits for its result (WaitForFlow), checks it, and starts the
// next, until the run's flows are used up. Warmup flows run first, with the
// same callers, and are not measured; the measured phase begins when the
// last warmup flow has finished.
//
// # What is measured
//
//   - Elapsed: from the start of the measured phase until its last flow
//     finished (or the context ended).
//   - Completed: measured flows whose result was COMPLETED with the right
//     output. Failures: measured flows that got an error, ended in another
//     status or completed with a wrong output. Flows the context interrupted
//     count as neither.
//   - Flows/s = Completed / Elapsed; steps/s = Completed × Steps / Elapsed.
//   - Latency of a flow: from just before its StartFlow call until
//     WaitForFlow returned its result. Percentiles use the nearest-rank
//     method on the sorted latencies of the completed flows (Percentile), so
//     they are exact, not estimated.
//   - CPU: this process's user and system time (getrusage RUSAGE_SELF: the
//     driver, the worker and the SDK together) over the measured phase, and
//     per completed flow. With ServerPID, the same for that process, read
//     from /proc/PID/stat (Linux; clock-tick resolution, 10 ms).
//
// # Servers to measure
//
// BuildServer and StartDevServer build cmd/dex-server-zd from the checkout
// and run "dev" on a free port with a given durability, waiting for
// dex.FlowService SERVING; DevServer.Stop sends SIGTERM and expects exit
// status 0. The end-to-end tests use them, and so can a harness that
// compares durability modes or builds.
package bench
