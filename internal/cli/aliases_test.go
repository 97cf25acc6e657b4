package cli

import (
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/cli/output"
)

// Names the tests of this package use for what now lives in the
// subpackages.
var (
	codeName   = output.CodeName
	shellQuote = output.ShellQuote
)

// jsonEncoded is a JSON value as the API carries it.
func jsonEncoded(b []byte) *dexpb.EncodedValue {
	return &dexpb.EncodedValue{Encoding: "json", Data: b}
}

// waitPoll is the long poll of "flow wait" (flowcmd's waitPoll): the
// server caps one at 60 s by default.
const waitPoll = 60 * time.Second
