package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/cli/clitest"
)

// checkGolden compares got with testdata/<name>.<json|txt>, after replacing
// the test's server addresses with ADDR. With -update it rewrites the file.
func checkGolden(t *testing.T, name, format, got string, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		got = strings.ReplaceAll(got, a, "ADDR")
	}
	clitest.CheckGolden(t, name, format, got)
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 123000000, time.UTC)

func ts(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }

func jv(s string) *dexpb.EncodedValue {
	return &dexpb.EncodedValue{Encoding: "json", Type: "orders.Order", Data: []byte(s)}
}

func fixtureSummary() *dexpb.FlowSummary {
	return &dexpb.FlowSummary{
		FlowType: "order", FlowId: "order-42", RunId: "run-1", Status: dexpb.FlowStatus_FLOW_STATUS_FAILED,
		StartTime: ts(0), CloseTime: ts(90 * time.Second),
		FlowTimeout: durationpb.New(24 * time.Hour), FlowTimeoutPolicy: dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_CANCEL,
		Error: &dexpb.FlowError{
			Type: dexpb.FlowErrorType_FLOW_ERROR_TYPE_WORKER_API_FAIL, Message: "card declined",
			StepType: "Charge", StepExecutionId: "Charge-1",
			LastAttemptFailure: &dexpb.AttemptFailure{
				Method: dexpb.TaskKind_TASK_KIND_EXECUTE, Attempt: 3, Kind: dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_WORKER_ERROR,
				ErrorType: "*errors.errorString", Message: "card declined", Stack: "main.Charge.Execute\n\tcharge.go:12", Time: ts(89 * time.Second),
			},
		},
	}
}

func fixtureState() *dexpb.FlowState {
	sum := fixtureSummary()
	sum.Status, sum.CloseTime, sum.Error = dexpb.FlowStatus_FLOW_STATUS_RUNNING, nil, nil
	return &dexpb.FlowState{
		Summary: sum,
		StepExecutions: []*dexpb.StepExecutionState{{
			StepType: "AwaitApproval", StepExecutionId: "AwaitApproval-1", Phase: dexpb.StepPhase_STEP_PHASE_WAITING,
			Input: jv(`{"id": "42", "cents": 1200}`), ScheduleTime: ts(time.Second),
			Wait: &dexpb.WaitState{
				Wait: &dexpb.Wait{Kind: &dexpb.Wait_AnyOf{AnyOf: &dexpb.WaitConditions{Conditions: []*dexpb.WaitCondition{
					{Condition: &dexpb.WaitCondition_Channel{Channel: &dexpb.ChannelCondition{Channel: "approve", Bound: dexpb.ChannelBound_CHANNEL_BOUND_FOR_ONE}}},
					{Id: "deadline", Condition: &dexpb.WaitCondition_Timer{Timer: &dexpb.TimerCondition{Duration: durationpb.New(24 * time.Hour)}}},
				}}}},
				StoreTime: ts(2 * time.Second),
				Timers:    []*dexpb.TimerState{{TimerIndex: 0, ConditionId: "deadline", FireTime: ts(24*time.Hour + 2*time.Second), Status: dexpb.TimerStatus_TIMER_STATUS_PENDING}},
				Channels:  []*dexpb.ChannelConditionState{{ChannelConditionIndex: 0, Channel: "approve"}},
			},
		}, {
			StepType: "Ship", StepExecutionId: "Ship-1", Phase: dexpb.StepPhase_STEP_PHASE_WAITING,
			Input: jv(`{"id": "42"}`), ScheduleTime: ts(2 * time.Second),
			Wait: &dexpb.WaitState{
				Wait: &dexpb.Wait{Kind: &dexpb.Wait_AllOf{AllOf: &dexpb.WaitConditions{Conditions: []*dexpb.WaitCondition{
					{Id: "parcel", Condition: &dexpb.WaitCondition_SubFlow{SubFlow: &dexpb.SubFlowCondition{FlowType: "parcel", Input: jv(`1`)}}},
					{Condition: &dexpb.WaitCondition_SubFlow{SubFlow: &dexpb.SubFlowCondition{FlowType: "parcel", Input: jv(`2`)}}},
				}}}},
				StoreTime: ts(3 * time.Second),
				SubFlows: []*dexpb.SubFlowConditionState{
					{SubFlowConditionIndex: 0, ConditionId: "parcel", FlowType: "parcel", FlowId: "SubFlow:order-42-Ship-1-0", RunId: "run-8",
						Satisfied: true, Status: dexpb.FlowStatus_FLOW_STATUS_COMPLETED},
					{SubFlowConditionIndex: 1, FlowType: "parcel", FlowId: "SubFlow:order-42-Ship-1-1", RunId: "run-9",
						Status: dexpb.FlowStatus_FLOW_STATUS_RUNNING},
				},
			},
		}, {
			StepType: "Charge", StepExecutionId: "Charge-1", Phase: dexpb.StepPhase_STEP_PHASE_EXECUTE,
			Input: &dexpb.EncodedValue{Encoding: "proto", Type: "orders.v1.Charge", Data: []byte{0x0a, 0x02, 0x34, 0x32}}, ScheduleTime: ts(3 * time.Second),
			Attempt: &dexpb.AttemptState{
				Method: dexpb.TaskKind_TASK_KIND_EXECUTE, Attempt: 2, Status: dexpb.AttemptStatus_ATTEMPT_STATUS_BACKOFF,
				FirstAttemptTime: ts(4 * time.Second), NextAttemptTime: ts(6 * time.Second),
			},
			LastFailure: &dexpb.AttemptFailure{
				Method: dexpb.TaskKind_TASK_KIND_EXECUTE, Attempt: 1, Kind: dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_WORKER_ERROR,
				ErrorType: "*errors.errorString", Message: "gateway timeout", Stack: "main.Charge.Execute\n\tcharge.go:12", Time: ts(5 * time.Second),
			},
		}},
		Channels:   []*dexpb.ChannelQueue{{Channel: "notes", Size: 3, Messages: []*dexpb.QueuedMessage{{Value: jv(`"call me"`), PublishTime: ts(7 * time.Second)}}}},
		Attributes: []*dexpb.Attribute{{Name: "status", Value: jv(`"reserved"`)}},
		Outputs:    []*dexpb.StepOutput{{StepType: "Reserve", StepExecutionId: "Reserve-1", Output: jv(`{"ok":true}`), Time: ts(time.Second)}},
		PendingTasks: []*dexpb.PendingTask{{
			Kind: dexpb.TaskKind_TASK_KIND_RPC, RpcName: "status", ReadyTime: ts(8 * time.Second), NoWorker: true,
		}},
		HeldLocks: []*dexpb.HeldLock{
			{Attribute: "status", StepExecutionId: "Charge-1", Method: dexpb.TaskKind_TASK_KIND_EXECUTE, Attempt: 2},
			{Attribute: "total", RpcName: "adjust", CallId: "call-7"},
		},
	}
}

