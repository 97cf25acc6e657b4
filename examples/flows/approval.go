package flows

import (
	"time"

	"github.com/dexzd/dexzd/dex"
)

// Request is the approval flow's input.
type Request struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// Vote is a message on the "approve" channel.
type Vote struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// Verdict is the approval flow's output.
type Verdict struct {
	RequestID string `json:"requestId"`
	Outcome   string `json:"outcome"` // "approved", "rejected" or "timed-out"
	By        string `json:"by,omitempty"`
}

var (
	// Approve carries the approver's vote.
	Approve = dex.DefineChannel[Vote]("approve")
	// ApprovalTimeout bounds the wait; SkipTimer(..., dex.TimerID("timeout"))
	// fires it early.
	ApprovalTimeout = dex.Timer(24 * time.Hour).WithID("timeout")
)

// AwaitApproval waits for a vote or a day, whichever comes first.
type AwaitApproval struct{ dex.Step[Request] }

func (AwaitApproval) WaitFor(ctx dex.Context, r Request) (dex.Wait, error) {
	return dex.AnyOf(Approve.ForOne(), ApprovalTimeout), nil
}

func (AwaitApproval) Execute(ctx dex.Context, r Request, res dex.Results) (dex.Decision, error) {
	if v, ok := Approve.Received(res); ok {
		outcome := "rejected"
		if v.Approved {
			outcome = "approved"
		}
		return dex.GracefulComplete(Verdict{RequestID: r.ID, Outcome: outcome, By: v.By}), nil
	}
	return dex.GracefulComplete(Verdict{RequestID: r.ID, Outcome: "timed-out"}), nil
}

// ApprovalFlow completes approved, rejected or timed out.
var ApprovalFlow = dex.NewFlow("approval").
	Start(AwaitApproval{}).
	Channels(Approve)
