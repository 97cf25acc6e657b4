package cli

import (
	"fmt"
	"testing"
)

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
