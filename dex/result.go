package dex

import (
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// FlowError says why a flow execution ended other than COMPLETED.
type FlowError struct {
	Type            FlowErrorType
	Message         string
	StepType        string
	StepExecutionID string
	// LastAttempt is the last failed attempt, for WORKER_API_FAIL and
	// INVALID_USER_FLOW_CODE.
	LastAttempt *AttemptFailure
}

func (e *FlowError) Error() string {
	s := e.Type.String() + ": " + e.Message
	if e.StepExecutionID != "" {
		s += " (step execution " + e.StepExecutionID + ")"
	}
	return s
}

func flowErrorOf(p *dexpb.FlowError) *FlowError {
	if p == nil {
		return nil
	}
	e := &FlowError{Type: FlowErrorType(p.GetType()), Message: p.GetMessage(), StepType: p.GetStepType(), StepExecutionID: p.GetStepExecutionId()}
	if p.GetLastAttemptFailure() != nil {
		e.LastAttempt = attemptFailureOf(p.GetLastAttemptFailure())
	}
	return e
}

// StepOutput is the output of one GracefulComplete or ForceComplete.
type StepOutput struct {
	StepType        string
	StepExecutionID string
	Force           bool
	Time            time.Time
	Value           Value
}

func outputsOf(ps []*dexpb.StepOutput) []StepOutput {
	out := make([]StepOutput, 0, len(ps))
	for _, p := range ps {
		out = append(out, StepOutput{
			StepType:        p.GetStepType(),
			StepExecutionID: p.GetStepExecutionId(),
			Force:           p.GetForceComplete(),
			Time:            timeOf(p.GetTime()),
			Value:           valueOf(p.GetOutput()),
		})
	}
	return out
}

// FlowResult is the result of a closed flow execution. A failed,
// cancelled or terminated flow is a result too: Status and Err say how it
// ended.
type FlowResult struct {
	FlowType, FlowID, RunID string
	Status                  FlowStatus
	// Outputs are every completion output, in commit order.
	Outputs []StepOutput
	// Error is set for FAILED, CANCELED and TERMINATED.
	Error     *FlowError
	CloseTime time.Time
}

// Err returns the flow's error, nil when it completed.
func (r *FlowResult) Err() error {
	if r.Error == nil {
		return nil
	}
	return r.Error
}

// Output returns the flow's last output as a T:
//
//	receipt, err := dex.Output[Receipt](res)
func Output[T any](r *FlowResult) (T, error) {
	var v T
	if len(r.Outputs) == 0 || !r.Outputs[len(r.Outputs)-1].Value.IsSet() {
		return v, ErrNoValue
	}
	return decodeValue[T](r.Outputs[len(r.Outputs)-1].Value.ev)
}

func flowResultOf(p *dexpb.FlowResult) *FlowResult {
	return &FlowResult{
		FlowType:  p.GetFlowType(),
		FlowID:    p.GetFlowId(),
		RunID:     p.GetRunId(),
		Status:    FlowStatus(p.GetStatus()),
		Outputs:   outputsOf(p.GetOutputs()),
		Error:     flowErrorOf(p.GetError()),
		CloseTime: timeOf(p.GetCloseTime()),
	}
}

// FlowSummary is a flow execution's identity, type, status and times.
type FlowSummary struct {
	FlowType, FlowID, RunID string
	Status                  FlowStatus
	StartTime, CloseTime    time.Time // CloseTime is zero while it runs
	FlowTimeout             time.Duration
	Error                   *FlowError
	// ParentFlowID is the parent's flow ID for a subflow, else empty.
	ParentFlowID string
}

func summaryOf(p *dexpb.FlowSummary) *FlowSummary {
	return &FlowSummary{
		FlowType:     p.GetFlowType(),
		FlowID:       p.GetFlowId(),
		RunID:        p.GetRunId(),
		Status:       FlowStatus(p.GetStatus()),
		StartTime:    timeOf(p.GetStartTime()),
		CloseTime:    timeOf(p.GetCloseTime()),
		FlowTimeout:  p.GetFlowTimeout().AsDuration(),
		Error:        flowErrorOf(p.GetError()),
		ParentFlowID: p.GetParentFlowId(),
	}
}

func timeOf(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}
