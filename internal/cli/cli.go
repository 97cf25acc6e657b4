package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/cli/admincmd"
	"github.com/dexzd/dexzd/internal/cli/benchcmd"
	"github.com/dexzd/dexzd/internal/cli/flowcmd"
	"github.com/dexzd/dexzd/internal/cli/session"
)

// Exit codes of dexcli (see session).
const (
	exitOK          = session.ExitOK
	exitFailure     = session.ExitFailure
	exitUsage       = session.ExitUsage
	exitInterrupted = session.ExitInterrupted
)

// serverEnv names the environment variable of the default --server.
const serverEnv = session.ServerEnv

// unresponsiveAfter is how long an attempt waits for a server that answers
// nothing, not even a health check, before it gives the address up (the
// SDK's DefaultUnresponsiveTimeout). A variable for tests.
var unresponsiveAfter = dex.DefaultUnresponsiveTimeout

func init() {
	// Commands are listed (in help and completion) in the order their
	// groups declare them: "flow start" before "flow stop".
	cobra.EnableCommandSorting = false
}

// Main runs dexcli with args (the command line without the program name)
// and returns the process's exit code: 0 on success, 1 when a request
// failed, 2 for a usage error, 130 when ctx was cancelled (Ctrl-C).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, args, stdout, stderr, os.Getenv)
}

// run is Main with the environment as a function, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	env := &session.Env{Stdout: stdout, Stderr: stderr, Getenv: getenv, UnresponsiveAfter: unresponsiveAfter}
	root := newRoot(env)
	args = goFlagSyntax(root, args)
	root.SetArgs(args)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if !c.HasParent() {
			// A bad flag before the command words stops cobra at the
			// root; the usage line is still the command's.
			c = commandNamed(root, args)
		}
		return &aboutError{err: flagError(err), cmd: c}
	})
	cmd, err := root.ExecuteContextC(ctx)
	var about *aboutError
	if errors.As(err, &about) {
		cmd = about.cmd
	}
	var ue *session.UsageError
	var ee session.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &ue):
		return usageFailure(stderr, ue, cmd)
	default:
		// cobra's own errors (the completion commands' arguments) are
		// usage errors too.
		return usageFailure(stderr, err, cmd)
	}
}

// groups are the command groups, in the order help lists them. A new group
// (a package with a New(*session.Env) *cobra.Command) is added here;
// help, completion, --output, --server failover and error reporting then
// apply to it unchanged.
func groups(env *session.Env) []*cobra.Command {
	return []*cobra.Command{flowcmd.New(env), admincmd.New(env), benchcmd.New(env)}
}

// newRoot builds the command tree of one run: the global flags, the
// groups, help and completion.
func newRoot(env *session.Env) *cobra.Command {
	root := &cobra.Command{
		Use:           "dexcli",
		Short:         "dexcli starts, inspects and drives Dex-ZD flows, and operates Dex-ZD nodes.",
		SilenceErrors: true, // run prints errors with the usage line
		SilenceUsage:  true,
		Args:          commandArgs,
		RunE:          missingCommand,
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	registerGlobals(root.PersistentFlags(), env)
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]cobra.Completion{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	for _, g := range groups(env) {
		g.Args, g.RunE = commandArgs, missingCommand
		root.AddCommand(g)
	}
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args, c.RunE = commandArgs, missingCommand
			for _, shell := range c.Commands() {
				shell.Args = session.Args(0, 0)
			}
		}
	}
	root.SetHelpCommand(helpCommand(root))
	root.SetHelpFunc(helpFunc(root.HelpFunc()))
	unmaskNegativeArgs(root)
	return root
}

// registerGlobals registers the flags every command takes; globalFlagHelp
// documents them.
func registerGlobals(fs *pflag.FlagSet, env *session.Env) {
	g := &env.Globals
	fs.StringVar(&g.Server, "server", env.DefaultServer(), "the server's API address(es), `HOST:PORT[,HOST:PORT...]`")
	fs.StringVarP(&g.Output, "output", "o", "table", "the output format, `table|json`")
	fs.DurationVar(&g.Timeout, "timeout", 0, "bound the whole command to `DURATION`")
	fs.StringVar(&g.CredentialFile, "credential-file", "", "read the admin token from `PATH`")
	fs.StringVar(&g.CodecKeyFile, "codec-key-file", env.Getenv(session.CodecKeyFileEnv), "encrypt and decrypt values with the AES-GCM keys in `PATH`")
	registerSecurity(fs, env)
}

