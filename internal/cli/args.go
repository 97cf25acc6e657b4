package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// commandLine is a command line split into command words, flags and
// positional arguments. Flags may come anywhere (before, between or after
// the command words); a bare "--" ends the flags.
type commandLine struct {
	group *group
	cmd   *command
	help  bool     // -h, --help or "dexcli help ..."
	flags []string // flag tokens with their values, in order
	args  []string // positional arguments after the command words
}

func (l *commandLine) words() []string {
	return []string{l.group.name, l.cmd.name}
}

// scan finds the command words in args and separates flags from
// positional arguments. It knows which flags take a value from the flags
// every command registers, so "--run r1 flow describe f" and "flow describe
// --run r1 f" split alike; the command's own flag set then checks that the
// flags belong to the command.
func (a *app) scan(args []string) (*commandLine, error) {
	line := &commandLine{}
	takesValue := a.flagArity()
	helpWord := false
	for i := 0; i < len(args); i++ {
		t := args[i]
		if t == "--" {
			line.args = append(line.args, args[i+1:]...)
			break
		}
		if isFlagToken(t) {
			name, hasValue := splitFlag(t)
			if name == "h" || name == "help" {
				line.help = true
				continue
			}
			line.flags = append(line.flags, t)
			if !hasValue && takesValue[name] && i+1 < len(args) {
				i++
				line.flags = append(line.flags, args[i])
			}
			continue
		}
		switch {
		case t == "help" && line.cmd == nil && !helpWord:
			helpWord, line.help = true, true
		case line.group == nil:
			if line.group = a.findGroup(t); line.group == nil {
				var names []string
				for _, g := range a.groups {
					names = append(names, g.name)
				}
				return line, usagef("unknown command %q%s", t, didYouMean(t, names, ""))
			}
		case line.cmd == nil:
			if line.cmd = line.group.find(t); line.cmd == nil {
				var names []string
				for _, c := range line.group.commands {
					names = append(names, c.name)
				}
				return line, usagef("unknown command \"%s %s\"%s", line.group.name, t, didYouMean(t, names, line.group.name+" "))
			}
		case helpWord:
			return line, usagef("help takes a group and a command, not %q", t)
		default:
			line.args = append(line.args, t)
		}
	}
	return line, nil
}

// flagArity returns, for every flag name any command knows, whether it
// takes a value (every flag that is not boolean).
func (a *app) flagArity() map[string]bool {
	takes := map[string]bool{}
	add := func(fs *flag.FlagSet) {
		fs.VisitAll(func(f *flag.Flag) {
			b, ok := f.Value.(interface{ IsBoolFlag() bool })
			takes[f.Name] = takes[f.Name] || !ok || !b.IsBoolFlag()
		})
	}
	fs := flag.NewFlagSet("globals", flag.ContinueOnError)
	(&globals{}).register(fs)
	add(fs)
	for _, g := range a.groups {
		for _, c := range g.commands {
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			c.setup(fs)
			add(fs)
		}
	}
	return takes
}

// isFlagToken reports whether t is a flag. A negative number ("-5") is a
// positional argument (a JSON value), not a flag.
func isFlagToken(t string) bool {
	if len(t) < 2 || t[0] != '-' {
		return false
	}
	c := t[1]
	return (c < '0' || c > '9') && c != '.'
}

// splitFlag returns a flag token's name and whether it holds its value
// ("--name=value").
func splitFlag(t string) (name string, hasValue bool) {
	name = strings.TrimPrefix(strings.TrimPrefix(t, "-"), "-")
	name, _, hasValue = strings.Cut(name, "=")
	return name, hasValue
}

func usageLine(g *group, c *command) string {
	parts := []string{"dexcli", g.name, c.name}
	if c.args != "" {
		parts = append(parts, c.args)
	}
	return strings.Join(append(parts, "[flags]"), " ")
}

