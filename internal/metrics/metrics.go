package metrics

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
// standbys (package node, hot.go): following (hot), behind (lag above
// behindLagThreshold), restarting (after an error, during the backoff),
// failed (a restore from a snapshot lost the local store), bootstrapping
// (restoring the newest snapshot). Every state is exported,
// 0 when not current, so that alert rules on them find the series.
const (
	StandbyNotStandby    StandbyState = "not_standby"
	StandbyCold          StandbyState = "cold"
	StandbyFollowing     StandbyState = "following"
	StandbyBootstrapping StandbyState = "bootstrapping"
	StandbyRestarting    StandbyState = "restarting"
	StandbyBehind        StandbyState = "behind"
	StandbyFailed        StandbyState = "failed"
)

var standbyStates = []StandbyState{StandbyNotStandby, StandbyCold, StandbyFollowing,
	StandbyBootstrapping, StandbyRestarting, StandbyBehind, StandbyFailed}

// Metrics are one process's metrics, served on metrics.listen by
// client_golang's promhttp (the Prometheus text format, or OpenMetrics
// when the scraper asks for it). The caller creates them with New and
// passes them in (node.LocalOptions.Metrics, node.ServeOptions.Metrics): each
// holds its own prometheus.Registry, there is no global one. A nil
// *Metrics records nothing.
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
//	dexzd_requests_refused_total{limit}  calls refused as overloaded, by serving.RefusalLimits
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
//	dexzd_value_cache_hits_total         value object reads and writes answered from memory (wal.ValueCache)
//	dexzd_value_cache_misses_total       value object reads and writes that went to the store
//	dexzd_value_cache_bytes              bytes of values the value cache holds
//
// Beside them the registry holds client_golang's Go runtime (go_*) and
// process (process_*) collectors. Every label has a fixed, small set of
// values (no flow IDs); labelled series are listed at 0 from the start,
// so that rate() and absent() alerts find them.
//
// The histograms and the refusal counters are native client_golang
// metrics; the values that live elsewhere (the log writer's counters, the
// serving gate, the standby state) or are kept as atomics (lease, snapshot,
// store and flow counts) are read at scrape time by stateCollector. The log, store and flow series count what this process
// did; like every counter they start at 0 in a new process, so a failover
// resets them.
type Metrics struct {
	reg             *prometheus.Registry
	renewals        atomic.Uint64
	renewalFailures atomic.Uint64
	// Snapshots written and failed, and the size of the last one.
	snapshots, snapshotFailures, snapshotBytes atomic.Uint64
	lastSnapshot                               atomic.Pointer[time.Time]
	epoch                                      atomic.Uint64
	state                                      atomic.Pointer[StandbyState]
	// hot, while set, is the hot standby whose state and lag are reported
	// instead of state.
	hot atomic.Pointer[HotStandby]
	// values is the process's value object cache, nil while none.
	values atomic.Pointer[wal.ValueCache]

	batchSeconds, batchBytes, batchRecords prometheus.Histogram
	// refused counts overload refusals by serving.RefusalLimits' index.
	refused []prometheus.Counter
	store   storeMetrics
	flows   flowMetrics

	mu      sync.Mutex
	active  interface{ Serving() bool } // the serving instance, nil while none
	reason  string                      // why the process does not serve (/readyz)
	writer  *wal.Writer                 // the current lease period's writer
	logBase wal.Stats                   // the sums of the writers before it
	fsyncs  []fsyncCounter              // the metered stores that count fsyncs
}

// Histogram buckets.
var (
	// latencyBuckets suit 0.2 ms (a local fsync) to 10 s (the log write
	// limit's order), in seconds.
	latencyBuckets = []float64{0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	// byteBuckets: powers of 4 from 256 B to 64 MiB.
	byteBuckets = prometheus.ExponentialBuckets(256, 4, 10)
	// recordBuckets reach the writer's default limit of 10,000 records.
	recordBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}
)

// New returns metrics with every value at zero and the standby state
// not_standby.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := promauto.With(m.reg)
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		return f.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	m.batchSeconds = histogram("dexzd_log_batch_write_seconds",
		"Time from the first write request of a log batch until it was durable, retries included.", latencyBuckets)
	m.batchBytes = histogram("dexzd_log_batch_bytes", "Encoded size of the log batches this process wrote.", byteBuckets)
	m.batchRecords = histogram("dexzd_log_batch_records",
		"Records (one per engine decision) in the log batches this process wrote.", recordBuckets)
	refused := f.NewCounterVec(prometheus.CounterOpts{Name: "dexzd_requests_refused_total",
		Help: "Calls refused as overloaded (RESOURCE_EXHAUSTED with a retry hint), by the limit reached."}, []string{"limit"})
	for _, l := range serving.RefusalLimits {
		m.refused = append(m.refused, refused.WithLabelValues(l))
	}
	m.store.init(f)
	m.reg.MustRegister(stateCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.SetStandbyState(StandbyNotStandby)
	return m
}

