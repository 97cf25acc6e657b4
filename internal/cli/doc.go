// Package cli is dexcli: the command line for Dex-ZD's FlowService (flow
// commands) and AdminService (admin commands). cmd/dexcli only wires it to
// the process (arguments, stdio, Ctrl-C); Main holds everything else.
//
// # Layout
//
//   - cli.go: Main, the command table (groups), the global flags, a
//     command's session.
//   - args.go: splitting a command line into command words, flags and
//     arguments (flags may come anywhere); help; flag value types.
//   - conn.go: one gRPC connection per --server address, and the rules for
//     moving on to the next address (retryRule).
//   - errors.go: usage errors (exit 2), failures (exit 1) with the gRPC code
//     and a hint of what to do, exit codes.
//   - output.go, jsonview.go: the printer, ordered JSON objects, the JSON
//     rendering of API messages and values.
//   - flow.go, flow_read.go, flow_render.go: the flow group.
//   - admin.go: the admin group (requirements A10-A14).
//
// # Adding a command group
//
// A group is a *group value listing its commands; each command declares its
// positional arguments, registers its own flags in setup and returns the
// function that runs it. Put a new group (the load driver "bench", say) in
// its own file with a constructor, and add the constructor to groups() in
// cli.go. The command line scanner, help, --output, --server failover and
// error reporting then apply to it unchanged.
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
