package metrics

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/dexzd/dexzd/internal/blob"
)

// Store request kinds: the op label of dexzd_store_requests_total and
// dexzd_store_request_seconds.
const (
	storeGet = iota
	storePutIfAbsent
	storePutIfMatch
	storeList
	storeDelete
	numStoreOps
)

var storeOpLabels = [numStoreOps]string{"get", "put_if_absent", "put_if_match", "list", "delete"}

// Store request results: the result label. The first four are the classes
// of blob.Classify; canceled is a request that failed because its caller
// cancelled it (not a deadline: a request cut off by a timeout is
// transient, as the log writer treats it).
const (
	storeOK = iota
	storeNotFound
	storePrecondition
	storeTransient
	storePermanent
	storeCanceled
	numStoreResults
)

var storeResultLabels = [numStoreResults]string{"ok", "not_found", "precondition", "transient", "permanent", "canceled"}

// storeResultExpected says which results each kind of request can have by
// the blob.Store contract; those series are exported even while 0, the
// others only once a backend produced them.
var storeResultExpected = [numStoreOps][numStoreResults]bool{
	storeGet:         {storeOK: true, storeNotFound: true, storeTransient: true, storePermanent: true, storeCanceled: true},
	storePutIfAbsent: {storeOK: true, storePrecondition: true, storeTransient: true, storePermanent: true, storeCanceled: true},
	storePutIfMatch:  {storeOK: true, storePrecondition: true, storeTransient: true, storePermanent: true, storeCanceled: true},
	storeList:        {storeOK: true, storeTransient: true, storePermanent: true, storeCanceled: true},
	storeDelete:      {storeOK: true, storeTransient: true, storePermanent: true, storeCanceled: true},
}

// storeResult classifies a request's outcome. A definite answer (not
// found, precondition, permanent) counts as such even if the caller
// cancelled meanwhile.
func storeResult(ctx context.Context, err error) int {
	switch blob.Classify(err) {
	case nil:
		return storeOK
	case blob.ErrNotFound:
		return storeNotFound
	case blob.ErrPrecondition:
		return storePrecondition
	case blob.ErrPermanent:
		return storePermanent
	}
	if errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled) {
		return storeCanceled
	}
	return storeTransient
}

// storeMetrics are the durable store's request counters and latencies.
// The counters are atomics (exported by stateCollector, the unexpected
// results only once they occurred); the latencies a native histogram
// vector with every op's series made up front.
type storeMetrics struct {
	requests [numStoreOps][numStoreResults]atomic.Uint64
	seconds  [numStoreOps]prometheus.Observer
}

// fsyncCounter is a store that counts its fsyncs (fs.Store).
type fsyncCounter interface{ Fsyncs() uint64 }

func (s *storeMetrics) init(f promauto.Factory) {
	v := f.NewHistogramVec(prometheus.HistogramOpts{Name: "dexzd_store_request_seconds",
		Help: "Latency of durable store requests, by kind; every result counts.", Buckets: latencyBuckets}, []string{"op"})
	for op := range s.seconds {
		s.seconds[op] = v.WithLabelValues(storeOpLabels[op])
	}
}

func (s *storeMetrics) observe(op int, ctx context.Context, start time.Time, err error) {
	s.requests[op][storeResult(ctx, err)].Add(1)
	s.seconds[op].Observe(time.Since(start).Seconds())
}

// MeterStore returns s counting its requests, by kind and result, and
// their latency for the metrics; if s counts fsyncs (an fs store: an
// Fsyncs() uint64 method), they are exported too. A nil *Metrics returns s
// itself. Wrap the durable store once, right after opening it, so that the
// lease, the log writer, the hot standby and snapshots all go through it.
func (m *Metrics) MeterStore(s blob.Store) blob.Store {
	if m == nil {
		return s
	}
	if f, ok := s.(fsyncCounter); ok {
		m.mu.Lock()
		m.fsyncs = append(m.fsyncs, f)
		m.mu.Unlock()
	}
	return &meteredStore{s: s, m: &m.store}
}

// meteredStore is a blob.Store that records each request in storeMetrics.
type meteredStore struct {
	s blob.Store
	m *storeMetrics
}

var _ blob.Store = (*meteredStore)(nil)

func (s *meteredStore) Get(ctx context.Context, key string) ([]byte, blob.Version, error) {
	start := time.Now()
	data, v, err := s.s.Get(ctx, key)
	s.m.observe(storeGet, ctx, start, err)
	return data, v, err
}

func (s *meteredStore) PutIfAbsent(ctx context.Context, key string, data []byte) (blob.Version, error) {
	start := time.Now()
	v, err := s.s.PutIfAbsent(ctx, key, data)
	s.m.observe(storePutIfAbsent, ctx, start, err)
	return v, err
}

func (s *meteredStore) PutIfMatch(ctx context.Context, key string, data []byte, v blob.Version) (blob.Version, error) {
	start := time.Now()
	nv, err := s.s.PutIfMatch(ctx, key, data, v)
	s.m.observe(storePutIfMatch, ctx, start, err)
	return nv, err
}

func (s *meteredStore) List(ctx context.Context, prefix, startAfter string, limit int) ([]string, error) {
	start := time.Now()
	keys, err := s.s.List(ctx, prefix, startAfter, limit)
	s.m.observe(storeList, ctx, start, err)
	return keys, err
}

func (s *meteredStore) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := s.s.Delete(ctx, key)
	s.m.observe(storeDelete, ctx, start, err)
	return err
}

func (s *meteredStore) Close() error { return s.s.Close() }

var (
	storeRequestsDesc = desc("dexzd_store_requests_total", "Durable store requests, by kind and result.", "op", "result")
	storeFsyncsDesc   = desc("dexzd_store_fsyncs_total",
		"fsyncs of the fs durable store (strict durability); 0 on other backends.")
)

func storeDescribe(ch chan<- *prometheus.Desc) {
	ch <- storeRequestsDesc
	ch <- storeFsyncsDesc
}

// collect exports the request counters, each expected op and result pair
// even while 0, and the fsyncs of the metered stores.
func (s *storeMetrics) collect(ch chan<- prometheus.Metric, fsyncs uint64) {
	for op := range numStoreOps {
		for res := range numStoreResults {
			if n := s.requests[op][res].Load(); n > 0 || storeResultExpected[op][res] {
				ch <- prometheus.MustNewConstMetric(storeRequestsDesc, prometheus.CounterValue, float64(n),
					storeOpLabels[op], storeResultLabels[res])
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(storeFsyncsDesc, prometheus.CounterValue, float64(fsyncs))
}

// requestsByOp sums the requests of each kind over their results.
func (s *storeMetrics) requestsByOp() map[string]uint64 {
	out := make(map[string]uint64, numStoreOps)
	for op := range s.requests {
		var n uint64
		for r := range s.requests[op] {
			n += s.requests[op][r].Load()
		}
		out[storeOpLabels[op]] = n
	}
	return out
}
