package cli

import (
	"context"
	"testing"
	"time"
)

// An open-loop run (--rate) prints its accepted and refused starts.
func TestBench_OpenLoopOutput(t *testing.T) {
	t.Parallel()
	res := fixtureChainResult()
	res.Rate, res.Duration = 10000, time.Minute
	res.Flows, res.Offered, res.Accepted, res.Refused, res.Skipped, res.Completed = 600000, 600000, 70000, 520000, 10000, 70000
	res.OfferElapsed = time.Minute
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			r := chainOutcome(t, context.Background(), format, res, nil)
			r.wantCode(t, exitOK)
			checkGolden(t, "bench_chain_open", format, r.stdout)
		})
	}
}

func TestBenchChain_RateUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "100"}, "--rate needs a positive --duration, not 0s"},
		{[]string{"--duration", "1s"}, "--duration applies only with --rate"},
		{[]string{"--rate", "-1", "--duration", "1s"}, "--rate must be a positive number of starts per second, not -1"},
		{[]string{"--rate", "100", "--duration", "1s", "--burst"}, "--rate and --burst exclude each other"},
	} {
		r := runCLI(t, append([]string{"bench", "chain", "--server", "127.0.0.1:1"}, tt.args...)...)
		r.wantCode(t, exitUsage)
		r.wantStderr(t, tt.want, "usage: dexcli bench chain [flags]")
	}
}
