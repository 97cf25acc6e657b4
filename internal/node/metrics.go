package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// StandbyState is the value of the state label of dexzd_hot_standby_state
// (S10).
type StandbyState string

// Standby states. A process that holds the lease (or is acquiring it) is
// not a standby; a cold standby waits idle. The others belong to hot
// standbys (hot.go): following (hot), behind (lag above
// behindLagThreshold), restarting (after an error, during the backoff),
// failed (a restore from a snapshot lost the local store), bootstrapping
// (restoring the newest snapshot). Every state is exported,
// 0 when not current, so that alert rules on them find the series.
const (
	StandbyNotStandby    StandbyState = "not_standby"
	StandbyStateCold     StandbyState = "cold"
	StandbyFollowing     StandbyState = "following"
	StandbyBootstrapping StandbyState = "bootstrapping"
	StandbyRestarting    StandbyState = "restarting"
	StandbyBehind        StandbyState = "behind"
	StandbyFailed        StandbyState = "failed"
)

var standbyStates = []StandbyState{StandbyNotStandby, StandbyStateCold, StandbyFollowing,
	StandbyBootstrapping, StandbyRestarting, StandbyBehind, StandbyFailed}

// Metrics are one process's metrics, served in the Prometheus text format
// (version 0.0.4) on metrics.listen. The caller creates them with
// NewMetrics and passes them in (LocalOptions.Metrics, ServeOptions.Metrics):
// there is no global registry. A nil *Metrics records nothing.
//
//	dexzd_leader                         1 while this process is the active one and serves (P4)
//	dexzd_node_epoch                     the epoch of the lease this process holds, 0 while it holds none
//	dexzd_hot_standby_state{state}       1 for the current state, 0 for the others (S10)
//	dexzd_hot_standby_lag_seconds        time since the hot standby last caught up with the log's end (S10)
//	dexzd_lease_renewals_total           lease renewal writes that succeeded
//	dexzd_lease_renewal_failures_total   lease renewal writes that failed (each attempt counts)
//	dexzd_log_batches_total              log batches written by this process
//	dexzd_log_records_total              records in those batches
//	dexzd_log_bytes_total                encoded bytes of those batches
//	dexzd_log_write_retries_total        log requests repeated after a transient error
//	dexzd_log_adopted_batches_total      batches whose lost reply was resolved by reading them back (G5)
//	dexzd_snapshots_total                snapshots written (each followed by a log truncation)
//	dexzd_snapshot_failures_total        snapshots or truncations that failed
//	dexzd_snapshot_bytes                 size of the last snapshot written
//	dexzd_log_batch_write_seconds        histogram: time to make one batch durable, retries included
//	dexzd_log_batch_bytes                histogram: encoded size of one batch
//	dexzd_log_batch_records              histogram: records (envelopes) in one batch
//	dexzd_store_requests_total{op,result} durable store requests (MeterStore); op: get, put_if_absent,
//	                                     put_if_match, list, delete; result: ok, not_found, precondition,
//	                                     transient, permanent, canceled
//	dexzd_store_request_seconds{op}      histogram: durable store request latency
//	dexzd_store_fsyncs_total             fsyncs of the fs durable store; 0 on other backends
//	dexzd_flows_started_total            flow runs started (FlowStarted records written)
//	dexzd_flows_completed_total{status}  flow runs closed: completed, failed, canceled, terminated
//	dexzd_step_attempts_total{outcome}   step attempts ended: succeeded, failed, timed_out, not_completed
//
// The log, store and flow series count what this process did; like every
// counter they start at 0 in a new process, so a failover resets them.
type Metrics struct {
	// runtime holds the Go runtime and process collectors.
	runtime         *prometheus.Registry
	renewals        atomic.Uint64
	renewalFailures atomic.Uint64
	// Snapshots written and failed, and the size of the last one.
	snapshots, snapshotFailures, snapshotBytes atomic.Uint64
	epoch                                      atomic.Uint64
	state                                      atomic.Pointer[StandbyState]
	// hot, while set, is the hot standby whose state and lag are reported
	// instead of state.
	hot atomic.Pointer[hotStandby]

	batchSeconds, batchBytes, batchRecords histogram
	// refused counts overload refusals by serving.RefusalLimits' index.
	refused [4]atomic.Uint64
	store   storeMetrics
	flows   flowMetrics

	mu      sync.Mutex
	active  interface{ Serving() bool } // the serving instance, nil while none
	reason  string                      // why the process does not serve (/readyz)
	writer  *wal.Writer                 // the current lease period's writer
	logBase wal.Stats                   // the sums of the writers before it
	fsyncs  []fsyncCounter              // the metered stores that count fsyncs
}

