package cli

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Two forms of the Go flag package's syntax, which dexcli accepted before
// it moved to cobra, mean something else to pflag; goFlagSyntax keeps
// them working. It does not split the command line: cobra finds the
// command and pflag parses the flags.
//
//   - A long flag with one dash ("-server ADDR", "-output=json") gets its
//     second dash.
//   - A negative number that is a positional argument, not the value of
//     the flag before it ("flow publish f c -5"), would be read as
//     shorthand flags; it is masked (mask + "-5") until the command's
//     RunE gets its arguments (unmaskNegativeArgs).
//
// Nothing after "--" changes, nor the command line of cobra's hidden
// completion commands.
func goFlagSyntax(root *cobra.Command, args []string) []string {
	out := append([]string{}, args...) // never nil: cobra would read os.Args
	if len(out) > 0 && (out[0] == cobra.ShellCompRequestCmd || out[0] == cobra.ShellCompNoDescRequestCmd) {
		return out
	}
	long := map[string]bool{"help": true}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	end := len(out)
	for i, t := range out {
		if t == "--" {
			end = i
			break
		}
		if strings.HasPrefix(t, "-") && !strings.HasPrefix(t, "--") {
			name, _, _ := strings.Cut(t[1:], "=")
			if len(name) > 1 && long[name] {
				out[i] = "-" + t
			}
		}
	}
	cmd, _, err := root.Find(out)
	if err != nil {
		return out
	}
	for i := 0; i < end; i++ {
		if isNegativeNumber(out[i]) && (i == 0 || !takesValue(cmd, out[i-1])) {
			out[i] = mask + out[i]
		}
	}
	return out
}

// mask prefixes a masked argument: a NUL byte, which no argument of a
// process can hold.
const mask = "\x00"

// isNegativeNumber reports whether t is a negative number ("-5", "-.5"),
// which dexcli reads as a positional argument (a JSON value).
func isNegativeNumber(t string) bool {
	return len(t) >= 2 && t[0] == '-' && (t[1] >= '0' && t[1] <= '9' || t[1] == '.')
}

// takesValue reports whether token t is a flag of cmd that takes the next
// argument as its value.
func takesValue(cmd *cobra.Command, t string) bool {
	if !strings.HasPrefix(t, "-") || strings.Contains(t, "=") {
		return false
	}
	var f *pflag.Flag
	switch {
	case strings.HasPrefix(t, "--"):
		if f = cmd.Flags().Lookup(t[2:]); f == nil {
			f = cmd.InheritedFlags().Lookup(t[2:])
		}
	case len(t) == 2:
		if f = cmd.Flags().ShorthandLookup(t[1:]); f == nil {
			f = cmd.InheritedFlags().ShorthandLookup(t[1:])
		}
	}
	return f != nil && f.NoOptDefVal == ""
}

// unmaskNegativeArgs makes the argument checks and the RunE of every
// command of the tree under c see masked arguments as they were given.
func unmaskNegativeArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error { return check(cmd, unmaskAll(args)) }
	}
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error { return run(cmd, unmaskAll(args)) }
	}
	for _, sub := range c.Commands() {
		unmaskNegativeArgs(sub)
	}
}

func unmaskAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = unmask(a)
	}
	return out
}

// unmask removes the masks from s (an argument, or a message quoting one).
func unmask(s string) string { return strings.ReplaceAll(s, mask, "") }
