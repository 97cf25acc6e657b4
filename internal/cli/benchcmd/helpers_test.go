package benchcmd

import "github.com/dexzd/dexzd/internal/cli/session"

// The exit codes, as the tests of package cli name them.
const (
	exitOK          = session.ExitOK
	exitFailure     = session.ExitFailure
	exitInterrupted = session.ExitInterrupted
)
