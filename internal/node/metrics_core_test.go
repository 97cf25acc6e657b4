package node

// The metrics as the process feeds them: a serving core counting its
// flows, its writer's batch hook and the metered durable store, read back
// the way a scraper reads /metrics. Package metrics tests the exposition
// itself.

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// newMetricsHarness is newHarness with metrics: the core counts flows, the
// writer reports batches and the log goes through a metered store.
func newMetricsHarness(t *testing.T, blobs *mem.Store, epoch uint64, m *metrics.Metrics) *harness {
	t.Helper()
	ctx := context.Background()
	store := flowstore.NewMemStore()
	metered := m.MeterStore(blobs)
	next, err := wal.Fence(ctx, metered, testLayout, epoch, 0, serving.ReplayApply(store))
	if err != nil {
		t.Fatal(err)
	}
	c := serving.NewCore(serving.CoreConfig{NodeID: "n1", ProcessID: "p", Epoch: epoch, Store: store, Metrics: m})
	w, err := wal.NewWriter(wal.WriterConfig{Store: metered, Layout: testLayout, Epoch: epoch, NextSeq: next,
		OnDurable: c.OnDurable, OnBatch: m.WriterHook()})
	if err != nil {
		t.Fatal(err)
	}
	c.SetWriter(w)
	wctx, cancel := context.WithCancel(ctx)
	w.Start(wctx)
	c.Start(ctx)
	if err := c.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, blobs: blobs, core: c, w: w, cancelWriter: cancel}
}

// The flow counters move by exactly what the flows did, across a takeover:
// the new lease period's replay of the old one's batches counts nothing,
// the attempts it fails on takeover count as not_completed (T2).
func TestFlowMetrics_CountWhatTheCoreCommits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		m := metrics.New()
		h := newMetricsHarness(t, blobs, 1, m)
		ctx := context.Background()
		s := h.session("w1", 5, "a")

		// f1: attempt 1 fails, attempt 2 completes the flow.
		h.start("f1", "a", "S")
		synctest.Wait()
		task := tasks(s)[0]
		if a, err := s.Result(ctx, task.Token, engine.TaskFailed{Token: task.Token, Failure: engine.Failure{Type: "Boom"}}); err != nil || a.Status != server.AckAccepted {
			t.Fatalf("failure ack = %+v, %v", a, err)
		}
		time.Sleep(2 * time.Second) // the retry's backoff
		synctest.Wait()
		task = tasks(s)[0]
		if task.Attempt != 2 {
			t.Fatalf("retry = %+v", task)
		}
		if a := h.complete(s, task); a.Status != server.AckAccepted {
			t.Fatalf("ack = %+v", a)
		}
		// f2: its worker goes away, attempt 1 times out, attempt 2 is
		// running when the process crashes.
		h.start("f2", "a", "S")
		synctest.Wait()
		if got := tasks(s); len(got) != 1 || got[0].FlowID != "f2" {
			t.Fatalf("tasks = %+v", got)
		}
		s.Close()
		s2 := h.session("w2", 5, "a")
		time.Sleep(35 * time.Second) // the 30 s attempt timeout and the backoff
		synctest.Wait()
		if got := tasks(s2); len(got) != 1 || got[0].Attempt != 2 {
			t.Fatalf("after the timeout: %+v", got)
		}
		// f3: cancelled by its client.
		h.start("f3", "a", "W")
		if _, err := h.core.Command(ctx, "f3", engine.StopFlow{FlowID: "f3"}); err != nil {
			t.Fatal(err)
		}
		h.crash()

		h2 := newMetricsHarness(t, blobs, 2, m)
		defer h2.stop()
		s3 := h2.session("w3", 5, "a")
		synctest.Wait() // a NOT_COMPLETED retry waits no backoff
		got := tasks(s3)
		if len(got) != 1 || got[0].FlowID != "f2" || got[0].Attempt != 3 {
			t.Fatalf("after the takeover: %+v", got)
		}
		if a := h2.complete(s3, got[0]); a.Status != server.AckAccepted {
			t.Fatalf("ack = %+v", a)
		}

		want := serving.FlowCounts{
			Started:  3,
			Closed:   [serving.NumCloseStatuses]uint32{serving.CloseCompleted: 2, serving.CloseCanceled: 1},
			Attempts: [serving.NumAttemptOutcomes]uint32{serving.AttemptSucceeded: 2, serving.AttemptFailed: 1, serving.AttemptTimedOut: 1, serving.AttemptNotCompleted: 1},
		}
		fams := scrapeFamilies(t, m)
		if got := flowMetricsOf(fams); got != want {
			t.Fatalf("flow metrics = %+v, want %+v", got, want)
		}
		// Every batch either writer made durable is in the histograms, and
		// the log's writes in the store counters.
		batches := h.w.Stats().Batches + h2.w.Stats().Batches
		for series, want := range map[string]uint64{
			"dexzd_log_batch_records_count":       batches,
			"dexzd_log_batch_write_seconds_count": batches,
			"dexzd_log_batch_bytes_sum":           h.w.Stats().Bytes + h2.w.Stats().Bytes,
		} {
			if got, ok := sample(fams, series); !ok || got != float64(want) {
				t.Errorf("%s = %v (found: %v), want %d", series, got, ok, want)
			}
		}
		// + the two fence batches, and the manifest the first fence
		// created to record its position (the second one replaced it).
		if n, _ := sample(fams, "dexzd_store_requests_total", "op", "put_if_absent", "result", "ok"); n != float64(batches+3) {
			t.Errorf("put_if_absent ok = %v, want %d batches, 2 fences and the manifest", n, batches)
		}
	})
}