func fixtureResult() *dexpb.FlowResult {
	return &dexpb.FlowResult{
		FlowType: "order", FlowId: "order-42", RunId: "run-1", Status: dexpb.FlowStatus_FLOW_STATUS_COMPLETED,
		Outputs: []*dexpb.StepOutput{
			{StepType: "Ship", StepExecutionId: "Ship-1", Output: jv(`{"tracking":"Z1"}`), Time: ts(time.Minute)},
			{StepType: "Audit", StepExecutionId: "Audit-1", ForceComplete: true, Time: ts(2 * time.Minute)},
		},
		CloseTime: ts(2 * time.Minute),
	}
}

func fixtureHistory() []*dexpb.HistoryEvent {
	events := []*dexpb.HistoryEvent{
		{Event: &dexpb.HistoryEvent_FlowStarted{FlowStarted: &dexpb.FlowStartedEvent{
			FlowType: "order", StartStep: &dexpb.Movement{StepType: "Reserve", Input: jv(`{"id":"42"}`)}, StartStepExecutionId: "Reserve-1",
			InitialAttributes: []*dexpb.Attribute{{Name: "status", Value: jv(`"new"`)}}, RequestId: "req-1",
		}}},
		{Event: &dexpb.HistoryEvent_WaitForCompleted{WaitForCompleted: &dexpb.WaitForCompletedEvent{
			StepType: "AwaitApproval", StepExecutionId: "AwaitApproval-1", Attempt: 1, Duration: durationpb.New(12 * time.Millisecond),
			Wait: &dexpb.Wait{Kind: &dexpb.Wait_Until{Until: &dexpb.WaitCondition{Condition: &dexpb.WaitCondition_Channel{
				Channel: &dexpb.ChannelCondition{Channel: "approve", Bound: dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST_AT_MOST, Min: 1, Max: 5},
			}}}},
		}}},
		{Event: &dexpb.HistoryEvent_ExecuteFailed{ExecuteFailed: &dexpb.StepAttemptFailedEvent{
			StepType: "Charge", StepExecutionId: "Charge-1", Duration: durationpb.New(3 * time.Millisecond), NextAttemptTime: ts(5 * time.Second),
			Failure: &dexpb.AttemptFailure{Method: dexpb.TaskKind_TASK_KIND_EXECUTE, Attempt: 1, Kind: dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_WORKER_ERROR, ErrorType: "*errors.errorString", Message: "gateway timeout"},
		}}},
		{Event: &dexpb.HistoryEvent_ExecuteCompleted{ExecuteCompleted: &dexpb.ExecuteCompletedEvent{
			StepType: "Reserve", StepExecutionId: "Reserve-1", Attempt: 1, Duration: durationpb.New(5 * time.Millisecond),
			Decision: &dexpb.StepDecision{Decision: &dexpb.StepDecision_Movements{Movements: &dexpb.Movements{Movements: []*dexpb.Movement{
				{StepType: "Charge", Input: jv(`{"cents":1200}`)},
			}}}},
			ScheduledStepExecutionIds: []string{"Charge-1"},
			Writes:                    &dexpb.StagedWrites{AttributeWrites: []*dexpb.Attribute{{Name: "status", Value: jv(`"reserved"`)}}},
		}}},
		{Event: &dexpb.HistoryEvent_RpcCompleted{RpcCompleted: &dexpb.RpcCompletedEvent{
			RpcName: "status", Output: jv(`"reserved"`), Duration: durationpb.New(2 * time.Millisecond),
		}}},
		{Event: &dexpb.HistoryEvent_ChannelPublished{ChannelPublished: &dexpb.ChannelPublishedEvent{
			Publishes: []*dexpb.ChannelPublish{{Channel: "approve", Values: []*dexpb.EncodedValue{jv("true")}}}, RequestId: "pub-1",
		}}},
		{Event: &dexpb.HistoryEvent_AttributesSet{AttributesSet: &dexpb.AttributesSetEvent{
			Attributes: []*dexpb.Attribute{{Name: "priority", Value: &dexpb.EncodedValue{Data: []byte{1, 2}}}},
		}}},
		{Event: &dexpb.HistoryEvent_TimerSkipped{TimerSkipped: &dexpb.TimerSkippedEvent{StepExecutionId: "AwaitApproval-1", ConditionId: "deadline"}}},
		// E32: a combination wait, a user event and a conditional close.
		{Event: &dexpb.HistoryEvent_WaitForCompleted{WaitForCompleted: &dexpb.WaitForCompletedEvent{
			StepType: "Gate", StepExecutionId: "Gate-1", Attempt: 1, Duration: durationpb.New(time.Millisecond),
			Wait: &dexpb.Wait{Kind: &dexpb.Wait_AnyCombinationOf{AnyCombinationOf: &dexpb.WaitCombinations{
				Conditions: []*dexpb.WaitCondition{
					{Id: "approve", Condition: &dexpb.WaitCondition_Channel{Channel: &dexpb.ChannelCondition{Channel: "approve", Bound: dexpb.ChannelBound_CHANNEL_BOUND_FOR_ONE}}},
					{Id: "late", Condition: &dexpb.WaitCondition_Timer{Timer: &dexpb.TimerCondition{Duration: durationpb.New(time.Hour)}}},
				},
				Groups: []*dexpb.ConditionGroup{{ConditionIds: []string{"approve"}}, {ConditionIds: []string{"late"}}},
			}}},
		}}},
		{Event: &dexpb.HistoryEvent_User{User: &dexpb.UserEventRecorded{StepType: "Gate", StepExecutionId: "Gate-1", Name: "gate-passed", Value: jv(`{"ticket":"T-7"}`)}}},
		{Event: &dexpb.HistoryEvent_ExecuteCompleted{ExecuteCompleted: &dexpb.ExecuteCompletedEvent{
			StepType: "Gate", StepExecutionId: "Gate-1", Attempt: 1, Duration: durationpb.New(time.Millisecond),
			Decision: &dexpb.StepDecision{Decision: &dexpb.StepDecision_ForceCompleteIfChannelsEmpty{ForceCompleteIfChannelsEmpty: &dexpb.ForceCompleteIfChannelsEmpty{
				Output: jv(`"done"`), Channels: []string{"items"}, Fallback: []*dexpb.Movement{{StepType: "Drain", Input: jv("0")}},
			}}},
			ScheduledStepExecutionIds: []string{"Drain-1"},
		}}},
		{Event: &dexpb.HistoryEvent_FlowClosed{FlowClosed: &dexpb.FlowClosedEvent{
			Status: dexpb.FlowStatus_FLOW_STATUS_CANCELED, Error: &dexpb.FlowError{Message: "customer withdrew"},
		}}},
	}
	for i, e := range events {
		e.EventId, e.Time = uint64(i+1), ts(time.Duration(i+1)*time.Second)
	}
	return events
}