// NewMetrics returns metrics with every value at zero and the standby
// state not_standby.
func NewMetrics() *Metrics {
	m := &Metrics{runtime: prometheus.NewRegistry()}
	// The Go runtime's and the process's own series (go_*, process_*),
	// from client_golang's collectors; the dexzd_* series are written by
	// hand below until they move to this registry too (issue 17).
	m.runtime.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.setStandbyState(StandbyNotStandby)
	m.batchSeconds.init(latencyBuckets)
	m.batchBytes.init(byteBuckets)
	m.batchRecords.init(recordBuckets)
	m.store.init()
	return m
}

// ObserveBatch records one durable log batch.
func (m *Metrics) ObserveBatch(b wal.BatchStats) {
	if m == nil {
		return
	}
	m.batchSeconds.observe(uint64(max(b.Duration, 0)))
	m.batchBytes.observe(uint64(max(b.Bytes, 0)))
	m.batchRecords.observe(uint64(max(b.Records, 0)))
}

// WriterHook returns the wal.WriterConfig.OnBatch hook that records each
// batch in m; nil (no hook) for a nil *Metrics.
func (m *Metrics) WriterHook() func(wal.BatchStats) {
	if m == nil {
		return nil
	}
	return m.ObserveBatch
}

func (m *Metrics) setStandbyState(s StandbyState) {
	if m != nil {
		m.state.Store(&s)
	}
}

// setHot makes h the hot standby whose state and lag are reported; nil
// clears it (the state set by setStandbyState is reported again).
func (m *Metrics) setHot(h *hotStandby) {
	if m != nil {
		m.hot.Store(h)
	}
}

func (m *Metrics) setEpoch(e uint64) {
	if m != nil {
		m.epoch.Store(e)
	}
}

// setActive makes b the serving instance whose gate dexzd_leader reports;
// nil clears it.
func (m *Metrics) setActive(b interface{ Serving() bool }) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.active = b
}

// setWriter makes w the writer whose counters are reported; endWriter adds
// its final counters to the totals when its lease period ends.
func (m *Metrics) setWriter(w *wal.Writer) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writer = w
}

func (m *Metrics) endWriter(w *wal.Writer) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.writer != w {
		return
	}
	m.logBase = addStats(m.logBase, w.Stats())
	m.writer = nil
}

func addStats(a, b wal.Stats) wal.Stats {
	return wal.Stats{Batches: a.Batches + b.Batches, Records: a.Records + b.Records, Bytes: a.Bytes + b.Bytes,
		Retries: a.Retries + b.Retries, Adopted: a.Adopted + b.Adopted}
}

// leaseRenewal counts one renewal write's outcome.
func (m *Metrics) leaseRenewal(err error) {
	switch {
	case m == nil:
	case err == nil:
		m.renewals.Add(1)
	default:
		m.renewalFailures.Add(1)
	}
}

// snapshot is one consistent reading of the metrics.
type snapshot struct {
	leader                    bool
	epoch                     uint64
	state                     StandbyState
	lag                       time.Duration
	renewals, renewalFailures uint64
	log                       wal.Stats
	fsyncs                    uint64
}

func (m *Metrics) snapshot() snapshot {
	m.mu.Lock()
	s := snapshot{log: m.logBase}
	if m.writer != nil {
		s.log = addStats(s.log, m.writer.Stats())
	}
	active := m.active
	for _, f := range m.fsyncs {
		s.fsyncs += f.Fsyncs()
	}
	m.mu.Unlock()
	s.leader = active != nil && active.Serving()
	s.epoch = m.epoch.Load()
	if st := m.state.Load(); st != nil {
		s.state = *st
	}
	if h := m.hot.Load(); h != nil {
		s.state, s.lag = h.State()
	}
	s.renewals, s.renewalFailures = m.renewals.Load(), m.renewalFailures.Load()
	return s
}

