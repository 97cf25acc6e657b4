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
// # The fanout, timer and signal workloads
//
//   - fanout (FanoutFlow): FanoutStart moves to F FanoutBranch executions at
//     once (one decision, F movements, run in parallel); branch b completes
//     its branch with Value+b+1. The flow completes when every branch has,
//     and its result lists F outputs (E5, E7), which the driver checks as a
//     set. Steps per flow: 1+F.
//   - timer (TimerFlow): TimerStep's WaitFor returns a durable timer of
//     TimerMS (default 1 s); Execute checks that it fired and completes with
//     Value+1. One step per flow (a WaitFor and an Execute task).
//   - signal (SignalFlow): SignalStep's WaitFor waits for one message on the
//     channel "signal"; the driver publishes Signal{i+1} to flow i after its
//     start, and Execute completes with Value plus the message's value. One
//     step per flow.
//
// # The driver (Run)
//
// Run runs, in the calling process, an SDK worker serving the workload's
// flow. Closed loop (the default): Callers goroutines each start a flow
// (StartFlow; for signal also Publish), wait for its result (WaitForFlow),
// check it, and start the next, until the run's flows are used up. Burst:
// Callers goroutines start flows without waiting, and each started flow is
// awaited by a goroutine of its own (which, for signal, publishes first), so
// a flow's latency is still from its start call to its result; elapsed time
// runs from the first start to the last result. Warmup flows run first, the
// same way, and are not measured; the measured phase begins when the last
// warmup flow has finished. Open loop (Rate and Duration, rate.go): the
// measured phase offers Rate starts per second for Duration, whatever the
// answers; refused starts (RESOURCE_EXHAUSTED) are counted, accepted ones
// awaited and checked like any flow.
//
// # What is measured
//
//   - Elapsed: from the start of the measured phase until its last flow
//     finished (or the context ended).
//   - Completed: measured flows whose result was COMPLETED with the right
//     output. Failures: measured flows that got an error, ended in another
//     status or completed with a wrong output. Flows the context interrupted
//     count as neither.
//   - Flows/s = Completed / Elapsed; steps/s = Completed × StepsPerFlow /
//     Elapsed.
//   - Latency of a flow: from just before its StartFlow call until
//     WaitForFlow returned its result. Percentiles use the nearest-rank
//     method on the sorted latencies of the completed flows (Percentile), so
//     they are exact, not estimated.
//   - Large inputs: with LargeFraction, that fraction of each phase's
//     flows carries LargePayloadBytes (default and at most just under the
//     server's default 4 MiB limits.maxPayloadBytes) instead of PayloadBytes
//     (large.go). Latency and OrdinaryFlowsPerSecond then cover the ordinary
//     flows, Large the large ones; Completed and FlowsPerSecond count both.
//   - CPU: this process's user and system time (getrusage RUSAGE_SELF: the
//     driver, the worker and the SDK together) over the measured phase, and
//     per completed flow. With ServerPID, the same for that process, read
//     from /proc/PID/stat (Linux; clock-tick resolution, 10 ms).
//   - Peak RSS: VmHWM of /proc/PID/status of this process and of ServerPID,
//     read after the run (the peak over each process's life).
//   - Store requests: with MetricsURL, the server's Prometheus counters
//     dexzd_store_requests_total{op,result} (PUTs = put_if_absent +
//     put_if_match, GETs = get, requests = every op), dexzd_store_fsyncs_total
//     and dexzd_log_batches_total are read before and after the measured
//     phase (StoreCounts); a counter the server does not export is absent,
//     not zero.
//
// # Servers to measure
//
// BuildServer and StartDevServer build cmd/dex-server-zd from the checkout
// and run "dev" on a free port with a given durability (and, with Metrics,
// /metrics on another), waiting for dex.FlowService SERVING; StartServe runs
// "serve" alone (no standby) on S3 or PostgreSQL from a configuration file it
// writes (ServeConfigYAML). DevServer.Stop sends SIGTERM and expects exit
// status 0. The end-to-end tests use them, and so does bench/compare.
package bench