// fixtureServer answers every read with the fixtures above.
func fixtureServer() *fakeServer {
	return &fakeServer{
		getSummary: func(context.Context, *dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error) {
			return &dexpb.GetFlowSummaryResponse{Summary: fixtureSummary()}, nil
		},
		getState: func(context.Context, *dexpb.GetFlowStateRequest) (*dexpb.GetFlowStateResponse, error) {
			return &dexpb.GetFlowStateResponse{State: fixtureState()}, nil
		},
		waitForFlow: func(context.Context, *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
			return &dexpb.WaitForFlowResponse{Result: fixtureResult()}, nil
		},
		getHistory: func(context.Context, *dexpb.GetHistoryEventsRequest) (*dexpb.GetHistoryEventsResponse, error) {
			return &dexpb.GetHistoryEventsResponse{RunId: "run-1", Events: fixtureHistory()}, nil
		},
		listFlows: func(context.Context, *dexpb.ListFlowsRequest) (*dexpb.ListFlowsResponse, error) {
			running := fixtureState().GetSummary()
			running.FlowId, running.RunId = "order-43", "run-7"
			return &dexpb.ListFlowsResponse{Flows: []*dexpb.FlowSummary{running, fixtureSummary()}}, nil
		},
		getAttrs: func(context.Context, *dexpb.GetAttributesRequest) (*dexpb.GetAttributesResponse, error) {
			return &dexpb.GetAttributesResponse{RunId: "run-1", Attributes: []*dexpb.Attribute{
				{Name: "priority", Value: &dexpb.EncodedValue{Encoding: "proto", Type: "orders.v1.Priority", Data: []byte{8, 3}}},
				{Name: "status", Value: jv(`"reserved"`)},
			}}, nil
		},
		startFlow: func(context.Context, *dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
			return &dexpb.StartFlowResponse{RunId: "run-1"}, nil
		},
		stopFlow: func(context.Context, *dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error) {
			return &dexpb.StopFlowResponse{RunId: "run-1", Status: dexpb.FlowStatus_FLOW_STATUS_CANCELED}, nil
		},
		publish: func(context.Context, *dexpb.PublishToChannelRequest) (*dexpb.PublishToChannelResponse, error) {
			return &dexpb.PublishToChannelResponse{RunId: "run-1"}, nil
		},
		setAttrs: func(context.Context, *dexpb.SetAttributesRequest) (*dexpb.SetAttributesResponse, error) {
			return &dexpb.SetAttributesResponse{RunId: "run-1"}, nil
		},
		invokeRPC: func(context.Context, *dexpb.InvokeRPCRequest) (*dexpb.InvokeRPCResponse, error) {
			return &dexpb.InvokeRPCResponse{RunId: "run-1", Output: jv(`{"status":"reserved"}`)}, nil
		},
		skipTimer: func(context.Context, *dexpb.SkipTimerRequest) (*dexpb.SkipTimerResponse, error) {
			return &dexpb.SkipTimerResponse{}, nil
		},
		resetFlow: func(_ context.Context, r *dexpb.ResetFlowRequest) (*dexpb.ResetFlowResponse, error) {
			return &dexpb.ResetFlowResponse{RunId: "run-2", ResetRunId: r.GetRunId()}, nil
		},
		describe: activeNode().describe,
	}
}

