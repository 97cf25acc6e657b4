package bench

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// exposition is what /metrics of a server with the store metrics looks
// like (abridged), with the syntax the parser must accept.
const exposition = `# HELP dexzd_leader 1 while this process is the active process of its node and serves, else 0.
# TYPE dexzd_leader gauge
dexzd_leader 1
# HELP dexzd_store_requests_total Durable store requests, by kind and result.
# TYPE dexzd_store_requests_total counter
dexzd_store_requests_total{op="get",result="ok"} 12
dexzd_store_requests_total{op="get",result="not_found"} 3
dexzd_store_requests_total{op="put_if_absent",result="ok"} 100
dexzd_store_requests_total{op="put_if_absent",result="precondition"} 1
dexzd_store_requests_total{op="put_if_match",result="ok"} 20
dexzd_store_requests_total{op="list",result="ok"} 4
dexzd_store_request_seconds_bucket{op="get",le="+Inf"} 15
dexzd_store_request_seconds_sum{op="get"} 0.25
dexzd_store_fsyncs_total 0
dexzd_log_batches_total 90 1700000000000

weird_total{a="x\"y\\z\nw", b = "2" ,} +Inf
`

func TestParseMetrics_Exposition(t *testing.T) {
	t.Parallel()
	samples, err := ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 12 {
		t.Fatalf("%d samples, want 12: %+v", len(samples), samples)
	}
	want := []Sample{
		{Name: "dexzd_leader", Value: 1},
		{Name: "dexzd_store_requests_total", Labels: map[string]string{"op": "get", "result": "ok"}, Value: 12},
	}
	for i, w := range want {
		if !reflect.DeepEqual(samples[i], w) {
			t.Errorf("sample %d = %+v, want %+v", i, samples[i], w)
		}
	}
	if s := samples[10]; s.Name != "dexzd_log_batches_total" || s.Value != 90 {
		t.Errorf("sample with a timestamp = %+v", s)
	}
	last := samples[11]
	if last.Labels["a"] != "x\"y\\z\nw" || last.Labels["b"] != "2" || !math.IsInf(last.Value, 1) {
		t.Errorf("escaped labels and +Inf: %+v", last)
	}
}

func TestParseMetrics_Malformed(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"name_without_value",
		`m{op="get" 1`,
		`m{op=get} 1`,
		`m{op="get} 1`,
		"m 1 2 3",
		"m one",
	} {
		if s, err := ParseMetrics(strings.NewReader(in + "\n")); err == nil {
			t.Errorf("ParseMetrics(%q) = %+v, want an error", in, s)
		}
	}
}

func TestStoreCounts_PutsGetsAndDelta(t *testing.T) {
	t.Parallel()
	samples, err := ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	c := StoreCountsOf(samples)
	want := StoreCounts{Puts: 121, Gets: 15, Requests: 140, HasRequests: true, Fsyncs: 0, HasFsyncs: true,
		LogBatches: 90, HasLogBatches: true}
	if c != want {
		t.Errorf("StoreCountsOf = %+v, want %+v", c, want)
	}
	later := c
	later.Puts, later.Gets, later.Requests, later.Fsyncs, later.LogBatches = 221, 16, 241, 7, 140
	if d := later.Sub(c); d != (StoreCounts{Puts: 100, Gets: 1, Requests: 101, HasRequests: true, Fsyncs: 7, HasFsyncs: true,
		LogBatches: 50, HasLogBatches: true}) {
		t.Errorf("Sub = %+v", d)
	}
	// A server without the store metrics (before they existed): nothing
	// present, and a delta against it has nothing present either.
	old := StoreCountsOf([]Sample{{Name: "dexzd_leader", Value: 1}})
	if old.HasRequests || old.HasFsyncs || old.HasLogBatches {
		t.Errorf("counts of a server without store metrics: %+v", old)
	}
	if d := c.Sub(old); d.HasRequests || d.HasFsyncs || d.HasLogBatches {
		t.Errorf("delta against a reading without the counters: %+v", d)
	}
}

func TestReadStoreCounts_HTTP(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(exposition))
	}))
	defer srv.Close()
	c, err := ReadStoreCounts(context.Background(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if c.Puts != 121 || c.Gets != 15 {
		t.Errorf("counts = %+v", c)
	}
	if _, err := ReadStoreCounts(context.Background(), srv.URL+"/other"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("ReadStoreCounts of a missing page = %v, want a 404 error", err)
	}
}

func TestParseVmHWM(t *testing.T) {
	t.Parallel()
	status := "Name:\tdex-server-zd\nVmPeak:\t 1300000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40000 kB\n"
	got, err := parseVmHWM([]byte(status))
	if err != nil || got != 51200<<10 {
		t.Errorf("parseVmHWM = %d, %v; want %d", got, err, 51200<<10)
	}
	for _, bad := range []string{"Name:\tx\n", "VmHWM:\t12 MB\n", "VmHWM:\tlots kB\n"} {
		if v, err := parseVmHWM([]byte(bad)); err == nil {
			t.Errorf("parseVmHWM(%q) = %d, want an error", bad, v)
		}
	}
}