// commandArgs refuses the words after a group (or dexcli itself) that
// name none of its commands, suggesting the closest one.
func commandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return unknownCommand(cmd, args[0])
}

// missingCommand is what a group (or dexcli itself) does without a
// command word.
func missingCommand(cmd *cobra.Command, _ []string) error {
	if cmd.HasParent() {
		return session.Usagef("missing command for %q", cmd.Name())
	}
	return session.Usagef("missing command")
}

// unknownCommand is the usage error for a word that names no command of
// parent, with cobra's suggestion: the candidates one edit (or a prefix)
// away before those two edits away, one with the same first letter first.
func unknownCommand(parent *cobra.Command, typed string) error {
	prefix := strings.TrimPrefix(parent.CommandPath()+" ", parent.Root().Name()+" ")
	msg := fmt.Sprintf("unknown command %q", prefix+typed)
	for d := 1; d <= 2; d++ {
		parent.SuggestionsMinimumDistance = d
		cands := parent.SuggestionsFor(typed)
		if len(cands) == 0 {
			continue
		}
		best := cands[0]
		for _, c := range cands {
			if typed != "" && strings.HasPrefix(c, typed[:1]) {
				best = c
				break
			}
		}
		msg += fmt.Sprintf("; did you mean %q?", prefix+best)
		break
	}
	return &session.UsageError{Msg: msg}
}

// aboutError is a usage error about another command than the one cobra
// ran: the target of help ("dexcli help flow strt" is about the group
// flow), or the command a line with a bad flag names.
type aboutError struct {
	err error
	cmd *cobra.Command
}

func (e *aboutError) Error() string { return e.err.Error() }
func (e *aboutError) Unwrap() error { return e.err }

// commandNamed is the command that the words of args (those not starting
// with "-") name, as far as they name one; root if none.
func commandNamed(root *cobra.Command, args []string) *cobra.Command {
	c := root
	for _, w := range args {
		if w == "--" {
			break
		}
		if strings.HasPrefix(w, "-") {
			continue
		}
		next := findCommand(c, w)
		if next == nil {
			break
		}
		c = next
	}
	return c
}

// flagError turns pflag's error for a flag into a usage error that names
// the flag and, for a duration, says how to write one.
func flagError(err error) error {
	var inv *pflag.InvalidValueError
	if !errors.As(err, &inv) {
		return &session.UsageError{Msg: err.Error()}
	}
	f, v := inv.GetFlag(), inv.GetValue()
	switch f.Value.Type() {
	case "duration":
		return session.Usagef("--%s %q: not a duration; give a number with a unit of ms, s, m or h, for example 90s, 15m, 24h (72h for three days)", f.Name, v)
	case "bool":
		return session.Usagef("invalid boolean value %q for --%s", v, f.Name)
	default:
		return session.Usagef("invalid value %q for --%s: %s", v, f.Name, valueProblem(f.Value.Type(), inv.Unwrap()))
	}
}

// valueProblem says what is wrong with a flag's value of type typ, in
// words rather than strconv's ("strconv.ParseInt: parsing ...").
func valueProblem(typ string, err error) string {
	var ne *strconv.NumError
	if !errors.As(err, &ne) {
		return err.Error()
	}
	if errors.Is(ne.Err, strconv.ErrRange) {
		return "out of range for " + typ
	}
	switch {
	case strings.HasPrefix(typ, "uint"):
		return "not a whole number (0 or more)"
	case strings.HasPrefix(typ, "int"):
		return "not a whole number"
	default:
		return "not a number"
	}
}

// usageFailure prints a usage error with the usage line of the command (or
// group) it concerns and returns exit code 2.
func usageFailure(w io.Writer, err error, cmd *cobra.Command) int {
	fmt.Fprintf(w, "dexcli: %s\n", unmask(err.Error()))
	path := ""
	if cmd != nil && cmd.HasParent() && cmd.Name() != "help" {
		path = strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	}
	switch {
	case path != "" && !cmd.HasSubCommands():
		fmt.Fprintf(w, "usage: %s\n", cmd.UseLine())
		fmt.Fprintf(w, "Run \"dexcli %s --help\" for details.\n", path)
	case path != "":
		fmt.Fprintf(w, "usage: dexcli %s <command> [arguments] [flags]\n", path)
		fmt.Fprintf(w, "Run \"dexcli %s --help\" for its commands.\n", path)
	default:
		fmt.Fprintln(w, "usage: dexcli <group> <command> [arguments] [flags]")
		fmt.Fprintln(w, "Run \"dexcli help\" for the commands.")
	}
	return exitUsage
}
