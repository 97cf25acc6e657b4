package node

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/server"
)

// scrapeBody GETs /metrics from m's handler with the given Accept
// header and returns the body and its Content-Type.
func scrapeBody(t *testing.T, m *Metrics, accept string) (body, contentType string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(context.Background(), "GET", "/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	m.Handler().ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String(), rec.Header().Get("Content-Type")
}

// parseFamilies parses the text format as a Prometheus scraper does.
func parseFamilies(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, text)
	}
	return fams
}

// docSeries are the dexzd_* selectors the operator docs name: a metric
// name, optionally with label matchers (`{state="following"}`,
// `{state=~"failed|restarting"}`).
var docSeries = regexp.MustCompile(`(dexzd_[a-z0-9_]+)(\{[^}]*\})?`)

var docMatcher = regexp.MustCompile(`([a-z_]+)(=~|=)"([^"]*)"`)

// Every series docs/kubernetes.md (whose alert rules scrape it) and the
// README name is on a fresh process's /metrics, parsed by expfmt: the
// family (a histogram's _bucket, _sum and _count by its family), and for
// each label matcher a series with that label value, at 0 from the start
// so that rate() and absent() rules find it.
func TestMetrics_DocumentedSeriesExist(t *testing.T) {
	t.Parallel()
	body, ct := scrapeBody(t, NewMetrics(), "")
	if !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type = %q", ct)
	}
	fams := parseFamilies(t, body)
	checked := 0
	for _, doc := range []string{"../../docs/kubernetes.md", "../../README.md"} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, sel := range docSeries.FindAllStringSubmatch(string(text), -1) {
			checked++
			name := sel[1]
			mf := fams[name]
			if mf == nil {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if base, ok := strings.CutSuffix(name, suffix); ok && fams[base] != nil &&
						fams[base].GetType() == dto.MetricType_HISTOGRAM {
						mf = fams[base]
					}
				}
			}
			if mf == nil {
				t.Errorf("%s names %s; /metrics has no such family", doc, sel[0])
				continue
			}
			for _, mt := range docMatcher.FindAllStringSubmatch(sel[2], -1) {
				values := []string{mt[3]}
				if mt[2] == "=~" {
					values = strings.Split(mt[3], "|")
				}
				for _, v := range values {
					if !hasLabel(mf, mt[1], v) {
						t.Errorf("%s names %s; /metrics has no %s series with %s=%q", doc, sel[0], mf.GetName(), mt[1], v)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("found only %d dexzd_ selectors in the docs; the pattern no longer matches them", checked)
	}
}

func hasLabel(mf *dto.MetricFamily, name, value string) bool {
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				return true
			}
		}
	}
	return false
}

// A scraper that asks for OpenMetrics gets it (promhttp negotiation), with
// the same dexzd_* families.
func TestMetrics_OpenMetricsNegotiated(t *testing.T) {
	t.Parallel()
	body, ct := scrapeBody(t, NewMetrics(), "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
	if !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Errorf("Content-Type = %q, want OpenMetrics", ct)
	}
	if !strings.HasSuffix(body, "# EOF\n") {
		t.Errorf("OpenMetrics body does not end with # EOF")
	}
	for _, want := range []string{"# TYPE dexzd_leader gauge\n", "# TYPE dexzd_log_batch_write_seconds histogram\n",
		"# TYPE dexzd_store_requests counter\n", `dexzd_store_requests_total{op="get",result="ok"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("OpenMetrics body lacks %q", want)
		}
	}
}

// Bounded cardinality: after flows with distinct IDs ran (and failed,
// retried and completed), no label of any dexzd_* series carries a flow
// ID, every label is one of the fixed dimensions, and the process has no
// more dexzd_* series than a fresh one (no flow adds a series).
func TestMetrics_NoFlowIDLabels(t *testing.T) {
	t.Parallel()
	fresh := dexzdSeries(t, parseFamilies(t, mustText(t, NewMetrics())))
	synctest.Test(t, func(t *testing.T) {
		m := NewMetrics()
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
		if got := flowMetricsOf(m); got.Started != flows {
			t.Fatalf("flows started = %d, want %d", got.Started, flows)
		}
		body, _ := scrapeBody(t, m, "")
		allowed := []string{"state", "limit", "op", "result", "status", "outcome"}
		series := dexzdSeries(t, parseFamilies(t, body))
		for _, s := range series {
			for _, id := range ids {
				if strings.Contains(s, id) {
					t.Errorf("series %s carries flow ID %s", s, id)
				}
			}
		}
		for _, mf := range parseFamilies(t, body) {
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

func mustText(t *testing.T, m *Metrics) string {
	t.Helper()
	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
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