// ObserveBatch records one durable log batch.
func (m *Metrics) ObserveBatch(b wal.BatchStats) {
	if m == nil {
		return
	}
	m.batchSeconds.Observe(max(b.Duration, 0).Seconds())
	m.batchBytes.Observe(float64(max(b.Bytes, 0)))
	m.batchRecords.Observe(float64(max(b.Records, 0)))
}

// WriterHook returns the wal.WriterConfig.OnBatch hook that records each
// batch in m; nil (no hook) for a nil *Metrics.
func (m *Metrics) WriterHook() func(wal.BatchStats) {
	if m == nil {
		return nil
	}
	return m.ObserveBatch
}

// SetStandbyState sets the standby state reported while no hot standby is
// set (SetHotStandby).
func (m *Metrics) SetStandbyState(s StandbyState) {
	if m != nil {
		m.state.Store(&s)
	}
}

// HotStandby is what the metrics read of a hot standby at scrape time: its
// state (following, behind, bootstrapping, restarting, failed) and its lag.
type HotStandby interface {
	State() (StandbyState, time.Duration)
}

// SetHotStandby makes h the hot standby whose state and lag are reported;
// nil clears it (the state set by SetStandbyState is reported again).
func (m *Metrics) SetHotStandby(h HotStandby) {
	switch {
	case m == nil:
	case h == nil:
		m.hot.Store(nil)
	default:
		m.hot.Store(&h)
	}
}

// SetEpoch sets the epoch of the lease the process holds; 0 while it holds
// none.
func (m *Metrics) SetEpoch(e uint64) {
	if m != nil {
		m.epoch.Store(e)
	}
}

// SetActive makes b the serving instance whose gate dexzd_leader and
// /readyz report; nil clears it.
func (m *Metrics) SetActive(b interface{ Serving() bool }) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.active = b
}

// SetWriter makes w the writer whose counters are reported; EndWriter adds
// its final counters to the totals when its lease period ends.
func (m *Metrics) SetWriter(w *wal.Writer) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writer = w
}

// EndWriter adds w's final counters to the totals and stops reading it, if
// it is the writer SetWriter set.
func (m *Metrics) EndWriter(w *wal.Writer) {
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

// snapshot is one consistent reading of the state that stateCollector
// exports.
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
		s.state, s.lag = (*h).State()
	}
	s.renewals, s.renewalFailures = m.renewals.Load(), m.renewalFailures.Load()
	return s
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// The series stateCollector reads at scrape time.
var (
	leaderDesc  = desc("dexzd_leader", "1 while this process is the active process of its node and serves, else 0.")
	epochDesc   = desc("dexzd_node_epoch", "The epoch of the node lease this process holds; 0 while it holds none.")
	standbyDesc = desc("dexzd_hot_standby_state", "1 for the standby state this process is in, 0 for the others.", "state")
	lagDesc     = desc("dexzd_hot_standby_lag_seconds",
		"How far this hot standby trails the log: the time since it last caught up with its end; 0 when not a hot standby.")
	renewalsDesc        = desc("dexzd_lease_renewals_total", "Lease renewal writes that succeeded.")
	renewalFailuresDesc = desc("dexzd_lease_renewal_failures_total", "Lease renewal writes that failed; every attempt counts.")
	snapshotsDesc       = desc("dexzd_snapshots_total",
		"Snapshots of the local store this process wrote (and truncated the log after).")
	snapshotFailuresDesc = desc("dexzd_snapshot_failures_total",
		"Snapshots or truncations that failed; the log is kept until the next one.")
	snapshotBytesDesc = desc("dexzd_snapshot_bytes", "Size of the last snapshot this process wrote; 0 before the first.")
	logBatchesDesc    = desc("dexzd_log_batches_total", "Log batches this process wrote.")
	logRecordsDesc    = desc("dexzd_log_records_total", "Records in the log batches this process wrote.")
	logBytesDesc      = desc("dexzd_log_bytes_total", "Encoded bytes of the log batches this process wrote.")
	logRetriesDesc    = desc("dexzd_log_write_retries_total", "Log store requests repeated after a transient error.")
	logAdoptedDesc    = desc("dexzd_log_adopted_batches_total",
		"Log batches whose lost write reply was resolved by reading the batch back.")
	valueHitsDesc = desc("dexzd_value_cache_hits_total",
		"Value object reads and writes answered from the process's value cache, without a store request.")
	valueMissesDesc = desc("dexzd_value_cache_misses_total", "Value object reads and writes the value cache could not answer.")
	valueBytesDesc  = desc("dexzd_value_cache_bytes", "Bytes of values the process's value cache holds.")
)

// SetValueCache reports c's counts from now on.
func (m *Metrics) SetValueCache(c *wal.ValueCache) {
	if m != nil {
		m.values.Store(c)
	}
}

