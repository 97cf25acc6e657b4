package server

import (
	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// heartbeatIn converts a worker's Heartbeat (E38): the tokens of its
// running tasks, those that carry details included, and the details. A
// token that does not decode, or details that do not convert, are left
// out: a heartbeat is answered with nothing, and the attempt's result
// will say what is wrong with the token.
func heartbeatIn(h *dexpb.Heartbeat) ([]engine.Token, []TaskDetails) {
	var toks []engine.Token
	for _, raw := range h.GetRunningTaskTokens() {
		if t, err := engine.DecodeToken(raw); err == nil {
			toks = append(toks, t)
		}
	}
	var details []TaskDetails
	for _, d := range h.GetDetails() {
		t, err := engine.DecodeToken(d.GetTaskToken())
		if err != nil {
			continue
		}
		toks = append(toks, t)
		v, err := valueIn("heartbeat.details.details", d.GetDetails())
		if err != nil || v.IsZero() {
			continue
		}
		details = append(details, TaskDetails{Token: t, Details: v})
	}
	return toks, details
}
