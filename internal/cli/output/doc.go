// Package output is how dexcli prints: the printer of a command's result
// (one JSON document with --output json, text for people otherwise),
// ordered JSON objects, the JSON rendering of API messages and encoded
// values (jsonview.go), text helpers for tables, times and values, the
// canonical gRPC code names, shell quoting of suggested command lines, and
// the spinner of long calls. It knows nothing of commands or connections.
package output
