package metrics

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// u64 is n as the text format writes a sample value (expfmt: %g, so
// 1e+06 from a million on).
func u64(n uint64) string { return strconv.FormatFloat(float64(n), 'g', -1, 64) }

var testLayout = wal.MustLayout("", "n1")

// WriteText writes m's registry in the Prometheus text format, as GET
// /metrics does for a scraper that asks for no other format.
func (m *Metrics) WriteText(w io.Writer) error {
	families, err := m.reg.Gather()
	if err != nil {
		return err
	}
	for _, mf := range families {
		if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
			return err
		}
	}
	return nil
}

// metricsText returns m's text after checking its format.
func metricsText(t *testing.T, m *Metrics) string {
	t.Helper()
	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if err := checkExposition(b.String()); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	return b.String()
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)
	labelPair  = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"$`)
)

// checkExposition checks the Prometheus text format (0.0.4) the way a
// scraper reads it: every sample belongs to the family whose HELP and TYPE
// lines came last, in one block; no series appears twice; values parse;
// a histogram's buckets are cumulative and end with +Inf, whose count is
// the _count of the same labels.
func checkExposition(text string) error {
	if !strings.HasSuffix(text, "\n") {
		return fmt.Errorf("the text does not end with a newline")
	}
	// Prometheus's own parser first: what a scraper accepts.
	parser := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(text)); err != nil {
		return fmt.Errorf("prometheus text parser: %w", err)
	}
	var family, typ string
	seenFamily := map[string]bool{}
	seenSeries := map[string]bool{}
	type hist struct {
		last        float64
		inf, count  float64
		hasInf, has bool
	}
	hists := map[string]*hist{}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		n := i + 1
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, _, _ := strings.Cut(rest, " ")
			if seenFamily[name] {
				return fmt.Errorf("line %d: family %s appears twice", n, name)
			}
			seenFamily[name], family, typ = true, name, ""
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, t, _ := strings.Cut(rest, " ")
			if name != family || typ != "" {
				return fmt.Errorf("line %d: TYPE of %s does not follow its HELP", n, name)
			}
			switch t {
			case "counter", "gauge", "histogram", "summary":
				typ = t
			default:
				return fmt.Errorf("line %d: type %q", n, t)
			}
			continue
		}
		mm := sampleLine.FindStringSubmatch(line)
		if mm == nil {
			return fmt.Errorf("line %d: not a sample: %q", n, line)
		}
		name, labels, value := mm[1], mm[2], mm[3]
		if typ == "" {
			return fmt.Errorf("line %d: sample %s before its family's TYPE", n, name)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("line %d: value %q", n, value)
		}
		if seenSeries[name+labels] {
			return fmt.Errorf("line %d: series %s%s twice", n, name, labels)
		}
		seenSeries[name+labels] = true
		var le string
		var rest []string
		if labels != "" {
			for p := range strings.SplitSeq(labels[1:len(labels)-1], ",") {
				lp := labelPair.FindStringSubmatch(p)
				if lp == nil {
					return fmt.Errorf("line %d: label %q", n, p)
				}
				if lp[1] == "le" {
					le = lp[2]
				} else {
					rest = append(rest, p)
				}
			}
		}
		key := strings.Join(rest, ",")
		switch {
		case typ == "summary":
			if name != family && name != family+"_sum" && name != family+"_count" {
				return fmt.Errorf("line %d: sample %s in summary %s", n, name, family)
			}
		case typ != "histogram":
			if name != family {
				return fmt.Errorf("line %d: sample %s in family %s", n, name, family)
			}
			if typ == "counter" && !strings.HasSuffix(name, "_total") {
				return fmt.Errorf("line %d: counter %s does not end in _total", n, name)
			}
		case name == family+"_bucket":
			h := hists[family+"{"+key]
			if h == nil {
				h = &hist{}
				hists[family+"{"+key] = h
			}
			if h.hasInf || v < h.last || le == "" {
				return fmt.Errorf("line %d: bucket %q out of order or not cumulative", n, line)
			}
			if le == "+Inf" {
				h.hasInf, h.inf = true, v
			} else if _, err := strconv.ParseFloat(le, 64); err != nil {
				return fmt.Errorf("line %d: le %q", n, le)
			}
			h.last = v
		case name == family+"_sum":
		case name == family+"_count":
			h := hists[family+"{"+key]
			if h == nil || !h.hasInf || h.inf != v {
				return fmt.Errorf("line %d: %s does not match its +Inf bucket", n, line)
			}
			h.has, h.count = true, v
		default:
			return fmt.Errorf("line %d: sample %s in histogram %s", n, name, family)
		}
	}
	for k, h := range hists {
		if !h.has {
			return fmt.Errorf("histogram %s has no _count", k)
		}
	}
	return nil
}

