package dex

import (
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestHistoryEventOf_CarriesTheFieldsOfEachKind checks the conversion of
// the API's history events to dex.HistoryEvent.
//
// Covers: E26
func TestHistoryEventOf_CarriesTheFieldsOfEachKind(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	failed := historyEventOf(&dexpb.HistoryEvent{EventId: 7, Time: timestamppb.New(at),
		Event: &dexpb.HistoryEvent_ExecuteFailed{ExecuteFailed: &dexpb.StepAttemptFailedEvent{
			StepType: "Charge", StepExecutionId: "Charge-1", Duration: durationpb.New(20 * time.Millisecond),
			Failure: &dexpb.AttemptFailure{Method: dexpb.TaskKind_TASK_KIND_EXECUTE, Attempt: 2,
				Kind: dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_WORKER_ERROR, ErrorType: "*x.Busy", Message: "busy"},
		}}})
	if failed.ID != 7 || !failed.Time.Equal(at) || failed.Kind != EventExecuteFailed || failed.StepType != "Charge" ||
		failed.StepExecutionID != "Charge-1" || failed.Attempt != 2 || failed.Duration != 20*time.Millisecond ||
		failed.Failure == nil || failed.Failure.Kind != FailureWorkerError || failed.Failure.Type != "*x.Busy" {
		t.Errorf("ExecuteFailed = %+v", failed)
	}
	if got, want := failed.String(), "#7 ExecuteFailed Charge-1 attempt 2: attempt 2 failed (ATTEMPT_FAILURE_KIND_WORKER_ERROR): *x.Busy: busy"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	done := historyEventOf(&dexpb.HistoryEvent{EventId: 8,
		Event: &dexpb.HistoryEvent_ExecuteCompleted{ExecuteCompleted: &dexpb.ExecuteCompletedEvent{
			StepType: "Charge", StepExecutionId: "Charge-1", Attempt: 3, Duration: durationpb.New(time.Second)}}})
	if done.Kind != EventExecuteCompleted || done.Attempt != 3 || done.Duration != time.Second || done.Failure != nil {
		t.Errorf("ExecuteCompleted = %+v", done)
	}
	closed := historyEventOf(&dexpb.HistoryEvent{EventId: 9,
		Event: &dexpb.HistoryEvent_FlowClosed{FlowClosed: &dexpb.FlowClosedEvent{Status: dexpb.FlowStatus_FLOW_STATUS_FAILED,
			Error: &dexpb.FlowError{Type: dexpb.FlowErrorType_FLOW_ERROR_TYPE_FLOW_TIMEOUT, Message: "timed out"}}}})
	if closed.Kind != EventFlowClosed || closed.Status != StatusFailed || closed.Error == nil || closed.Error.Type != ErrorFlowTimeout {
		t.Errorf("FlowClosed = %+v", closed)
	}
	rpc := historyEventOf(&dexpb.HistoryEvent{Event: &dexpb.HistoryEvent_RpcCompleted{RpcCompleted: &dexpb.RpcCompletedEvent{RpcName: "add"}}})
	if rpc.Kind != EventRPCCompleted || rpc.RPCName != "add" {
		t.Errorf("RpcCompleted = %+v", rpc)
	}
	user := historyEventOf(&dexpb.HistoryEvent{EventId: 10, Event: &dexpb.HistoryEvent_User{User: &dexpb.UserEventRecorded{
		StepType: "Gate", StepExecutionId: "Gate-1", Name: "passed", Value: &dexpb.EncodedValue{Encoding: EncodingJSON, Data: []byte(`7`)}}}})
	var n int
	if err := user.EventValue.Decode(&n); err != nil || user.Kind != EventUser || user.EventName != "passed" || n != 7 ||
		user.StepExecutionID != "Gate-1" || user.String() != "#10 UserEvent Gate-1 passed 7" {
		t.Errorf("UserEvent = %+v (%s), value %d %v", user, user, n, err)
	}
}

// TestFlowStateOf_CarriesStepsQueuesAndAttributes checks the conversion of
// the API's live state to dex.FlowState.
//
// Covers: E26
func TestFlowStateOf_CarriesStepsQueuesAndAttributes(t *testing.T) {
	t.Parallel()
	ev := &dexpb.EncodedValue{Encoding: EncodingJSON, Data: []byte(`"x"`)}
	st := flowStateOf(&dexpb.FlowState{
		Summary: &dexpb.FlowSummary{FlowType: "order", FlowId: "o-1", RunId: "r1", Status: dexpb.FlowStatus_FLOW_STATUS_RUNNING},
		StepExecutions: []*dexpb.StepExecutionState{{
			StepType: "Await", StepExecutionId: "Await-1", Phase: dexpb.StepPhase_STEP_PHASE_WAIT_FOR, Input: ev,
			Attempt: &dexpb.AttemptState{Method: dexpb.TaskKind_TASK_KIND_WAIT_FOR, Attempt: 2,
				Status: dexpb.AttemptStatus_ATTEMPT_STATUS_BACKOFF, WorkerId: "w1"},
			LastFailure: &dexpb.AttemptFailure{Attempt: 1, Message: "boom"},
		}},
		Channels:   []*dexpb.ChannelQueue{{Channel: "approve", Size: 3, Messages: []*dexpb.QueuedMessage{{Value: ev}}}},
		Attributes: []*dexpb.Attribute{{Name: "status", Value: ev}},
	})
	if st.Summary.FlowID != "o-1" || st.Summary.Status != StatusRunning {
		t.Errorf("Summary = %+v", st.Summary)
	}
	if len(st.Steps) != 1 {
		t.Fatalf("Steps = %+v", st.Steps)
	}
	s := st.Steps[0]
	if s.StepExecutionID != "Await-1" || s.Phase != PhaseWaitFor || s.Input.String() != `"x"` ||
		s.Attempt.Method != KindWaitFor || s.Attempt.Attempt != 2 || s.Attempt.Status != AttemptBackoff ||
		s.Attempt.WorkerID != "w1" || s.LastFailure == nil || s.LastFailure.Message != "boom" || s.WaitForFailure != nil {
		t.Errorf("Steps[0] = %+v", s)
	}
	if len(st.Channels) != 1 || st.Channels[0].Channel != "approve" || st.Channels[0].Size != 3 || len(st.Channels[0].Messages) != 1 {
		t.Errorf("Channels = %+v", st.Channels)
	}
	if v, ok := st.Attributes["status"]; !ok || v.String() != `"x"` {
		t.Errorf("Attributes = %v", st.Attributes)
	}
}
