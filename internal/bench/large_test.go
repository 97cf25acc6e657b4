package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
)

// The limits the driver checks against are the server's defaults.
func TestLarge_LimitsAreTheServerDefaults(t *testing.T) {
	t.Parallel()
	if MaxPayloadBytes != engine.DefaultMaxPayloadBytes || MaxRequestBytes != engine.DefaultMaxRequestBytes {
		t.Errorf("MaxPayloadBytes %d, MaxRequestBytes %d; the server's defaults are %d and %d",
			MaxPayloadBytes, MaxRequestBytes, engine.DefaultMaxPayloadBytes, engine.DefaultMaxRequestBytes)
	}
}

// The large flows are spread evenly and there are exactly ⌊n·F⌋ of them.
func TestLarge_WhichFlows(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n     int
		f     float64
		first []int // the first large flows
	}{
		{1000, 0.01, []int{99, 199, 299}},
		{10, 0.5, []int{1, 3, 5}},
		{7, 1, []int{0, 1, 2}},
		{99, 0.01, nil},
		{1000, 0, nil},
	} {
		var got []int
		for j := range tt.n {
			if isLarge(j, tt.f) {
				got = append(got, j)
			}
		}
		if want := LargeFlows(tt.n, tt.f); len(got) != want || want != int(math.Floor(float64(tt.n)*tt.f)) {
			t.Errorf("n %d, F %v: %d large flows, LargeFlows %d", tt.n, tt.f, len(got), want)
		}
		for k, j := range tt.first {
			if k >= len(got) || got[k] != j {
				t.Errorf("n %d, F %v: large flows %v, want them to begin with %v", tt.n, tt.f, got[:min(len(got), 5)], tt.first)
				break
			}
		}
	}
}

func TestLarge_ConfigErrors(t *testing.T) {
	t.Parallel()
	base := Config{Addresses: []string{"127.0.0.1:1"}, Flows: 10, Steps: 1, Callers: 1, WorkerConcurrency: 1}
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"default size", func(c *Config) { c.LargeFraction = 0.01 }, ""},
		{"fraction below 0", func(c *Config) { c.LargeFraction = -0.01 }, "LargeFraction is -0.01, want a fraction in [0, 1]"},
		{"fraction above 1", func(c *Config) { c.LargeFraction = 1.01 }, "LargeFraction is 1.01"},
		{"fraction NaN", func(c *Config) { c.LargeFraction = math.NaN() }, "LargeFraction is NaN"},
		{"size above the limit", func(c *Config) { c.LargeFraction, c.LargePayloadBytes = 0.5, MaxLargePayloadBytes+1 }, "LargePayloadBytes is 4193281, want 1 to 4193280"},
		{"negative size", func(c *Config) { c.LargeFraction, c.LargePayloadBytes = 0.5, -1 }, "LargePayloadBytes is -1"},
		{"size without fraction", func(c *Config) { c.LargePayloadBytes = 100 }, "LargeFraction is 0: want both"},
		{"fanout over the request limit", func(c *Config) { c.Workload, c.Branches, c.LargeFraction = WorkloadFanout, 3, 0.1 },
			"with 3 Branches"},
		{"fanout within the request limit", func(c *Config) {
			c.Workload, c.Branches, c.LargeFraction, c.LargePayloadBytes = WorkloadFanout, 4, 0.1, 1<<20
		}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.edit(&c)
			err := c.applyDefaults()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("applyDefaults: %v", err)
			case tt.want == "" && c.LargeFraction > 0 && c.LargePayloadBytes == 0:
				t.Errorf("no default size applied")
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("applyDefaults: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// Large flows of the largest default size pass through a real dev server
// (start, tasks, results, the flow's result) and are reported apart.
func TestRun_LargeInputsOnDevServer(t *testing.T) {
	t.Parallel()
	srv, err := StartDevServer(context.Background(), DevOptions{Binary: serverBinary(t), DataDir: t.TempDir(), Durability: "processCrashSafe"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	for _, cfg := range []Config{
		{Workload: WorkloadChain, Flows: 30, Steps: 2, Callers: 4, LargeFraction: 0.1},
		{Workload: WorkloadFanout, Flows: 20, Branches: 2, Callers: 4, Burst: true, LargeFraction: 0.1, LargePayloadBytes: 1 << 20},
	} {
		t.Run(string(cfg.Workload), func(t *testing.T) {
			cfg.Addresses, cfg.WorkerConcurrency, cfg.PayloadBytes, cfg.Warmup = []string{srv.Addr}, 16, 16, 10
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := Run(ctx, cfg)
			if err != nil {
				t.Fatalf("Run: %v\nresult: %+v\nserver log:\n%s", err, res, srv.Log())
			}
			wantLarge := LargeFlows(cfg.Flows, cfg.LargeFraction)
			if res.Completed != cfg.Flows || res.Large.Count != wantLarge || res.Latency.Count != cfg.Flows-wantLarge ||
				res.OrdinaryCompleted() != cfg.Flows-wantLarge || res.LargePayloadBytes != cfg.LargePayloadBytes && cfg.LargePayloadBytes != 0 {
				t.Errorf("completed %d: %d large (want %d), %d ordinary", res.Completed, res.Large.Count, wantLarge, res.Latency.Count)
			}
			if res.Large.P99 <= 0 || res.OrdinaryFlowsPerSecond() <= 0 || res.OrdinaryFlowsPerSecond() >= res.FlowsPerSecond() {
				t.Errorf("large p99 %v, ordinary flows/s %v of %v", res.Large.P99, res.OrdinaryFlowsPerSecond(), res.FlowsPerSecond())
			}
			t.Logf("%s: ordinary p99 %v, large p99 %v", cfg.Workload, res.Latency.P99, res.Large.P99)
		})
	}
	stopDev(t, srv)
}
