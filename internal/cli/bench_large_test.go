package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/bench"
)

// A run with --large-fraction reports the ordinary flows apart from the
// large ones: flows/s and latency of the ordinary flows, count, flows/s
// and latency of the large ones.
func TestBench_LargeOutput(t *testing.T) {
	t.Parallel()
	res := fixtureChainResult()
	res.LargeFraction, res.LargePayloadBytes = 0.01, bench.MaxLargePayloadBytes
	// 2000 completed flows: 1980 ordinary (Latency), 20 large (Large).
	res.Latency.Count = 1980
	res.Large = bench.Latency{Count: 20, Min: 80 * time.Millisecond, Mean: 140 * time.Millisecond,
		P50: 130 * time.Millisecond, P95: 240 * time.Millisecond, P99: 250500 * time.Microsecond, Max: 250500 * time.Microsecond}
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			r := chainOutcome(t, context.Background(), format, res, nil)
			r.wantCode(t, exitOK)
			checkGolden(t, "bench_chain_large", format, r.stdout)
			if format == "table" {
				r.wantStdout(t, "2000 (1980 ordinary, 20 large)", "ordinary 465.9, large 4.7", "p99 250.500ms")
				return
			}
			var doc struct {
				LargeFraction          *float64
				LargePayloadBytes      *int
				OrdinaryCompleted      *int
				OrdinaryFlowsPerSecond *float64
				LatencyMs              struct{ P99 float64 }
				Large                  *struct {
					Planned, Completed int
					FlowsPerSecond     float64
					LatencyMs          struct{ P50, P99 float64 }
				}
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
				t.Fatalf("%v\n%s", err, r.stdout)
			}
			if doc.LargeFraction == nil || *doc.LargeFraction != 0.01 || doc.LargePayloadBytes == nil || *doc.LargePayloadBytes != bench.MaxLargePayloadBytes ||
				doc.OrdinaryCompleted == nil || *doc.OrdinaryCompleted != 1980 || doc.OrdinaryFlowsPerSecond == nil || *doc.OrdinaryFlowsPerSecond != 465.882 ||
				doc.LatencyMs.P99 != 120.125 || doc.Large == nil || doc.Large.Planned != 20 || doc.Large.Completed != 20 ||
				doc.Large.FlowsPerSecond != 4.706 || doc.Large.LatencyMs.P50 != 130 || doc.Large.LatencyMs.P99 != 250.5 {
				t.Errorf("the figures are not split as expected:\n%s", r.stdout)
			}
		})
	}
	// Without large flows the split fields are null.
	r := chainOutcome(t, context.Background(), "json", fixtureChainResult(), nil)
	r.wantStdout(t, `"largeFraction": null`, `"ordinaryFlowsPerSecond": null`, `"large": null`)
}

func TestBenchChain_LargeUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--large-fraction", "-0.1"}, "--large-fraction must be a fraction from 0 to 1, not -0.1"},
		{[]string{"--large-fraction", "1.5"}, "--large-fraction must be a fraction from 0 to 1, not 1.5"},
		{[]string{"--large-fraction", "NaN"}, "--large-fraction must be a fraction from 0 to 1, not NaN"},
		{[]string{"--large-fraction", "0.01", "--large-payload-bytes", "0"}, "--large-payload-bytes must be from 1 to 4193280"},
		{[]string{"--large-fraction", "0.01", "--large-payload-bytes", "-1"}, "--large-payload-bytes must be from 1 to 4193280"},
		{[]string{"--large-fraction", "0.01", "--large-payload-bytes", "4MiB"},
			fmt.Sprintf("--large-payload-bytes must be from 1 to 4193280 (limits.maxPayloadBytes 4194304 less 1024 for the rest of the value), not %d", 4<<20)},
		{[]string{"--large-fraction", "0.01", "--large-payload-bytes", "4193281"}, "not 4193281"},
		{[]string{"--large-fraction", "0.01", "--large-payload-bytes", "4GiB"}, "not a number of bytes (N, NKiB or NMiB)"},
		{[]string{"--large-payload-bytes", "1MiB"}, "--large-payload-bytes applies only with a positive --large-fraction"},
	} {
		r := runCLI(t, append([]string{"bench", "chain", "--server", "127.0.0.1:1"}, tt.args...)...)
		r.wantCode(t, exitUsage)
		r.wantStderr(t, tt.want, "usage: dexcli bench chain [flags]")
	}
}

// The flags that pass validation reach bench.Config: the default size
// is the largest, and a size with a suffix is read in bytes.
func TestBenchChain_LargeConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args         []string
		wantFraction float64
		wantBytes    int
	}{
		{nil, 0, 0},
		{[]string{"--large-fraction", "0.01"}, 0.01, bench.MaxLargePayloadBytes},
		{[]string{"--large-fraction", "1", "--large-payload-bytes", "512KiB"}, 1, 512 << 10},
		{[]string{"--large-fraction", "0.5", "--large-payload-bytes", "4095KiB"}, 0.5, 4095 << 10},
	} {
		a := &app{getenv: func(string) string { return "" }, groups: groups()}
		cmd := a.findGroup("bench").find("chain")
		s, err := newSession(a, &globals{server: "127.0.0.1:1", output: "table"}, cmd, false, []string{"bench", "chain"})
		if err != nil {
			t.Fatal(err)
		}
		fs := flag.NewFlagSet("chain", flag.ContinueOnError)
		o := newBenchOptions(bench.WorkloadChain, fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		cfg, err := o.config(s)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if cfg.LargeFraction != tt.wantFraction || cfg.LargePayloadBytes != tt.wantBytes {
			t.Errorf("%v: LargeFraction %v, LargePayloadBytes %d; want %v, %d", tt.args, cfg.LargeFraction, cfg.LargePayloadBytes, tt.wantFraction, tt.wantBytes)
		}
	}
}
