package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dexzd/dexzd/dex"
)

// Workload names a standard workload.
type Workload string

// The standard workloads (see the package documentation).
const (
	WorkloadChain  Workload = "chain"
	WorkloadFanout Workload = "fanout"
	WorkloadTimer  Workload = "timer"
	WorkloadSignal Workload = "signal"
)

// Workloads lists the standard workloads in the order dexcli shows them.
var Workloads = []Workload{WorkloadChain, WorkloadFanout, WorkloadTimer, WorkloadSignal}

// DefaultFlowType is a workload's flow type unless the caller names another:
// "bench-<workload>".
func DefaultFlowType(w Workload) string { return "bench-" + string(w) }

// DefaultTimer is the timer workload's timer unless the caller sets one.
const DefaultTimer = time.Second

// --- fanout ------------------------------------------------------------------

// FanoutInput is the input of FanoutStart.
type FanoutInput struct {
	Value int64 `json:"value"`
	// Branches is the number of FanoutBranch executions to move to.
	Branches int    `json:"branches"`
	Pad      string `json:"pad,omitempty"`
}

// BranchInput is the input of one FanoutBranch execution.
type BranchInput struct {
	Value  int64  `json:"value"`
	Branch int    `json:"branch"`
	Pad    string `json:"pad,omitempty"`
}

// FanoutStart moves to Branches FanoutBranch executions at once, which run
// in parallel; branch b gets the input's Value and b.
type FanoutStart struct{ dex.Step[FanoutInput] }

// MovesTo declares FanoutBranch.
func (FanoutStart) MovesTo() []dex.StepRef { return []dex.StepRef{dex.Ref[FanoutBranch]()} }

// Execute moves to the branches.
func (FanoutStart) Execute(_ dex.Context, in FanoutInput) (dex.Decision, error) {
	if in.Branches < 1 {
		return dex.ForceFail(fmt.Sprintf("branches is %d, want at least 1", in.Branches)), nil
	}
	ms := make([]dex.Movement, in.Branches)
	for b := range ms {
		ms[b] = dex.To[FanoutBranch](BranchInput{Value: in.Value, Branch: b, Pad: in.Pad})
	}
	return dex.Move(ms...), nil
}

// FanoutBranch completes its branch (GracefulComplete) with
// ChainOutput{Value + Branch + 1, Pad}; the flow completes when every branch
// has, with one output per branch (E5, E7).
type FanoutBranch struct{ dex.Step[BranchInput] }

// Execute completes the branch.
func (FanoutBranch) Execute(_ dex.Context, in BranchInput) (dex.Decision, error) {
	return dex.GracefulComplete(ChainOutput{Value: in.Value + int64(in.Branch) + 1, Pad: in.Pad}), nil
}

// FanoutFlow is the fanout flow under the type name flowType.
func FanoutFlow(flowType string) *dex.Flow {
	return dex.NewFlow(flowType).Start(FanoutStart{}).Steps(FanoutBranch{})
}

// --- timer -------------------------------------------------------------------

// TimerInput is the input of TimerStep.
type TimerInput struct {
	Value int64 `json:"value"`
	// TimerMS is the durable timer's duration in milliseconds.
	TimerMS int64  `json:"timerMs"`
	Pad     string `json:"pad,omitempty"`
}

// TimerStep waits for a durable timer of TimerMS (WaitFor), then completes
// the flow with ChainOutput{Value + 1, Pad}; it fails the flow if Execute
// runs without the timer having fired.
type TimerStep struct{ dex.Step[TimerInput] }

// WaitFor waits for the timer.
func (TimerStep) WaitFor(_ dex.Context, in TimerInput) (dex.Wait, error) {
	return dex.Timer(time.Duration(in.TimerMS) * time.Millisecond), nil
}

// Execute completes the flow.
func (TimerStep) Execute(_ dex.Context, in TimerInput, r dex.Results) (dex.Decision, error) {
	if !r.TimerFired(dex.TimerIndex(0)) {
		return dex.ForceFail("Execute ran before the timer fired"), nil
	}
	return dex.GracefulComplete(ChainOutput{Value: in.Value + 1, Pad: in.Pad}), nil
}

// TimerFlow is the timer flow under the type name flowType.
func TimerFlow(flowType string) *dex.Flow {
	return dex.NewFlow(flowType).Start(TimerStep{})
}

// --- signal ------------------------------------------------------------------

