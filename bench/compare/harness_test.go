package main

import (
	"os"
	"testing"
)

func TestMediansAndRatios(t *testing.T) {
	t.Parallel()
	runs := []Measurement{
		{Engine: "dexzd", FlowsPerSec: 300, P50MS: 10, P99MS: 30, CPUMSPerFlow: 1},
		{Engine: "dexzd", FlowsPerSec: 100, P50MS: 30, P99MS: 90, CPUMSPerFlow: 3},
		{Engine: "dexzd", FlowsPerSec: 200, P50MS: 20, P99MS: 60, CPUMSPerFlow: 2},
		{Engine: "dbos", FlowsPerSec: 100, P50MS: 40, P99MS: 80, CPUMSPerFlow: 4},
		{Engine: "dbos", FlowsPerSec: 999, Error: "failed"},
		{Engine: "restate", FlowsPerSec: 50, P50MS: 20, P99MS: 120, CPUMSPerFlow: 8},
	}
	med := medians(runs, []string{"dexzd", "dbos", "restate", "temporal"})
	if got := med["dexzd"]; got.FlowsPerSec != 200 || got.P50MS != 20 || got.Round != 3 {
		t.Errorf("dexzd median = %+v, want 200 flows/s, p50 20, 3 rounds", got)
	}
	if got := med["dbos"]; got.FlowsPerSec != 100 || got.Round != 1 {
		t.Errorf("dbos median = %+v, want the one round without an error", got)
	}
	if _, ok := med["temporal"]; ok {
		t.Error("temporal has a median without a run")
	}
	r := ratios(med)
	for _, c := range []struct {
		engine, metric string
		want           float64
	}{
		{"dexzd", "flows/s", 2},       // best peer: dbos 100
		{"dexzd", "p50 ms", 1},        // best peer: restate 20
		{"dexzd", "p99 ms", 0.75},     // best peer: dbos 80
		{"dexzd", "CPU ms/flow", 0.5}, // best peer: dbos 4
		{"restate", "flows/s", 0.5},
	} {
		if got := r[c.engine][c.metric]; got != c.want {
			t.Errorf("ratio %s %s = %v, want %v", c.engine, c.metric, got, c.want)
		}
	}
}

func TestTreeCPU_Self(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	st, err := readProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != os.Getppid() {
		t.Errorf("ppid = %d, want %d", st.ppid, os.Getppid())
	}
	if _, err := treeCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags([]string{"--flows", "10", "--engines", "dexzd, dbos", "--engine-flows", "temporal=5"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Flows != 10 || len(cfg.Engines) != 2 || cfg.Engines[1] != "dbos" || cfg.EngineFlows["temporal"] != 5 {
		t.Errorf("parseFlags = %+v", cfg)
	}
	if _, err := parseFlags([]string{"--engine-flows", "temporal"}); err == nil {
		t.Error("--engine-flows temporal: no error")
	}
}

// Dex-ZD's serve engines are not peers: the ratios compare with DBOS,
// Restate and Temporal only. Their store figures get medians of the rounds
// that have them.
func TestMedians_DexZDEnginesAndStoreFigures(t *testing.T) {
	t.Parallel()
	f := func(v float64) *float64 { return &v }
	runs := []Measurement{
		{Engine: "dexzd-s3", FlowsPerSec: 900, PutsPerStep: f(0.4)},
		{Engine: "dexzd-s3", FlowsPerSec: 700, PutsPerStep: f(0.6)},
		{Engine: "dexzd-s3", FlowsPerSec: 800, PutsPerStep: nil},
		{Engine: "dexzd-pg", FlowsPerSec: 50},
		{Engine: "dbos", FlowsPerSec: 100},
	}
	med := medians(runs, []string{"dexzd-s3", "dexzd-pg", "dbos"})
	if got := med["dexzd-s3"]; got.FlowsPerSec != 800 || got.PutsPerStep == nil || *got.PutsPerStep != 0.5 {
		t.Errorf("dexzd-s3 median = %+v (PUTs/step %v), want 800 flows/s, 0.5 PUTs/step", got, optNum(got.PutsPerStep))
	}
	if got := med["dexzd-pg"]; got.PutsPerStep != nil {
		t.Errorf("dexzd-pg has PUTs/step %v without a round that measured them", *got.PutsPerStep)
	}
	r := ratios(med)
	if got := r["dexzd-pg"]["flows/s"]; got != 0.5 {
		t.Errorf("dexzd-pg flows/s ratio = %v, want 0.5 (to DBOS, not to dexzd-s3)", got)
	}
}

func TestIsMinIO(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		argv []string
		want bool
	}{
		{[]string{"/repo/.tools/bin/minio", "server", "--quiet", "--address", "127.0.0.1:41234", "--console-address", "127.0.0.1:5", "/tmp/d"}, true},
		{[]string{"minio", "server", "--address=127.0.0.1:41234", "/tmp/d"}, true},
		{[]string{"minio", "server", "--address", "127.0.0.1:41235", "--console-address", "127.0.0.1:41234"}, false},
		{[]string{"/usr/bin/notminio", "server", "--address", "127.0.0.1:41234"}, false},
		{[]string{"minio", "client", "--address", "127.0.0.1:41234"}, false},
	} {
		if got := isMinIO(tt.argv, "41234"); got != tt.want {
			t.Errorf("isMinIO(%q) = %v, want %v", tt.argv, got, tt.want)
		}
	}
}
