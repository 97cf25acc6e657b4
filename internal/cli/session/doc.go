// Package session is what every dexcli command runs with: the global
// flags (Env, Globals), a command's session (its printer, its timeout and
// one gRPC connection per --server address), the rules for moving on to
// the next address (RetryRule, conn.go), and how a command ends: usage
// errors (exit 2), failures with the gRPC code and a hint of what to do
// (exit 1, errors.go), Ctrl-C (130).
//
// A command package (flowcmd, admincmd, benchcmd) declares cobra commands
// whose RunE is Env.Run(defaultTimeout, fn); fn gets a *Session and returns
// nil, a *UsageError (Usagef) or a *Failure (Session.Fail).
package session