// flowMetricsOf reads the flow counters back as serving.FlowCounts; a
// series that is not exported (status other while 0) counts 0.
func flowMetricsOf(fams map[string]*dto.MetricFamily) serving.FlowCounts {
	var c serving.FlowCounts
	n, _ := sample(fams, "dexzd_flows_started_total")
	c.Started = uint32(n)
	for i, status := range serving.CloseStatusLabels {
		n, _ := sample(fams, "dexzd_flows_completed_total", "status", status)
		c.Closed[i] = uint32(n)
	}
	for i, outcome := range serving.AttemptOutcomeLabels {
		n, _ := sample(fams, "dexzd_step_attempts_total", "outcome", outcome)
		c.Attempts[i] = uint32(n)
	}
	return c
}

// scrapeFamilies GETs /metrics from m's handler and parses it as a
// Prometheus scraper does.
func scrapeFamilies(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), "GET", "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if rec.Code != 200 || err != nil {
		t.Fatalf("GET /metrics: %d, %v", rec.Code, err)
	}
	return fams
}

// sample is the value of series (a family's name, or a histogram's
// name_sum or name_count) with exactly the given label pairs (name,
// value, ...); ok is false when fams has no such series.
func sample(fams map[string]*dto.MetricFamily, series string, labels ...string) (v float64, ok bool) {
	name, part := series, ""
	if fams[series] == nil {
		for _, suffix := range []string{"_sum", "_count"} {
			if base, cut := strings.CutSuffix(series, suffix); cut && fams[base] != nil {
				name, part = base, suffix
			}
		}
	}
	for _, sm := range fams[name].GetMetric() {
		if len(sm.GetLabel())*2 != len(labels) {
			continue
		}
		match := true
		for i, l := range sm.GetLabel() {
			match = match && l.GetName() == labels[2*i] && l.GetValue() == labels[2*i+1]
		}
		switch {
		case !match:
		case part == "_sum":
			return sm.GetHistogram().GetSampleSum(), true
		case part == "_count":
			return float64(sm.GetHistogram().GetSampleCount()), true
		case sm.GetCounter() != nil:
			return sm.GetCounter().GetValue(), true
		default:
			return sm.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// Bounded cardinality: after flows with distinct IDs ran (and failed,
// retried and completed), no label of any dexzd_* series carries a flow
// ID, every label is one of the fixed dimensions, and the process has no
// more dexzd_* series than a fresh one (no flow adds a series).
func TestMetrics_NoFlowIDLabels(t *testing.T) {
	t.Parallel()
	fresh := dexzdSeries(t, scrapeFamilies(t, metrics.New()))
	synctest.Test(t, func(t *testing.T) {
		m := metrics.New()
		h := newMetricsHarness(t, mem.New(), 1, m)
		defer h.stop()
		s := h.session("w1", 50, "a")
		const flows = 20
		var ids []string
		for i := range flows {
			id := fmt.Sprintf("card-flow-%02d", i)
			ids = append(ids, id)
			h.start(id, "a", "S")
		}
		synctest.Wait()
		done := 0
		for _, task := range tasks(s) {
			if a := h.complete(s, task); a.Status != server.AckAccepted {
				t.Fatalf("ack = %+v", a)
			}
			done++
		}
		if done != flows {
			t.Fatalf("completed %d flows, want %d", done, flows)
		}
		if got := flowMetricsOf(scrapeFamilies(t, m)); got.Started != flows {
			t.Fatalf("flows started = %d, want %d", got.Started, flows)
		}
		fams := scrapeFamilies(t, m)
		allowed := []string{"state", "limit", "op", "result", "status", "outcome"}
		series := dexzdSeries(t, fams)
		for _, s := range series {
			for _, id := range ids {
				if strings.Contains(s, id) {
					t.Errorf("series %s carries flow ID %s", s, id)
				}
			}
		}
		for _, mf := range fams {
			if !strings.HasPrefix(mf.GetName(), "dexzd_") {
				continue
			}
			for _, sm := range mf.GetMetric() {
				for _, l := range sm.GetLabel() {
					if !slices.Contains(allowed, l.GetName()) {
						t.Errorf("%s has label %s=%q, not one of the fixed dimensions %v", mf.GetName(), l.GetName(), l.GetValue(), allowed)
					}
				}
			}
		}
		if len(series) > len(fresh) {
			t.Errorf("%d dexzd_ series after %d flows, %d on a fresh process; new: %v",
				len(series), flows, len(fresh), newSeries(fresh, series))
		}
	})
}

// dexzdSeries lists the dexzd_* series as name{label="value",...}.
func dexzdSeries(t *testing.T, fams map[string]*dto.MetricFamily) []string {
	t.Helper()
	var out []string
	for name, mf := range fams {
		if !strings.HasPrefix(name, "dexzd_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out = append(out, name+"{"+strings.Join(ls, ",")+"}")
		}
	}
	slices.Sort(out)
	return out
}

func newSeries(before, after []string) []string {
	var out []string
	for _, s := range after {
		if !slices.Contains(before, s) {
			out = append(out, s)
		}
	}
	return out
}
