package metrics

import (
	"context"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
	body, ct := scrapeBody(t, New(), "")
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
	body, ct := scrapeBody(t, New(), "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
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
