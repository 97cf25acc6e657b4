package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Exit codes of dexcli.
const (
	exitOK          = 0
	exitFailure     = 1   // a request failed, or the CLI refused to send it
	exitUsage       = 2   // the command line is wrong
	exitInterrupted = 130 // Ctrl-C (the context was cancelled)
)

// Default timeouts of a whole command, when --timeout is not given.
const (
	defaultCallTimeout     = 30 * time.Second
	defaultStepDownTimeout = 2 * time.Minute
	defaultServer          = "127.0.0.1:8801"
	serverEnv              = "DEX_SERVER"
)

// Main runs dexcli with args (the command line without the program name)
// and returns the process's exit code: 0 on success, 1 when a request
// failed, 2 for a usage error, 130 when ctx was cancelled (Ctrl-C).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, args, stdout, stderr, os.Getenv)
}

// run is Main with the environment as a function, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv, groups: groups()}
	return a.run(ctx, args)
}

// groups is the command table: every command group dexcli knows. A new
// group (for example the load driver, "bench") lives in its own file with a
// constructor returning a *group, and is added here; nothing else in the
// package needs to change.
func groups() []*group {
	return []*group{flowGroup(), adminGroup(), benchGroup()}
}

// group is a command group, the first word of a command line ("flow").
type group struct {
	name     string
	summary  string
	commands []*command
}

// command is one command of a group ("flow start").
type command struct {
	name    string
	args    string // the positional arguments, for the usage line
	summary string
	// details is an optional paragraph printed by --help.
	details  string
	examples []string
	// minArgs and maxArgs bound the positional arguments; maxArgs < 0 means
	// no upper bound.
	minArgs, maxArgs int
	// defaultTimeout bounds the whole command when --timeout is not given;
	// 0 means no bound.
	defaultTimeout time.Duration
	// setup registers the command's own flags on fs and returns the
	// function that runs the command once fs is parsed.
	setup func(fs *flag.FlagSet) runFunc
}

// runFunc runs a parsed command with its positional arguments.
type runFunc func(ctx context.Context, s *session, args []string) error

// app is one run of dexcli.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	groups         []*group
}

func (a *app) findGroup(name string) *group {
	for _, g := range a.groups {
		if g.name == name {
			return g
		}
	}
	return nil
}

func (g *group) find(name string) *command {
	for _, c := range g.commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (a *app) run(ctx context.Context, args []string) int {
	line, err := a.scan(args)
	if err != nil {
		return a.usageFailure(err, line.group, line.cmd)
	}
	switch {
	case line.help:
		a.printHelp(a.stdout, line.group, line.cmd)
		return exitOK
	case line.group == nil:
		return a.usageFailure(usagef("missing command"), nil, nil)
	case line.cmd == nil:
		return a.usageFailure(usagef("missing command for %q", line.group.name), line.group, nil)
	}
	return a.runCommand(ctx, line)
}

// runCommand parses the flags of a resolved command and runs it.
func (a *app) runCommand(ctx context.Context, line *commandLine) int {
	g, c := line.group, line.cmd
	fs := flag.NewFlagSet(g.name+" "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts := globals{server: a.defaultServer(), output: "table"}
	opts.register(fs)
	runCmd := c.setup(fs)
	if err := fs.Parse(line.flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			a.printHelp(a.stdout, g, c)
			return exitOK
		}
		msg := err.Error()
		if m := badValue.FindStringSubmatch(msg); m != nil && isDurationFlag(fs, m[2]) {
			msg = fmt.Sprintf("--%s %q: not a duration; give a number with a unit of ms, s, m or h, for example 90s, 15m, 24h (72h for three days)", m[2], m[1])
		}
		return a.usageFailure(usageError{msg: msg}, g, c)
	}
	args := slices.Concat(line.args, fs.Args())
	if len(args) < c.minArgs {
		return a.usageFailure(usagef("missing argument: %s %s needs %s", g.name, c.name, c.args), g, c)
	}
	if c.maxArgs >= 0 && len(args) > c.maxArgs {
		return a.usageFailure(usagef("unexpected argument %q", args[c.maxArgs]), g, c)
	}
	timeoutSet := false
	fs.Visit(func(f *flag.Flag) { timeoutSet = timeoutSet || f.Name == "timeout" })
	s, err := newSession(a, &opts, c, timeoutSet, line.words())
	if err != nil {
		return a.usageFailure(err, g, c)
	}
	defer s.close()
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if s.timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, s.timeout)
	}
	defer cancel()
	return s.finish(ctx, runCmd(cctx, s, args))
}

// badValue matches the flag package's error for a value a flag cannot
// parse.
var badValue = regexp.MustCompile(`^invalid value "(.*)" for flag -([^:]+): parse error$`)

