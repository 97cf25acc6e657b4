package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dexzd/dexzd/internal/cli/session"
)

// globalFlagHelp documents the global flags (printed by every help);
// registerGlobals registers them.
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
  --codec-key-file PATH
        AES-GCM key file of the workers' payload codec: values sent are
        encrypted and values read are decrypted (default $DEX_CODEC_KEY_FILE)
` + securityFlagHelp

// helpCommand is "dexcli help [GROUP [COMMAND]]".
func helpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [GROUP [COMMAND]]",
		Short: "show help",
		RunE: func(_ *cobra.Command, args []string) error {
			target := root
			for _, w := range args {
				if !target.HasSubCommands() {
					return &aboutError{err: session.Usagef("help takes a group and a command, not %q", w), cmd: target}
				}
				next := findCommand(target, w)
				if next == nil {
					return &aboutError{err: unknownCommand(target, w), cmd: target}
				}
				target = next
			}
			return target.Help()
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			target := root
			for _, w := range args {
				if target = findCommand(target, w); target == nil {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
			}
			var names []cobra.Completion
			for _, c := range target.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, cobra.CompletionWithDesc(c.Name(), c.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
	}
}

// findCommand is parent's available subcommand named name, or nil.
func findCommand(parent *cobra.Command, name string) *cobra.Command {
	for _, c := range parent.Commands() {
		if (c.Name() == name || c.HasAlias(name)) && c.IsAvailableCommand() {
			return c
		}
	}
	return nil
}

// helpFunc prints the help of dexcli, of a group or of a command; the
// completion commands keep cobra's help (fallback).
func helpFunc(fallback func(*cobra.Command, []string)) func(*cobra.Command, []string) {
	return func(c *cobra.Command, args []string) {
		w := c.OutOrStdout()
		switch {
		case !c.HasParent():
			rootHelp(w, c)
		case c.Parent().HasParent() && c.Parent().Name() == "completion", c.Name() == "completion":
			fallback(c, args)
		case c.HasSubCommands():
			groupHelp(w, c)
		default:
			commandHelp(w, c)
		}
	}
}

// useArgs splits a command's Use into its name and its arguments.
func useArgs(c *cobra.Command) string {
	_, args, _ := strings.Cut(c.Use, " ")
	return args
}

func commandHelp(w io.Writer, c *cobra.Command) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  %s\n", c.Short, c.UseLine())
	if c.Long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Long))
	}
	printFlags(w, c.LocalNonPersistentFlags())
	fmt.Fprintf(w, "\n%s", globalFlagHelp)
	printExamples(w, examples(c))
}

func groupHelp(w io.Writer, g *cobra.Command) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  dexcli %s <command> [arguments] [flags]\n\nCommands:\n", g.Short, g.Name())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var first []string
	for _, c := range g.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		fmt.Fprintf(tw, "  %s %s\t%s\n", c.Name(), useArgs(c), c.Short)
		if ex := examples(c); len(ex) > 0 {
			first = append(first, ex[0])
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%s", globalFlagHelp)
	printExamples(w, first)
	fmt.Fprintf(w, "\nRun \"dexcli %s <command> --help\" for a command's flags.\n", g.Name())
}

func rootHelp(w io.Writer, root *cobra.Command) {
	fmt.Fprintf(w, "%s\n\n", root.Short)
	fmt.Fprint(w, "Usage:\n  dexcli <group> <command> [arguments] [flags]\n\nCommands:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, g := range root.Commands() {
		if !g.IsAvailableCommand() || g.Name() == "completion" {
			continue
		}
		for _, c := range g.Commands() {
			if c.IsAvailableCommand() {
				fmt.Fprintf(tw, "  %s %s\t%s\n", g.Name(), c.Name(), c.Short)
			}
		}
	}
	fmt.Fprintf(tw, "  help [GROUP [COMMAND]]\tshow help\n")
	fmt.Fprintf(tw, "  completion SHELL\tprint the completion script of SHELL: bash, zsh, fish or powershell\n")
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%s", globalFlagHelp)
	printExamples(w, []string{
		"dexcli flow start order order-42 --step Reserve --input '{\"id\":\"42\",\"cents\":1200}'",
		"dexcli flow wait order-42 --timeout 5m",
		"dexcli --server dex-0:8801,dex-1:8801 admin describe --credential-file /run/secrets/dex/admin-token",
		"source <(dexcli completion bash)",
	})
	fmt.Fprint(w, "\nExit codes: 0 success, 1 a request failed, 2 a usage error, 130 interrupted.\n")
	fmt.Fprint(w, "Run \"dexcli help GROUP COMMAND\" or \"dexcli GROUP COMMAND --help\" for details.\n")
}

// printFlags prints a command's own flags (not --help), sorted by name,
// with the name of their value and their default.
func printFlags(w io.Writer, fs *pflag.FlagSet) {
	first := true
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Hidden {
			return
		}
		if first {
			fmt.Fprint(w, "\nFlags:\n")
			first = false
		}
		name, usage := pflag.UnquoteUsage(f)
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

// examples are a command's example lines.
func examples(c *cobra.Command) []string {
	if c.Example == "" {
		return nil
	}
	return strings.Split(c.Example, "\n")
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