// Signal is the message the driver publishes to a signal flow.
type Signal struct {
	Value int64 `json:"value"`
}

// SignalChannel is the channel SignalStep waits on.
var SignalChannel = dex.DefineChannel[Signal]("signal")

// SignalStep waits for one message on SignalChannel (WaitFor), then completes
// the flow with ChainOutput{input Value + message Value, Pad}.
type SignalStep struct{ dex.Step[ChainInput] }

// WaitFor waits for one message.
func (SignalStep) WaitFor(dex.Context, ChainInput) (dex.Wait, error) {
	return SignalChannel.ForOne(), nil
}

// Execute completes the flow.
func (SignalStep) Execute(_ dex.Context, in ChainInput, r dex.Results) (dex.Decision, error) {
	msg, ok := SignalChannel.Received(r)
	if !ok {
		return dex.ForceFail("Execute ran without a message"), nil
	}
	return dex.GracefulComplete(ChainOutput{Value: in.Value + msg.Value, Pad: in.Pad}), nil
}

// SignalFlow is the signal flow under the type name flowType.
func SignalFlow(flowType string) *dex.Flow {
	return dex.NewFlow(flowType).Start(SignalStep{}).Channels(SignalChannel)
}

// --- what the driver does per workload -----------------------------------------

// workload is what the driver needs of one standard workload: its flow,
// how to start flow number i, and how to check its result.
type workload interface {
	flow() *dex.Flow
	// stepsPerFlow is the number of step executions of one flow.
	stepsPerFlow() int
	// start starts flow i under id and returns its run ID.
	start(ctx context.Context, c *dex.Client, f *dex.Flow, id string, i int, pad string) (string, error)
	// release does what the flow waits for from the driver, if anything
	// (signal: publish its message). It runs after start, before the wait.
	release(ctx context.Context, c *dex.Client, id string, i int) error
	// check checks a completed flow's outputs.
	check(res *dex.FlowResult, i int, pad string) error
}

// startValue is the Value flow number i starts with.
func startValue(i int) int64 { return int64(i) * 1000 }

func newWorkload(cfg *Config) (workload, error) {
	switch cfg.Workload {
	case WorkloadChain:
		return chainWorkload{flowType: cfg.FlowType, steps: cfg.Steps}, nil
	case WorkloadFanout:
		return fanoutWorkload{flowType: cfg.FlowType, branches: cfg.Branches}, nil
	case WorkloadTimer:
		return timerWorkload{flowType: cfg.FlowType, timer: cfg.Timer}, nil
	case WorkloadSignal:
		return signalWorkload{flowType: cfg.FlowType}, nil
	}
	return nil, fmt.Errorf("unknown workload %q", cfg.Workload)
}

type chainWorkload struct {
	flowType string
	steps    int
}

func (w chainWorkload) flow() *dex.Flow                                       { return ChainFlow(w.flowType) }
func (w chainWorkload) stepsPerFlow() int                                     { return w.steps }
func (chainWorkload) release(context.Context, *dex.Client, string, int) error { return nil }

func (w chainWorkload) start(ctx context.Context, c *dex.Client, f *dex.Flow, id string, i int, pad string) (string, error) {
	run, err := c.StartFlow(ctx, f, id, ChainInput{Value: startValue(i), Left: w.steps, Pad: pad})
	return run.RunID, err
}

func (w chainWorkload) check(res *dex.FlowResult, i int, pad string) error {
	return checkSingle(res, startValue(i)+int64(w.steps), pad,
		fmt.Sprintf("started at %d with %d steps", startValue(i), w.steps))
}

type fanoutWorkload struct {
	flowType string
	branches int
}

func (w fanoutWorkload) flow() *dex.Flow                                       { return FanoutFlow(w.flowType) }
func (w fanoutWorkload) stepsPerFlow() int                                     { return 1 + w.branches }
func (fanoutWorkload) release(context.Context, *dex.Client, string, int) error { return nil }

func (w fanoutWorkload) start(ctx context.Context, c *dex.Client, f *dex.Flow, id string, i int, pad string) (string, error) {
	run, err := c.StartFlow(ctx, f, id, FanoutInput{Value: startValue(i), Branches: w.branches, Pad: pad})
	return run.RunID, err
}

func (w fanoutWorkload) check(res *dex.FlowResult, i int, pad string) error {
	return checkFanout(res, startValue(i), w.branches, pad)
}

