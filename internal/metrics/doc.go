// Package metrics is the exposition of one dex-server-zd process's
// metrics, on prometheus client_golang. It knows the log writer, the
// durable store, the lease record and the serving core's flow counts, not
// the process: package node feeds it (the Set methods, the writer hook,
// MeterStore and MeterLease) and serves Handler on metrics.listen.
//
// Metrics are passed in (node.LocalOptions.Metrics,
// node.ServeOptions.Metrics), never global: each holds its own
// client_golang prometheus.Registry, served by promhttp on metrics.listen
// at /metrics (the Prometheus text format, or OpenMetrics when the scraper
// asks for it), with the Go runtime and process collectors beside:
// dexzd_leader (P4: 1 only while this process serves; alert when no
// process or more than one reports 1), dexzd_node_epoch,
// dexzd_hot_standby_state{state} (not_standby, cold, or a hot standby's
// following, bootstrapping, behind, restarting, failed),
// dexzd_hot_standby_lag_seconds (S10), the lease renewal counters and the
// log writer's counters, and:
//
//   - log batch histograms (dexzd_log_batch_write_seconds, _bytes,
//     _records), fed by the writer's OnBatch hook (Metrics.WriterHook):
//     the time from a batch's first write request until it is durable,
//     retries included;
//   - durable store requests (dexzd_store_requests_total{op,result},
//     dexzd_store_request_seconds{op}) counted by the wrapper
//     Metrics.MeterStore puts around the durable store right after it is
//     opened, so the lease, the log, the hot standby and snapshots all
//     count; result is blob.Classify's class, or canceled when the caller
//     cancelled (a request cut off by a timeout is transient);
//     dexzd_store_fsyncs_total for the fs backend (store.go);
//   - flows and step attempts (flows.go):
//     dexzd_flows_started_total, dexzd_flows_completed_total{status} and
//     dexzd_step_attempts_total{outcome}, counted from the engine records
//     of the batches the active core writes: the core counts each record
//     of a durable batch (serving.FlowCounts) and hands the batch's counts
//     to Metrics.CountFlows (serving.CoreConfig.Metrics). Replay and the
//     hot standby apply the same batches without counting, so the counters
//     say what this process did and restart at 0 in the process that takes
//     over.
//
// The histograms are native prometheus.Histograms (latency buckets from
// 0.2 ms to 10 s, byte buckets in powers of 4 from 256 B to 64 MiB, record
// buckets up to the writer's 10,000); the values kept elsewhere (the log
// writers' counters, the serving gate, the standby state) and the atomic
// counters of the hot paths (store requests, flows, attempts) are read at
// scrape time by one Collector. No label carries a flow ID: every label
// (state, limit, op, result, status, outcome) has a fixed set of values.
package metrics