// stateCollector exports the values kept outside client_golang's metric
// types: the serving gate, lease epoch, standby state and lag, the lease
// renewal and snapshot counts, the log writers' counters, and the store
// and flow counters.
type stateCollector struct{ m *Metrics }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{leaderDesc, epochDesc, standbyDesc, lagDesc,
		renewalsDesc, renewalFailuresDesc, snapshotsDesc, snapshotFailuresDesc, snapshotBytesDesc, logBatchesDesc, logRecordsDesc, logBytesDesc, logRetriesDesc, logAdoptedDesc,
		valueHitsDesc, valueMissesDesc, valueBytesDesc} {
		ch <- d
	}
	storeDescribe(ch)
	flowDescribe(ch)
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.snapshot()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(leaderDesc, b2f(s.leader))
	gauge(epochDesc, float64(s.epoch))
	for _, st := range standbyStates {
		gauge(standbyDesc, b2f(st == s.state), string(st))
	}
	gauge(lagDesc, s.lag.Seconds())
	counter(renewalsDesc, s.renewals)
	counter(renewalFailuresDesc, s.renewalFailures)
	counter(snapshotsDesc, c.m.snapshots.Load())
	counter(snapshotFailuresDesc, c.m.snapshotFailures.Load())
	gauge(snapshotBytesDesc, float64(c.m.snapshotBytes.Load()))
	counter(logBatchesDesc, s.log.Batches)
	counter(logRecordsDesc, s.log.Records)
	counter(logBytesDesc, s.log.Bytes)
	counter(logRetriesDesc, s.log.Retries)
	counter(logAdoptedDesc, s.log.Adopted)
	vs := c.m.values.Load().Stats()
	counter(valueHitsDesc, vs.Hits)
	counter(valueMissesDesc, vs.Misses)
	gauge(valueBytesDesc, float64(vs.Bytes))
	c.m.store.collect(ch, s.fsyncs)
	c.m.flows.collect(ch)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Handler serves GET /metrics: promhttp over the process's registry, in
// the Prometheus text format or, when the scraper's Accept header asks for
// it, OpenMetrics.
//
// The same listener is the process's HTTP surface for load balancers and
// probes that do not speak gRPC: GET /readyz answers 200 while the
// process is the active one and serves, else 503 with the reason (on a
// standby: that it is one, and to retry on the active process; P3, H2);
// GET /livez answers 200 while the process runs.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
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

// SetNotServingReason sets what /readyz says while the process does not
// serve; empty means a generic reason.
func (m *Metrics) SetNotServingReason(reason string) {
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

// SnapshotWritten records one snapshot attempt: its size when it was
// written, err when it or the truncation after it failed.
func (m *Metrics) SnapshotWritten(bytes int, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.snapshotFailures.Add(1)
		return
	}
	m.snapshots.Add(1)
	m.snapshotBytes.Store(uint64(bytes))
	now := time.Now()
	m.lastSnapshot.Store(&now)
}

// leaseStore counts the lease holder's renewal writes for the metrics:
// the writes of the lease key whose record is neither an acquisition
// (write number 1) nor a release.
type leaseStore struct {
	blob.Store
	key string
	m   *Metrics
}

// MeterLease returns the store to hand to lease.Acquire for the lease at
// key: blobs itself on a nil *Metrics, else blobs counting the lease
// holder's renewal writes.
func (m *Metrics) MeterLease(blobs blob.Store, key string) blob.Store {
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

// Status is one reading of what the metrics know of the process, for its
// node page (package web).
type Status struct {
	// Leader: the process is the active one and serves.
	Leader bool
	// Epoch is the lease epoch held, 0 while none.
	Epoch uint64
	// StandbyState and Lag are dexzd_hot_standby_state and _lag_seconds.
	StandbyState StandbyState
	Lag          time.Duration
	// NotServingReason is what /readyz says while the process does not
	// serve.
	NotServingReason string
	// LeaseRenewals and LeaseRenewalFailures count renewal writes.
	LeaseRenewals, LeaseRenewalFailures uint64
	// Log sums the log writers' counters of this process; LogNextSeq is
	// the sequence number the current writer writes next (the log's end),
	// 0 while there is none.
	Log        wal.Stats
	LogNextSeq uint64
	// Snapshots written and failed; LastSnapshot is when the last one was
	// written (zero before the first) and LastSnapshotBytes its size.
	Snapshots, SnapshotFailures uint64
	LastSnapshot                time.Time
	LastSnapshotBytes           uint64
	// StoreRequests counts the durable store requests by operation.
	StoreRequests map[string]uint64
}

// Status reads the status; the zero Status for a nil *Metrics.
func (m *Metrics) Status() Status {
	if m == nil {
		return Status{}
	}
	s := m.snapshot()
	st := Status{Leader: s.leader, Epoch: s.epoch, StandbyState: s.state, Lag: s.lag,
		LeaseRenewals: s.renewals, LeaseRenewalFailures: s.renewalFailures, Log: s.log,
		Snapshots: m.snapshots.Load(), SnapshotFailures: m.snapshotFailures.Load(),
		LastSnapshotBytes: m.snapshotBytes.Load(), StoreRequests: m.store.requestsByOp()}
	if !s.leader {
		st.NotServingReason = m.notServingReason()
	}
	m.mu.Lock()
	if m.writer != nil {
		st.LogNextSeq = m.writer.NextSeq()
	}
	m.mu.Unlock()
	if t := m.lastSnapshot.Load(); t != nil {
		st.LastSnapshot = *t
	}
	return st
}