// isDurationFlag reports whether fs's flag name holds a time.Duration.
func isDurationFlag(fs *flag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	_, ok = g.Get().(time.Duration)
	return ok
}

// checkServerAddr refuses an address of --server (or DEX_SERVER) that is
// not HOST:PORT as a usage error, so that "localhost" or
// "http://host:8801" is not reported later as an unreachable server.
func checkServerAddr(addr string) error {
	const want = "HOST:PORT expected, for example 127.0.0.1:8801"
	if strings.Contains(addr, "://") {
		return usagef("--server %q: %s, without a scheme", addr, want)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return usagef("--server %q: %s", addr, want)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return usagef("--server %q: port %q is not a number from 1 to 65535; %s", addr, port, want)
	}
	return nil
}

func (a *app) defaultServer() string {
	if v := strings.TrimSpace(a.getenv(serverEnv)); v != "" {
		return v
	}
	return defaultServer
}

// usageFailure prints a usage error with the usage line of the command (or
// group) it concerns and returns exit code 2.
func (a *app) usageFailure(err error, g *group, c *command) int {
	fmt.Fprintf(a.stderr, "dexcli: %v\n", err)
	switch {
	case c != nil:
		fmt.Fprintf(a.stderr, "usage: %s\n", usageLine(g, c))
		fmt.Fprintf(a.stderr, "Run \"dexcli %s %s --help\" for details.\n", g.name, c.name)
	case g != nil:
		fmt.Fprintf(a.stderr, "usage: dexcli %s <command> [arguments] [flags]\n", g.name)
		fmt.Fprintf(a.stderr, "Run \"dexcli %s --help\" for its commands.\n", g.name)
	default:
		fmt.Fprintln(a.stderr, "usage: dexcli <group> <command> [arguments] [flags]")
		fmt.Fprintln(a.stderr, "Run \"dexcli help\" for the commands.")
	}
	return exitUsage
}

// globals are the flags every command takes.
type globals struct {
	server         string
	output         string
	timeout        time.Duration
	credentialFile string
}

func (o *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&o.server, "server", o.server, "")
	fs.StringVar(&o.output, "output", o.output, "")
	fs.StringVar(&o.output, "o", o.output, "")
	fs.DurationVar(&o.timeout, "timeout", 0, "")
	fs.StringVar(&o.credentialFile, "credential-file", "", "")
}

// globalFlagHelp documents the global flags (printed by every help).
const globalFlagHelp = `Global flags (accepted before or after the command words):
  --server HOST:PORT[,HOST:PORT...]
        the server's API address; with several, each is tried in order while
        one answers UNAVAILABLE (default $DEX_SERVER, else 127.0.0.1:8801)
  --output table|json, -o
        table for people (default), json for scripts: one JSON document,
        camelCase fields, IDs and epochs as strings
  --timeout DURATION
        bound the whole command (default 30s; "flow wait" waits without a
        bound, "admin step-down" waits 2m)
  --credential-file PATH
        file holding the admin token, sent as "authorization: Bearer <token>"
`

// session is what a running command uses: the parsed global flags, the
// output printer and the connections.
type session struct {
	app     *app
	opts    *globals
	out     *printer
	conns   *connSet
	timeout time.Duration // the whole command's bound; 0 means none
	// timeoutSet records an explicit --timeout, for retry command lines.
	timeoutSet bool
	words      []string // the command words, e.g. ["flow", "start"]
}

func newSession(a *app, opts *globals, c *command, timeoutSet bool, words []string) (*session, error) {
	if opts.output != "table" && opts.output != "json" {
		return nil, usagef("--output must be table or json, not %q", opts.output)
	}
	if opts.timeout < 0 {
		return nil, usagef("--timeout must not be negative")
	}
	addrs := splitList(opts.server)
	if len(addrs) == 0 {
		return nil, usagef("--server is empty")
	}
	for _, addr := range addrs {
		if err := checkServerAddr(addr); err != nil {
			return nil, err
		}
	}
	token := ""
	if opts.credentialFile != "" {
		b, err := os.ReadFile(opts.credentialFile)
		if err != nil {
			return nil, usagef("read --credential-file: %v", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return nil, usagef("--credential-file %s is empty", opts.credentialFile)
		}
	}
	s := &session{
		app:        a,
		opts:       opts,
		out:        &printer{w: a.stdout, json: opts.output == "json"},
		conns:      newConnSet(addrs, token),
		timeout:    c.defaultTimeout,
		timeoutSet: timeoutSet,
		words:      words,
	}
	if timeoutSet {
		s.timeout = opts.timeout
	}
	return s, nil
}

func (s *session) close() { s.conns.close() }

// stderr is where progress and warnings go.
func (s *session) stderr() io.Writer { return s.app.stderr }

// splitList splits a comma-separated list, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
