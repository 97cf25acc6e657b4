// Package cli is dexcli: the command line for Dex-ZD's FlowService (flow
// commands), AdminService (admin commands) and the load driver (bench
// commands), on github.com/spf13/cobra. cmd/dexcli only wires it to the
// process (arguments, stdio, Ctrl-C); Main holds everything else.
//
// # Layout
//
//   - cli.go: Main, the command tree (the groups, help, completion), the
//     global flags, usage errors and exit codes.
//   - help.go: the help of dexcli, of a group and of a command.
//   - compat.go: the two forms of the Go flag package's syntax that dexcli
//     accepted before cobra ("-server ADDR", a negative number as an
//     argument).
//   - session: what every command runs with: the global flags, one gRPC
//     connection per --server address and the rules for moving on to the
//     next one, failures with the gRPC code and a hint, exit codes.
//   - output: the printer, ordered JSON objects, the JSON rendering of API
//     messages and values, text helpers.
//   - flowcmd, admincmd, benchcmd: the flow, admin (requirements A10-A14)
//     and bench groups; the workloads and the measuring of bench live in
//     internal/bench.
//   - clitest: what the tests of these packages share (golden files, the
//     checks of a command's exit code and output); tests only.
//
// Imports point one way: cli -> flowcmd, admincmd, benchcmd -> session ->
// output. A command package never imports another one, nor cli.
//
// # Adding a command group
//
// A group is a package with New(*session.Env) *cobra.Command returning the
// group's command with its commands. Each command declares its Use line,
// Short and Long help, Example lines (session.Examples), positional
// arguments (session.Args), its own flags on cmd.Flags(), and RunE =
// env.Run(defaultTimeout, fn). Add New to groups() in cli.go; help, shell
// completion, "did you mean", --output, --server failover and error
// reporting then apply to it unchanged.
//
// # Exit codes
//
// 0 success; 1 a request failed or the CLI refused to send it; 2 a usage
// error (an unknown command or flag, a bad flag value, a missing or extra
// argument), printed with the command's usage line; 130 interrupted
// (Ctrl-C).
//
// # Output contract
//
// With --output json every command prints exactly one JSON document on
// stdout: camelCase field names in a fixed order, IDs, epochs and other
// 64-bit integers as strings, enum values without their type prefix
// ("COMPLETED"), and encoded values as {"encoding", "type", "json"} when
// their encoding is json, {"encoding", "type", "base64"} otherwise. A failed
// request prints {"error": {"code", "message", "hint"}} instead, with more
// fields where the failure needs them (an admin step-down with an unknown
// outcome adds outcome, expectedNodeId, expectedNodeEpoch and retryCommand).
// The golden files under testdata pin these shapes.
package cli