// The batch histograms: each observation lands in the first bucket whose
// upper bound it does not exceed (le is inclusive), buckets are cumulative,
// sums are in seconds and bytes.
func TestMetrics_BatchHistograms(t *testing.T) {
	t.Parallel()
	m := New()
	m.ObserveBatch(wal.BatchStats{Seq: 0, Duration: 200 * time.Microsecond, Bytes: 256, Records: 1})
	m.ObserveBatch(wal.BatchStats{Seq: 1, Duration: 3 * time.Millisecond, Bytes: 300, Records: 7})
	m.ObserveBatch(wal.BatchStats{Seq: 2, Duration: 11 * time.Second, Bytes: 100 << 20, Records: 10000})
	text := metricsText(t, m)
	for _, want := range []string{
		"# TYPE dexzd_log_batch_write_seconds histogram\n" +
			`dexzd_log_batch_write_seconds_bucket{le="0.0002"} 1` + "\n" +
			`dexzd_log_batch_write_seconds_bucket{le="0.0005"} 1` + "\n",
		`dexzd_log_batch_write_seconds_bucket{le="0.0025"} 1` + "\n" +
			`dexzd_log_batch_write_seconds_bucket{le="0.005"} 2` + "\n",
		`dexzd_log_batch_write_seconds_bucket{le="10"} 2` + "\n" +
			`dexzd_log_batch_write_seconds_bucket{le="+Inf"} 3` + "\n" +
			"dexzd_log_batch_write_seconds_sum 11.0032\n" +
			"dexzd_log_batch_write_seconds_count 3\n",
		`dexzd_log_batch_bytes_bucket{le="256"} 1` + "\n" + `dexzd_log_batch_bytes_bucket{le="1024"} 2` + "\n",
		// expfmt writes le and values with %g: 64 MiB is 6.7108864e+07.
		`dexzd_log_batch_bytes_bucket{le="6.7108864e+07"} 2` + "\n" + `dexzd_log_batch_bytes_bucket{le="+Inf"} 3` + "\n",
		"dexzd_log_batch_bytes_sum " + u64(256+300+100<<20) + "\n",
		`dexzd_log_batch_records_bucket{le="5"} 1` + "\n" + `dexzd_log_batch_records_bucket{le="10"} 2` + "\n",
		`dexzd_log_batch_records_bucket{le="5000"} 2` + "\n" + `dexzd_log_batch_records_bucket{le="10000"} 3` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// The writer hook records every batch a real writer makes durable: the
// histograms agree with the writer's own counters.
func TestMetrics_WriterHookRecordsEveryBatch(t *testing.T) {
	t.Parallel()
	m := New()
	w, err := wal.NewWriter(wal.WriterConfig{Store: mem.New(), Layout: testLayout, Epoch: 1,
		OnDurable: func(wal.Batch) error { return nil }, OnBatch: m.WriterHook()})
	if err != nil {
		t.Fatal(err)
	}
	w.Start(t.Context())
	var futs []wal.Future
	for i := range 50 {
		futs = append(futs, w.SubmitAsync(fmt.Appendf(nil, "record %d", i)))
	}
	for _, f := range futs {
		if _, err := f.Result(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	text := metricsText(t, m)
	for _, want := range []string{
		"dexzd_log_batch_write_seconds_count " + u64(st.Batches) + "\n",
		"dexzd_log_batch_records_sum 50\n",
		"dexzd_log_batch_records_count " + u64(st.Batches) + "\n",
		"dexzd_log_batch_bytes_sum " + u64(st.Bytes) + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
}

// A nil *Metrics records nothing and costs nothing: no writer hook, the
// store itself instead of a wrapper.
func TestMetrics_NilRecordsNothing(t *testing.T) {
	t.Parallel()
	var m *Metrics
	if m.WriterHook() != nil {
		t.Error("a nil *Metrics gives a writer hook")
	}
	s := mem.New()
	if got := m.MeterStore(s); got != s {
		t.Errorf("MeterStore on a nil *Metrics = %T, want the store itself", got)
	}
	m.ObserveBatch(wal.BatchStats{Duration: time.Second})
	m.CountFlows(&serving.FlowCounts{Started: 1})
}

// A fresh process's text: every family once with HELP and TYPE, in the
// format a scraper parses, served by the handler with the text content
// type.
func TestMetrics_TextFormat(t *testing.T) {
	t.Parallel()
	m := New()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), "GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type = %q", ct)
	}
	text := rec.Body.String()
	if err := checkExposition(text); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var families []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "# TYPE "); ok {
			families = append(families, rest)
		}
	}
	for _, want := range []string{
		"dexzd_log_batch_write_seconds histogram", "dexzd_log_batch_bytes histogram", "dexzd_log_batch_records histogram",
		"dexzd_store_requests_total counter", "dexzd_store_request_seconds histogram", "dexzd_store_fsyncs_total counter",
		"dexzd_flows_started_total counter", "dexzd_flows_completed_total counter", "dexzd_step_attempts_total counter",
		// The Go runtime and process collectors (issue 13 item 9).
		"go_goroutines gauge", "go_memstats_heap_alloc_bytes gauge", "go_gc_duration_seconds summary",
		"process_cpu_seconds_total counter", "process_resident_memory_bytes gauge", "process_open_fds gauge",
	} {
		if !strings.Contains(strings.Join(families, "\n")+"\n", want+"\n") {
			t.Errorf("no family %q in %q", want, families)
		}
	}
	for _, want := range []string{
		`dexzd_store_requests_total{op="get",result="not_found"} 0`,
		`dexzd_store_requests_total{op="put_if_absent",result="precondition"} 0`,
		`dexzd_store_request_seconds_bucket{op="delete",le="+Inf"} 0`,
		`dexzd_flows_completed_total{status="canceled"} 0`,
		`dexzd_step_attempts_total{outcome="timed_out"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, absent := range []string{`op="get",result="precondition"`, `status="other"`} {
		if strings.Contains(text, absent) {
			t.Errorf("metrics have %q while it is 0 and not expected", absent)
		}
	}
}

// The format checker itself rejects what a scraper would.
func TestCheckExposition_RejectsBrokenText(t *testing.T) {
	t.Parallel()
	const head = "# HELP h x\n# TYPE h histogram\n"
	for name, text := range map[string]string{
		"no TYPE":          "# HELP a x\na 1\n",
		"twice":            "# HELP a_total x\n# TYPE a_total counter\na_total 1\na_total 2\n",
		"foreign sample":   "# HELP a_total x\n# TYPE a_total counter\nb_total 1\n",
		"not cumulative":   head + "h_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
		"count mismatch":   head + "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n",
		"no +Inf":          head + "h_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
		"bad label":        "# HELP a x\n# TYPE a gauge\na{x=1} 1\n",
		"counter name":     "# HELP a x\n# TYPE a counter\na 1\n",
		"family twice":     "# HELP a x\n# TYPE a gauge\na 1\n# HELP a x\n# TYPE a gauge\n",
		"no final newline": "# HELP a x\n# TYPE a gauge\na 1",
	} {
		if checkExposition(text) == nil {
			t.Errorf("%s: accepted %q", name, text)
		}
	}
	if err := checkExposition(head + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1.5\nh_count 2\n"); err != nil {
		t.Errorf("a valid histogram: %v", err)
	}
}

// Overload refusals are counted by the limit they hit, every limit listed
// from the start (a counter that appears only on the first refusal breaks
// rate() alerts); a limit nobody names is ignored.
func TestMetrics_RefusalsByLimit(t *testing.T) {
	t.Parallel()
	m := New()
	m.CountRefused("limits.maxQueuedTasks")
	m.CountRefused("limits.maxQueuedTasks")
	m.CountRefused("limits.maxFlowWaiters")
	m.CountRefused("no.such.limit")
	var text strings.Builder
	if err := m.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := checkExposition(text.String()); err != nil {
		t.Fatalf("%v\n%s", err, text.String())
	}
	for _, want := range []string{
		"# TYPE dexzd_requests_refused_total counter\n",
		`dexzd_requests_refused_total{limit="limits.maxPendingRequests"} 0` + "\n",
		`dexzd_requests_refused_total{limit="limits.maxQueuedTasks"} 2` + "\n",
		`dexzd_requests_refused_total{limit="limits.maxFlowWaiters"} 1` + "\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	var nilMetrics *Metrics
	nilMetrics.CountRefused("limits.maxQueuedTasks")
}

// The metrics text: every series with HELP and TYPE, dexzd_leader from the
// serving instance's gate, one standby state set.
//
// Covers: P4
func TestMetrics_Text(t *testing.T) {
	m := New()
	var text strings.Builder
	if err := m.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# TYPE dexzd_leader gauge\ndexzd_leader 0\n",
		"# TYPE dexzd_node_epoch gauge\ndexzd_node_epoch 0\n",
		"dexzd_hot_standby_state{state=\"not_standby\"} 1\n",
		"dexzd_hot_standby_state{state=\"cold\"} 0\n",
		"dexzd_hot_standby_state{state=\"following\"} 0\n",
		"# TYPE dexzd_lease_renewals_total counter\ndexzd_lease_renewals_total 0\n",
		"dexzd_log_batches_total 0\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, text.String())
		}
	}

	gate := &fakeGate{serving: true}
	m.SetStandbyState(StandbyCold)
	m.SetActive(gate)
	m.SetEpoch(7)
	m.leaseRenewal(nil)
	m.leaseRenewal(nil)
	m.leaseRenewal(errors.New("timeout"))
	s := m.snapshot()
	if !s.leader || s.epoch != 7 || s.state != StandbyCold || s.renewals != 2 || s.renewalFailures != 1 {
		t.Fatalf("snapshot = %+v", s)
	}
	gate.serving = false // lease no longer valid: not the leader at once
	if m.snapshot().leader {
		t.Fatal("dexzd_leader is 1 while the instance does not serve")
	}
	var nilMetrics *Metrics
	nilMetrics.leaseRenewal(nil) // a nil *Metrics records nothing
	nilMetrics.SetActive(gate)
}

type fakeGate struct{ serving bool }

func (g *fakeGate) Serving() bool { return g.serving }

// The lease store wrapper counts renewal writes only: not the acquisition
// (write 1), not the release.
func TestLeaseStore_CountsRenewals(t *testing.T) {
	ctx := t.Context()
	m := New()
	raw := mem.New()
	const key = "nodes/n1/lease"
	s := m.MeterLease(raw, key)
	rec := lease.Record{NodeID: "n1", Epoch: 1, Holder: "h", Duration: time.Second, RenewedAt: time.Now().UTC(), Write: 1}
	v, err := s.PutIfAbsent(ctx, key, rec.Encode())
	if err != nil {
		t.Fatal(err)
	}
	rec.Write = 2
	if v, err = s.PutIfMatch(ctx, key, rec.Encode(), v); err != nil {
		t.Fatal(err)
	}
	rec.Write = 3
	if _, err := s.PutIfMatch(ctx, key, rec.Encode(), "stale"); !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("stale renewal = %v", err)
	}
	rec.Write, rec.Released = 4, true
	if _, err := s.PutIfMatch(ctx, key, rec.Encode(), v); err != nil {
		t.Fatal(err)
	}
	if got := m.snapshot(); got.renewals != 1 || got.renewalFailures != 1 {
		t.Fatalf("renewals %d, failures %d; want 1, 1", got.renewals, got.renewalFailures)
	}
}
