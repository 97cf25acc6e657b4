package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/testproc"
)

// TestMeasure_ServeOnRegionalS3 measures the figures the README quotes for
// serve on object storage with a region's latency: one serve process on
// MinIO, reached directly and through toxiproxy adding 20-40 ms to every
// answer (30 ms ± 10 ms on the downstream, as S3 answers within a region),
// loaded by `dexcli bench chain` (3 steps) with 32 and 256 callers. Each
// case gets a fresh node (its own prefix). Skipped unless
// DEX_CHAOS_MEASURE is set (to the number of rounds, medians reported):
//
//	DEX_CHAOS_MEASURE=1 scripts/testenv.sh run -- go test -run TestMeasure -v -timeout 60m ./test/chaos
func TestMeasure_ServeOnRegionalS3(t *testing.T) {
	v := os.Getenv("DEX_CHAOS_MEASURE")
	if v == "" {
		t.Skip("set DEX_CHAOS_MEASURE to a number of rounds (1) to measure serve on MinIO with 20-40 ms of latency")
	}
	rounds, err := strconv.Atoi(v)
	if err != nil || rounds < 1 {
		t.Fatalf("DEX_CHAOS_MEASURE=%q: want a number of rounds", v)
	}
	bins := findBinaries(t)
	_, minio := startMinIO(t, bins.minio, "dex-measure")
	tp := startToxiproxy(t, bins.toxiproxy)
	slow := tp.proxy(t, "regional", minio)
	if err := tp.call(t.Context(), "POST", "/proxies/regional/toxics", map[string]any{
		"name": "latency", "type": "latency", "stream": "downstream", "toxicity": 1,
		"attributes": map[string]int{"latency": 30, "jitter": 10},
	}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("| store | callers | flows | flows/s | p50 | p95 | log batches per flow | store PUTs per flow | server CPU per flow |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, store := range []struct{ name, addr string }{{"MinIO", minio}, {"MinIO + 20-40 ms", slow}} {
		for _, callers := range []int{32, 256} {
			flows := 2000
			if callers == 256 {
				flows = 4000
			}
			var got []benchResult
			for round := range rounds {
				got = append(got, benchServe(t, store.addr, fmt.Sprintf("m%d-%d-%d/", len(store.name), callers, round), callers, flows))
			}
			m := median(got)
			fmt.Printf("| %s | %d | %d | %.0f | %.0f ms | %.0f ms | %.2f | %.2f | %.2f ms |\n", store.name, callers, flows,
				m.FlowsPerSecond, m.Latency.P50, m.Latency.P95, m.Store.LogBatchesPerFlow, m.Store.PutsPerFlow, m.ServerCPU.MsPerFlow)
		}
	}
}

// benchResult is what the test reads of `dexcli bench -o json`.
type benchResult struct {
	FlowsPerSecond float64 `json:"flowsPerSecond"`
	Failures       int     `json:"failures"`
	Latency        struct {
		P50 float64 `json:"p50"`
		P95 float64 `json:"p95"`
	} `json:"latencyMs"`
	ServerCPU struct {
		MsPerFlow float64 `json:"msPerFlow"`
	} `json:"serverCpu"`
	Store struct {
		PutsPerFlow       float64 `json:"putsPerFlow"`
		LogBatchesPerFlow float64 `json:"logBatchesPerFlow"`
	} `json:"store"`
}

// benchServe starts a serve process on MinIO at addr under prefix, runs
// the chain workload against it and returns the figures.
func benchServe(t *testing.T, addr, prefix string, callers, flows int) benchResult {
	t.Helper()
	dir := t.TempDir()
	api, metrics := testproc.FreeAddr(t), testproc.FreeAddr(t)
	cfg := filepath.Join(dir, "serve.yaml")
	yaml := fmt.Sprintf("nodeId: measure\napi:\n  listen: %q\nmetrics:\n  listen: %q\nlocalStore:\n  dir: %q\n"+
		"storage:\n  backend: s3\n  s3:\n    bucket: dex-measure\n    prefix: %q\n    endpoint: %q\n    region: us-east-1\n    pathStyle: true\n",
		api, metrics, filepath.Join(dir, "local"), prefix, "http://"+addr)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	p := testproc.Start(t, "serve", "--config", cfg)
	p.Serving(t, 60*time.Second)
	out, err := exec.Command(testproc.CLI(t), "bench", "chain", "--server", api, "--flows", strconv.Itoa(flows), "--steps", "3",
		"--callers", strconv.Itoa(callers), "--worker-concurrency", strconv.Itoa(max(64, callers)), "--timeout", "30m",
		"--server-pid", strconv.Itoa(p.Pid()), "--metrics-url", "http://"+metrics+"/metrics", "-o", "json").Output()
	if err != nil {
		t.Fatalf("dexcli bench chain: %v\n%s", err, out)
	}
	var r benchResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("bench output: %v\n%s", err, out)
	}
	if r.Failures != 0 {
		t.Fatalf("%d flows failed:\n%s", r.Failures, out)
	}
	return r
}

// median returns the round with the median flows/s.
func median(rs []benchResult) benchResult {
	best := append([]benchResult(nil), rs...)
	for i := range best {
		for j := i + 1; j < len(best); j++ {
			if best[j].FlowsPerSecond < best[i].FlowsPerSecond {
				best[i], best[j] = best[j], best[i]
			}
		}
	}
	return best[len(best)/2]
}
