package bench

import "github.com/dexzd/dexzd/dex"

// DefaultChainFlowType is the chain flow's type unless the caller names
// another.
const DefaultChainFlowType = "bench-chain"

// ChainInput is the input of a ChainStep execution.
type ChainInput struct {
	// Value is the running value; each step adds 1.
	Value int64 `json:"value"`
	// Left is the number of steps still to run, this one included.
	Left int `json:"left"`
	// Pad is the payload carried unchanged through every step.
	Pad string `json:"pad,omitempty"`
}

// ChainOutput is the chain flow's output.
type ChainOutput struct {
	Value int64  `json:"value"`
	Pad   string `json:"pad,omitempty"`
}

// ChainStep adds 1 to its input's Value and moves to the next ChainStep, or
// completes the flow when it was the last one.
type ChainStep struct{ dex.Step[ChainInput] }

// MovesTo declares the only step ChainStep moves to: itself.
func (ChainStep) MovesTo() []dex.StepRef { return []dex.StepRef{dex.Ref[ChainStep]()} }

// Execute runs one step of the chain.
func (ChainStep) Execute(_ dex.Context, in ChainInput) (dex.Decision, error) {
	in.Value++
	if in.Left <= 1 {
		return dex.GracefulComplete(ChainOutput{Value: in.Value, Pad: in.Pad}), nil
	}
	in.Left--
	return dex.Move(dex.To[ChainStep](in)), nil
}

// ChainFlow is the chain flow under the type name flowType.
func ChainFlow(flowType string) *dex.Flow {
	return dex.NewFlow(flowType).Start(ChainStep{})
}