// WriteText writes the metrics in the Prometheus text format.
func (m *Metrics) WriteText(w io.Writer) error {
	s := m.snapshot()
	bw := bufio.NewWriter(w)
	metric := func(name, typ, help string, v uint64) {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", name, help, name, typ, name, v)
	}
	metric("dexzd_leader", "gauge", "1 while this process is the active process of its node and serves, else 0.", b2u(s.leader))
	metric("dexzd_node_epoch", "gauge", "The epoch of the node lease this process holds; 0 while it holds none.", s.epoch)
	const hs = "dexzd_hot_standby_state"
	fmt.Fprintf(bw, "# HELP %s 1 for the standby state this process is in, 0 for the others.\n# TYPE %s gauge\n", hs, hs)
	for _, st := range standbyStates {
		fmt.Fprintf(bw, "%s{state=%q} %d\n", hs, st, b2u(st == s.state))
	}
	const lag = "dexzd_hot_standby_lag_seconds"
	fmt.Fprintf(bw, "# HELP %s How far this hot standby trails the log: the time since it last caught up with its end; 0 when not a hot standby.\n# TYPE %s gauge\n%s %.3f\n",
		lag, lag, lag, s.lag.Seconds())
	metric("dexzd_lease_renewals_total", "counter", "Lease renewal writes that succeeded.", s.renewals)
	metric("dexzd_lease_renewal_failures_total", "counter", "Lease renewal writes that failed; every attempt counts.", s.renewalFailures)
	metric("dexzd_log_batches_total", "counter", "Log batches this process wrote.", s.log.Batches)
	metric("dexzd_log_records_total", "counter", "Records in the log batches this process wrote.", s.log.Records)
	metric("dexzd_log_bytes_total", "counter", "Encoded bytes of the log batches this process wrote.", s.log.Bytes)
	metric("dexzd_log_write_retries_total", "counter", "Log store requests repeated after a transient error.", s.log.Retries)
	metric("dexzd_log_adopted_batches_total", "counter", "Log batches whose lost write reply was resolved by reading the batch back.", s.log.Adopted)
	histogramFamily(bw, &m.batchSeconds, "dexzd_log_batch_write_seconds",
		"Time from the first write request of a log batch until it was durable, retries included.")
	histogramFamily(bw, &m.batchBytes, "dexzd_log_batch_bytes", "Encoded size of the log batches this process wrote.")
	histogramFamily(bw, &m.batchRecords, "dexzd_log_batch_records", "Records (one per engine decision) in the log batches this process wrote.")
	const rf = "dexzd_requests_refused_total"
	fmt.Fprintf(bw, "# HELP %s Calls refused as overloaded (RESOURCE_EXHAUSTED with a retry hint), by the limit reached.\n# TYPE %s counter\n", rf, rf)
	for i, l := range serving.RefusalLimits {
		fmt.Fprintf(bw, "%s{limit=%q} %d\n", rf, l, m.refused[i].Load())
	}
	metric("dexzd_snapshots_total", "counter", "Snapshots of the local store this process wrote (and truncated the log after).", m.snapshots.Load())
	metric("dexzd_snapshot_failures_total", "counter", "Snapshots or truncations that failed; the log is kept until the next one.", m.snapshotFailures.Load())
	metric("dexzd_snapshot_bytes", "gauge", "Size of the last snapshot this process wrote; 0 before the first.", m.snapshotBytes.Load())
	m.store.writeText(bw, s.fsyncs)
	m.flows.writeText(bw)
	families, err := m.runtime.Gather()
	if err != nil {
		return fmt.Errorf("gather runtime metrics: %w", err)
	}
	for _, mf := range families {
		if _, err := expfmt.MetricFamilyToText(bw, mf); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// maxBuckets is the most upper bounds a histogram has (+Inf aside).
const maxBuckets = 16

// bucketSpec are a histogram's upper bounds: in the observed integer unit
// for observe, as le label values for the text.
type bucketSpec struct {
	bounds []uint64
	le     []string
	unit   float64 // observed units per exported unit: 1e9 for ns as seconds
}

func newBuckets(unit float64, upper ...float64) *bucketSpec {
	if len(upper) > maxBuckets {
		panic("metrics: too many histogram buckets")
	}
	b := &bucketSpec{unit: unit}
	for _, u := range upper {
		b.bounds = append(b.bounds, uint64(math.Round(u*unit)))
		b.le = append(b.le, strconv.FormatFloat(u, 'f', -1, 64))
	}
	return b
}

// Histogram buckets.
var (
	// latencyBuckets suit 0.2 ms (a local fsync) to 10 s (the log write
	// limit's order): observed in nanoseconds, exported in seconds.
	latencyBuckets = newBuckets(1e9, 0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
	// byteBuckets: powers of 4 from 256 B to 64 MiB.
	byteBuckets = newBuckets(1, 256, 1<<10, 4<<10, 16<<10, 64<<10, 256<<10, 1<<20, 4<<20, 16<<20, 64<<20)
	// recordBuckets reach the writer's default limit of 10,000 records.
	recordBuckets = newBuckets(1, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
)

// histogram is a Prometheus histogram of integer observations (nanoseconds,
// bytes, records): safe for concurrent use, no allocation per observation.
// init it before use.
type histogram struct {
	spec   *bucketSpec
	counts [maxBuckets + 1]atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    atomic.Uint64
}

func (h *histogram) init(b *bucketSpec) { h.spec = b }

func (h *histogram) observe(v uint64) {
	b := h.spec.bounds
	i := 0
	for i < len(b) && v > b[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(v)
}

// histogramFamily writes the HELP and TYPE lines and h's series.
func histogramFamily(bw *bufio.Writer, h *histogram, name, help string) {
	fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	h.writeText(bw, name, "")
}

// writeText writes h's series of the family name: its buckets
// (cumulative), sum and count, with labels (`op="get"`, or "") on each.
// The count is the +Inf bucket, so they always agree.
func (h *histogram) writeText(bw *bufio.Writer, name, labels string) {
	sep, braced := "", ""
	if labels != "" {
		sep, braced = ",", "{"+labels+"}"
	}
	var cum uint64
	for i, le := range h.spec.le {
		cum += h.counts[i].Load()
		fmt.Fprintf(bw, "%s_bucket{%s%sle=%q} %d\n", name, labels, sep, le, cum)
	}
	cum += h.counts[len(h.spec.le)].Load()
	fmt.Fprintf(bw, "%s_bucket{%s%sle=\"+Inf\"} %d\n", name, labels, sep, cum)
	sum := strconv.FormatFloat(float64(h.sum.Load())/h.spec.unit, 'f', -1, 64)
	fmt.Fprintf(bw, "%s_sum%s %s\n%s_count%s %d\n", name, braced, sum, name, braced, cum)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Handler serves GET /metrics.
//
// The same listener is the process's HTTP surface for load balancers and
// probes that do not speak gRPC: GET /readyz answers 200 while the
// process is the active one and serves, else 503 with the reason (on a
// standby: that it is one, and to retry on the active process; P3, H2);
// GET /livez answers 200 while the process runs.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = m.WriteText(w)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if m.serving() {
			_, _ = io.WriteString(w, "serving\n")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, m.notServingReason()+"\n")
	})
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "alive\n")
	})
	return mux
}