// checkFanout checks that a fanout flow has one output per branch, each
// from FanoutBranch, with the values start+1 .. start+branches in any
// order and the payload unchanged.
func checkFanout(res *dex.FlowResult, start int64, branches int, pad string) error {
	if len(res.Outputs) != branches {
		return fmt.Errorf("wrong output: %d outputs, want one per branch (%d)", len(res.Outputs), branches)
	}
	got := make([]int64, 0, branches)
	for _, o := range res.Outputs {
		if o.StepType != "FanoutBranch" {
			return fmt.Errorf("wrong output: an output of %s (%s), want FanoutBranch", o.StepType, o.StepExecutionID)
		}
		var out ChainOutput
		if err := o.Value.Decode(&out); err != nil {
			return fmt.Errorf("decode the output of %s: %w", o.StepExecutionID, err)
		}
		if out.Pad != pad {
			return fmt.Errorf("wrong output: %s returned the payload with %d bytes, want the %d sent", o.StepExecutionID, len(out.Pad), len(pad))
		}
		got = append(got, out.Value)
	}
	slices.Sort(got)
	for b, v := range got {
		if want := start + int64(b) + 1; v != want {
			return fmt.Errorf("wrong output: branch values %v, want %d..%d", got, start+1, start+int64(branches))
		}
	}
	return nil
}

type timerWorkload struct {
	flowType string
	timer    time.Duration
}

func (w timerWorkload) flow() *dex.Flow                                       { return TimerFlow(w.flowType) }
func (timerWorkload) stepsPerFlow() int                                       { return 1 }
func (timerWorkload) release(context.Context, *dex.Client, string, int) error { return nil }

func (w timerWorkload) start(ctx context.Context, c *dex.Client, f *dex.Flow, id string, i int, pad string) (string, error) {
	run, err := c.StartFlow(ctx, f, id, TimerInput{Value: startValue(i), TimerMS: w.timer.Milliseconds(), Pad: pad})
	return run.RunID, err
}

func (w timerWorkload) check(res *dex.FlowResult, i int, pad string) error {
	return checkSingle(res, startValue(i)+1, pad, fmt.Sprintf("started at %d", startValue(i)))
}

type signalWorkload struct{ flowType string }

func (w signalWorkload) flow() *dex.Flow { return SignalFlow(w.flowType) }
func (signalWorkload) stepsPerFlow() int { return 1 }

// signalValue is the Value of the message flow number i gets.
func signalValue(i int) int64 { return int64(i) + 1 }

func (signalWorkload) start(ctx context.Context, c *dex.Client, f *dex.Flow, id string, i int, pad string) (string, error) {
	run, err := c.StartFlow(ctx, f, id, ChainInput{Value: startValue(i), Left: 1, Pad: pad})
	return run.RunID, err
}

func (signalWorkload) release(ctx context.Context, c *dex.Client, id string, i int) error {
	if err := c.Publish(ctx, id, []dex.Message{SignalChannel.Message(Signal{Value: signalValue(i)})}); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

func (signalWorkload) check(res *dex.FlowResult, i int, pad string) error {
	return checkSingle(res, startValue(i)+signalValue(i), pad,
		fmt.Sprintf("started at %d, message %d", startValue(i), signalValue(i)))
}

// checkSingle checks that a flow has exactly one output, ChainOutput{want,
// pad}.
func checkSingle(res *dex.FlowResult, want int64, pad, how string) error {
	if len(res.Outputs) != 1 {
		return fmt.Errorf("wrong output: %d outputs, want 1", len(res.Outputs))
	}
	out, err := dex.Output[ChainOutput](res)
	if err != nil {
		return fmt.Errorf("decode the output: %w", err)
	}
	if out.Value != want {
		return fmt.Errorf("wrong output: value %d, want %d (%s)", out.Value, want, how)
	}
	if out.Pad != pad {
		return fmt.Errorf("wrong output: the payload came back with %d bytes, want the %d sent", len(out.Pad), len(pad))
	}
	return nil
}

// checkStatus turns a result that did not complete into an error.
func checkStatus(res *dex.FlowResult) error {
	if res.Status == dex.StatusCompleted {
		return nil
	}
	st := strings.TrimPrefix(res.Status.String(), "FLOW_STATUS_")
	if ferr := res.Err(); ferr != nil {
		return fmt.Errorf("flow ended %s: %w", st, ferr)
	}
	return fmt.Errorf("flow ended %s", st)
}
