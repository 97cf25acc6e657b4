package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dexzd/dexzd/internal/cli/output"
)

// Exit codes of dexcli.
const (
	ExitOK          = 0
	ExitFailure     = 1   // a request failed, or the CLI refused to send it
	ExitUsage       = 2   // the command line is wrong
	ExitInterrupted = 130 // Ctrl-C (the context was cancelled)
)

// Default timeouts of a whole command, when --timeout is not given, and
// the default server.
const (
	DefaultCallTimeout     = 30 * time.Second
	DefaultStepDownTimeout = 2 * time.Minute
	DefaultServer          = "127.0.0.1:8801"
	ServerEnv              = "DEX_SERVER"
)

// Env is one run of dexcli as its commands see it: the process's stdio and
// environment and the global flags, which the root command registers and
// cobra fills in before a command runs.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	Globals        Globals
	// UnresponsiveAfter is how long an attempt waits for a server that
	// answers nothing, not even a health check, before it gives the
	// address up; 0 means dex.DefaultUnresponsiveTimeout.
	UnresponsiveAfter time.Duration
}

// Globals are the flags every command takes.
type Globals struct {
	Server         string
	Output         string
	Timeout        time.Duration
	CredentialFile string
	// Security are the TLS and token flags (security.go).
	Security Security
	// CodecKeyFile is the AES-GCM key file of --codec-key-file (codec.go).
	CodecKeyFile string
}

// DefaultServer is the --server default: $DEX_SERVER, else 127.0.0.1:8801.
func (e *Env) DefaultServer() string {
	if v := strings.TrimSpace(e.Getenv(ServerEnv)); v != "" {
		return v
	}
	return DefaultServer
}

// RunFunc runs a command with its positional arguments.
type RunFunc func(ctx context.Context, s *Session, args []string) error

// Run turns fn into a cobra RunE: it opens the command's session from the
// global flags, bounds the command by --timeout (else by defaultTimeout; 0
// means no bound), runs fn and reports its outcome (Finish). The error it
// returns is nil, a *UsageError for the caller to print with the
// command's usage line, or an ExitError carrying the exit code.
func (e *Env) Run(defaultTimeout time.Duration, fn RunFunc) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		words := strings.Fields(cmd.CommandPath())[1:]
		timeoutSet := cmd.Flags().Changed("timeout")
		s, err := New(e, defaultTimeout, timeoutSet, words)
		if err != nil {
			return err
		}
		defer s.Close()
		ctx := cmd.Context()
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if s.Timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, s.Timeout)
		}
		defer cancel()
		return s.Finish(ctx, fn(cctx, s, args))
	}
}

// Session is what a running command uses: the parsed global flags, the
// output printer and the connections.
type Session struct {
	env  *Env
	Opts *Globals
	Out  *output.Printer
	// Timeout is the whole command's bound; 0 means none.
	Timeout time.Duration
	// TimeoutSet records an explicit --timeout, for retry command lines.
	TimeoutSet bool
	// Words are the command words, e.g. ["flow", "start"].
	Words []string
	conns *connSet
}

// New checks the global flags of env and opens a session for the command
// named by words. A bad flag is a *UsageError.
func New(env *Env, defaultTimeout time.Duration, timeoutSet bool, words []string) (*Session, error) {
	opts := &env.Globals
	if opts.Output != "table" && opts.Output != "json" {
		return nil, Usagef("--output must be table or json, not %q", opts.Output)
	}
	if opts.Timeout < 0 {
		return nil, Usagef("--timeout must not be negative")
	}
	addrs := SplitList(opts.Server)
	if len(addrs) == 0 {
		return nil, Usagef("--server is empty")
	}
	for _, addr := range addrs {
		if err := checkServerAddr(addr); err != nil {
			return nil, err
		}
	}
	token := ""
	if opts.CredentialFile != "" {
		b, err := os.ReadFile(opts.CredentialFile)
		if err != nil {
			return nil, Usagef("read --credential-file: %v", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return nil, Usagef("--credential-file %s is empty", opts.CredentialFile)
		}
	}
	sec, err := opts.Security.dialOptions(token)
	if err != nil {
		return nil, err
	}
	s := &Session{
		env:        env,
		Opts:       opts,
		Out:        &output.Printer{W: env.Stdout, JSON: opts.Output == "json"},
		conns:      newConnSet(addrs, sec, env.UnresponsiveAfter),
		Timeout:    defaultTimeout,
		TimeoutSet: timeoutSet,
		Words:      words,
	}
	if timeoutSet {
		s.Timeout = opts.Timeout
	}
	if err := s.loadCodec(); err != nil {
		return nil, err
	}
	return s, nil
}

// Close closes the session's connections.
func (s *Session) Close() { s.conns.close() }

// Stderr is where progress and warnings go.
func (s *Session) Stderr() io.Writer { return s.env.Stderr }

// checkServerAddr refuses an address of --server (or DEX_SERVER) that is
// not HOST:PORT as a usage error, so that "localhost" or
// "http://host:8801" is not reported later as an unreachable server.
func checkServerAddr(addr string) error {
	const want = "HOST:PORT expected, for example 127.0.0.1:8801"
	if strings.Contains(addr, "://") {
		return Usagef("--server %q: %s, without a scheme", addr, want)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return Usagef("--server %q: %s", addr, want)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return Usagef("--server %q: port %q is not a number from 1 to 65535; %s", addr, port, want)
	}
	return nil
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// UsageError is a wrong command line: exit 2 with a usage line.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError.
func Usagef(format string, a ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, a...)}
}

// ExitError ends dexcli with Code after the command has printed what it
// had to say.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit %d", e.Code) }

// ExitCode is the exit code of a command's error that is not a usage
// error: 0 for nil, an ExitError's code, else 1.
func ExitCode(err error) int {
	var ee ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	default:
		return ExitFailure
	}
}

// Args bounds a command's positional arguments to min..max (max < 0: no
// upper bound), as a usage error that names what is missing or extra.
func Args(minArgs, maxArgs int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < minArgs {
			words := strings.Fields(cmd.Use)
			return Usagef("missing argument: %s needs %s",
				strings.Join(strings.Fields(cmd.CommandPath())[1:], " "), strings.Join(words[1:], " "))
		}
		if maxArgs >= 0 && len(args) > maxArgs {
			return Usagef("unexpected argument %q", args[maxArgs])
		}
		return nil
	}
}

// Examples is a command's examples for cobra.Command.Example, one command
// line per line; help prints them under "Examples:".
func Examples(lines []string) string { return strings.Join(lines, "\n") }