// serving reports whether the serving instance serves now.
func (m *Metrics) serving() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.active != nil && m.active.Serving()
}

// setNotServingReason sets what /readyz says while the process does not
// serve; empty means a generic reason.
func (m *Metrics) setNotServingReason(reason string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reason = reason
}

func (m *Metrics) notServingReason() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reason != "" {
		return m.reason
	}
	return "this process is not serving; retry on the active process"
}

// snapshot records one snapshot attempt: its size when it was written,
// err when it or the truncation after it failed.
func (m *Metrics) snapshotWritten(bytes int, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.snapshotFailures.Add(1)
		return
	}
	m.snapshots.Add(1)
	m.snapshotBytes.Store(uint64(bytes))
}

// leaseStore counts the lease holder's renewal writes for the metrics:
// the writes of the lease key whose record is neither an acquisition
// (write number 1) nor a release.
type leaseStore struct {
	blob.Store
	key string
	m   *Metrics
}

// leaseBlobs returns the store to hand to lease.Acquire: blobs itself
// without metrics, else a leaseStore that counts renewals.
func leaseBlobs(blobs blob.Store, key string, m *Metrics) blob.Store {
	if m == nil {
		return blobs
	}
	return &leaseStore{Store: blobs, key: key, m: m}
}

func (s *leaseStore) PutIfMatch(ctx context.Context, key string, data []byte, v blob.Version) (blob.Version, error) {
	nv, err := s.Store.PutIfMatch(ctx, key, data, v)
	if key == s.key {
		if rec, derr := lease.Decode(data); derr == nil && rec.Write > 1 && !rec.Released {
			s.m.leaseRenewal(err)
		}
	}
	return nv, err
}
