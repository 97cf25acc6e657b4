package cli

import (
	"strings"
	"testing"
)

// "dexcli completion SHELL" prints cobra's completion script for the shell,
// and the script's callback (__complete) offers commands and flag values.
func TestCompletion_ScriptsAndCandidates(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{
		"bash": "# bash completion V2 for dexcli",
		"zsh":  "#compdef dexcli",
		"fish": "# fish completion for dexcli",
	} {
		r := runCLI(t, "completion", shell)
		r.wantCode(t, exitOK)
		r.wantStdout(t, want, "__complete")
		if r.stderr != "" {
			t.Errorf("completion %s wrote to stderr: %q", shell, r.stderr)
		}
	}
	r := runCLI(t, "completion", "bash", "--help")
	r.wantCode(t, exitOK)
	r.wantStdout(t, "source <(dexcli completion bash)")

	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "fl"}, []string{"flow\t"}},
		{[]string{"__complete", "flow", "st"}, []string{"start\t", "stop\t", "state\t"}},
		{[]string{"__complete", "flow", "start", "order", "o-1", "--id-reuse", ""}, []string{"terminate-if-running"}},
		{[]string{"__complete", "admin", "describe", "-o", ""}, []string{"table", "json"}},
	} {
		r := runCLI(t, tt.args...)
		r.wantCode(t, exitOK)
		r.wantStdout(t, tt.want...)
	}
	r = runCLI(t, "help")
	r.wantStdout(t, "completion SHELL", "source <(dexcli completion bash)")
}

// A mistyped command word, at any level, is a usage error naming the
// closest command; a missing shell is one too.
func TestMistypedCommand_SuggestsAndExitsTwo(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"flow", "satrt", "order", "o-1"}, `unknown command "flow satrt"; did you mean "flow start"?`},
		{[]string{"admn", "describe"}, `unknown command "admn"; did you mean "admin"?`},
		{[]string{"bench", "chian"}, `unknown command "bench chian"; did you mean "bench chain"?`},
		{[]string{"completion", "bsh"}, `unknown command "completion bsh"; did you mean "completion bash"?`},
		{[]string{"help", "flow", "wiat"}, `unknown command "flow wiat"; did you mean "flow wait"?`},
		{[]string{"completion"}, `missing command for "completion"`},
	} {
		r := runCLI(t, tt.args...)
		if r.code != exitUsage {
			t.Errorf("%q: exit %d, want 2; stderr:\n%s", tt.args, r.code, r.stderr)
		}
		r.wantStderr(t, tt.want, "usage: dexcli")
		if r.stdout != "" {
			t.Errorf("%q: printed to stdout: %q", tt.args, r.stdout)
		}
	}
	// No suggestion when nothing is close.
	r := runCLI(t, "flow", "xyzzy", "a")
	r.wantCode(t, exitUsage)
	if strings.Contains(r.stderr, "did you mean") {
		t.Errorf("suggested a command for xyzzy:\n%s", r.stderr)
	}
}

// An unknown flag, long or short, before or after the command words, is a
// usage error that names it, and nothing is sent.
func TestUnknownFlag_ExitsTwoNamingTheFlag(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	addr := f.start(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"flow", "start", "order", "o-1", "--colour", "red"}, "unknown flag: --colour"},
		{[]string{"flow", "describe", "o-1", "-x"}, "unknown shorthand flag: 'x' in -x"},
		{[]string{"--verbose", "admin", "describe"}, "unknown flag: --verbose"},
		{[]string{"admin", "step-down", "--yes", "--expected-node-epoch=7x", "--expected-node-id", "n"}, `invalid value "7x" for --expected-node-epoch: not an unsigned 64-bit integer`},
		{[]string{"flow", "list", "--limit", "many"}, `invalid value "many" for --limit`},
		{[]string{"flow", "describe", "o-1", "--run"}, "flag needs an argument: --run"},
	} {
		r := runCLI(t, append([]string{"--server", addr}, tt.args...)...)
		if r.code != exitUsage {
			t.Errorf("%q: exit %d, want 2; stderr:\n%s", tt.args, r.code, r.stderr)
		}
		r.wantStderr(t, tt.want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.calls); n != 0 {
		t.Errorf("a usage error sent %d calls", n)
	}
}

// A usage error prints the usage line of the command it concerns, even
// when cobra stopped before reaching it: a bad flag before the command
// words, the target of help, an argument too many for a completion
// command. A value that is not a number says so in words.
func TestUsageErrors_UsageLineOfTheCommandConcerned(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--bogus", "flow", "describe", "a"}, []string{"unknown flag: --bogus", "usage: dexcli flow describe FLOW_ID [flags]"}},
		{[]string{"--timeout", "x", "flow", "list"}, []string{`--timeout "x": not a duration`, "usage: dexcli flow list [flags]"}},
		{[]string{"help", "flow", "start", "extra"}, []string{`help takes a group and a command, not "extra"`, "usage: dexcli flow start FLOW_TYPE FLOW_ID [flags]"}},
		{[]string{"help", "flow", "strt"}, []string{`did you mean "flow start"?`, "usage: dexcli flow <command> [arguments] [flags]"}},
		{[]string{"help", "xyz"}, []string{`unknown command "xyz"`, "usage: dexcli <group> <command> [arguments] [flags]"}},
		{[]string{"completion", "bash", "extra"}, []string{`unexpected argument "extra"`, "usage: dexcli completion bash"}},
		{[]string{"flow", "list", "--limit", "x"}, []string{`invalid value "x" for --limit: not a whole number`, "usage: dexcli flow list [flags]"}},
		{[]string{"flow", "list", "--limit", "99999999999999999999"}, []string{"for --limit: out of range for int"}},
		{[]string{"flow", "state", "a", "--max-messages", "-2"}, []string{`invalid value "-2" for --max-messages: not a whole number (0 or more)`}},
		{[]string{"bench", "chain", "--rate", "x"}, []string{`invalid value "x" for --rate: not a number`}},
	} {
		r := runCLI(t, tt.args...)
		if r.code != exitUsage {
			t.Errorf("%q: exit %d, want 2; stderr:\n%s", tt.args, r.code, r.stderr)
		}
		r.wantStderr(t, tt.want...)
	}
}