// printHelp prints the help of a command, of a group, or of dexcli (both
// nil).
func (a *app) printHelp(w io.Writer, g *group, c *command) {
	switch {
	case c != nil:
		fmt.Fprintf(w, "%s\n\nUsage:\n  %s\n", c.summary, usageLine(g, c))
		if c.details != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.details))
		}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs)
		printFlags(w, fs)
		fmt.Fprintf(w, "\n%s", globalFlagHelp)
		printExamples(w, c.examples)
	case g != nil:
		fmt.Fprintf(w, "%s\n\nUsage:\n  dexcli %s <command> [arguments] [flags]\n\nCommands:\n", g.summary, g.name)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		var examples []string
		for _, c := range g.commands {
			fmt.Fprintf(tw, "  %s %s\t%s\n", c.name, c.args, c.summary)
			if len(c.examples) > 0 {
				examples = append(examples, c.examples[0])
			}
		}
		_ = tw.Flush()
		fmt.Fprintf(w, "\n%s", globalFlagHelp)
		printExamples(w, examples)
		fmt.Fprintf(w, "\nRun \"dexcli %s <command> --help\" for a command's flags.\n", g.name)
	default:
		fmt.Fprint(w, "dexcli starts, inspects and drives Dex-ZD flows, and operates Dex-ZD nodes.\n\n")
		fmt.Fprint(w, "Usage:\n  dexcli <group> <command> [arguments] [flags]\n\nCommands:\n")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, g := range a.groups {
			for _, c := range g.commands {
				fmt.Fprintf(tw, "  %s %s\t%s\n", g.name, c.name, c.summary)
			}
		}
		fmt.Fprintf(tw, "  help [GROUP [COMMAND]]\tshow help\n")
		_ = tw.Flush()
		fmt.Fprintf(w, "\n%s", globalFlagHelp)
		printExamples(w, []string{
			"dexcli flow start order order-42 --step Reserve --input '{\"id\":\"42\",\"cents\":1200}'",
			"dexcli flow wait order-42 --timeout 5m",
			"dexcli --server dex-0:8801,dex-1:8801 admin describe --credential-file /run/secrets/dex/admin-token",
		})
		fmt.Fprint(w, "\nExit codes: 0 success, 1 a request failed, 2 a usage error, 130 interrupted.\n")
		fmt.Fprint(w, "Run \"dexcli help GROUP COMMAND\" or \"dexcli GROUP COMMAND --help\" for details.\n")
	}
}

func printFlags(w io.Writer, fs *flag.FlagSet) {
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprint(w, "\nFlags:\n")
			first = false
		}
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		switch f.DefValue {
		case "", "false", "0", "0s", "[]":
		default:
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n        %s\n", line, usage)
	})
}

func printExamples(w io.Writer, examples []string) {
	if len(examples) == 0 {
		return
	}
	fmt.Fprint(w, "\nExamples:\n")
	for _, e := range examples {
		fmt.Fprintf(w, "  %s\n", e)
	}
}

// optUint is a flag holding an unsigned integer that records whether it was
// given.
type optUint struct {
	v    uint64
	set  bool
	bits int
}

func (o *optUint) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatUint(o.v, 10)
}

func (o *optUint) Set(s string) error {
	bits := o.bits
	if bits == 0 {
		bits = 64
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return fmt.Errorf("not an unsigned %d-bit integer", bits)
	}
	o.v, o.set = v, true
	return nil
}

// namedJSON is one name=JSON pair of --attr or set-attrs.
type namedJSON struct {
	name  string
	value []byte
}

// namedJSONList is a repeatable flag of name=JSON pairs.
type namedJSONList []namedJSON

func (l *namedJSONList) String() string {
	if l == nil {
		return ""
	}
	names := make([]string, len(*l))
	for i, p := range *l {
		names[i] = p.name
	}
	return strings.Join(names, ",")
}

func (l *namedJSONList) Set(s string) error {
	p, err := parseNamedJSON(s)
	if err != nil {
		return err
	}
	*l = append(*l, p)
	return nil
}

// parseNamedJSON parses "name=JSON".
func parseNamedJSON(s string) (namedJSON, error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return namedJSON{}, fmt.Errorf("%q is not name=JSON", s)
	}
	v, err := parseJSONArg(value)
	if err != nil {
		return namedJSON{}, fmt.Errorf("value of %q: %w", name, err)
	}
	return namedJSON{name: strings.TrimSpace(name), value: v}, nil
}

// parseJSONArg checks that s is one JSON value and returns it compacted.
func parseJSONArg(s string) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(strings.TrimSpace(s))); err != nil {
		return nil, fmt.Errorf("not valid JSON (%w); quote strings, e.g. '\"text\"'", err)
	}
	return buf.Bytes(), nil
}

// didYouMean suggests the name closest to typed (at most 2 edits away, or
// one that typed starts), as "; did you mean \"prefix name\"?", or "".
func didYouMean(typed string, names []string, prefix string) string {
	best, bestD := "", 3
	for _, n := range names {
		d := editDistance(typed, n)
		if len(typed) >= 2 && strings.HasPrefix(n, typed) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean \"%s%s\"?", prefix, best)
}

// editDistance is the Levenshtein distance of a and b, with a swap of two
// adjacent letters counted as one edit.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
