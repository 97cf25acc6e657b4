package cli

import (
	"testing"
)

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