// TestOutput_Golden pins the JSON output (the scripting contract) and the
// table output of every command.
func TestOutput_Golden(t *testing.T) {
	t.Parallel()
	addr := fixtureServer().start(t)
	tests := []struct {
		name string
		args []string
	}{
		{"admin_describe", []string{"admin", "describe"}},
		{"flow_describe", []string{"flow", "describe", "order-42"}},
		{"flow_state", []string{"flow", "state", "order-42"}},
		{"flow_wait", []string{"flow", "wait", "order-42", "--run", "run-1"}},
		{"flow_history", []string{"flow", "history", "order-42"}},
		{"flow_list", []string{"flow", "list"}},
		{"flow_get_attrs", []string{"flow", "get-attrs", "order-42"}},
		{"flow_start", []string{"flow", "start", "order", "order-42", "--step", "Reserve", "--input", `{"id":"42"}`, "--request-id", "req-1"}},
		{"flow_stop", []string{"flow", "stop", "order-42"}},
		{"flow_publish", []string{"flow", "publish", "order-42", "approve", "true", "--request-id", "pub-1"}},
		{"flow_set_attrs", []string{"flow", "set-attrs", "order-42", `status="held"`, "priority=3"}},
		{"flow_rpc", []string{"flow", "rpc", "order-42", "status"}},
		{"flow_skip_timer", []string{"flow", "skip-timer", "order-42", "AwaitApproval-1", "--timer-id", "deadline"}},
		{"flow_reset", []string{"flow", "reset", "order-42", "--run-id", "run-1", "--step-type", "Charge", "--reason", "charge bug fixed", "--yes", "--request-id", "reset-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, format := range []string{"json", "table"} {
				r := runCLI(t, append([]string{"--server", addr, "--output", format}, tt.args...)...)
				r.wantCode(t, exitOK)
				if format == "json" {
					decodeJSON(t, r.stdout)
				}
				checkGolden(t, tt.name, format, r.stdout, addr)
			}
		})
	}
}
