package dex

import (
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
)

// TestEnums_MatchAPI checks that every SDK enumeration value has the number
// of the API enum value it stands for, so conversions are plain casts.
func TestEnums_MatchAPI(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		sdk, api int32
	}{
		{"StatusRunning", int32(StatusRunning), int32(dexpb.FlowStatus_FLOW_STATUS_RUNNING)},
		{"StatusCompleted", int32(StatusCompleted), int32(dexpb.FlowStatus_FLOW_STATUS_COMPLETED)},
		{"StatusFailed", int32(StatusFailed), int32(dexpb.FlowStatus_FLOW_STATUS_FAILED)},
		{"StatusCanceled", int32(StatusCanceled), int32(dexpb.FlowStatus_FLOW_STATUS_CANCELED)},
		{"StatusTerminated", int32(StatusTerminated), int32(dexpb.FlowStatus_FLOW_STATUS_TERMINATED)},
		{"ErrorStepDecision", int32(ErrorStepDecision), int32(dexpb.FlowErrorType_FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW)},
		{"ErrorStopped", int32(ErrorStopped), int32(dexpb.FlowErrorType_FLOW_ERROR_TYPE_CLIENT_API_FAILING_FLOW)},
		{"ErrorWorker", int32(ErrorWorker), int32(dexpb.FlowErrorType_FLOW_ERROR_TYPE_WORKER_API_FAIL)},
		{"ErrorFlowTimeout", int32(ErrorFlowTimeout), int32(dexpb.FlowErrorType_FLOW_ERROR_TYPE_FLOW_TIMEOUT)},
		{"ErrorInvalidFlowCode", int32(ErrorInvalidFlowCode), int32(dexpb.FlowErrorType_FLOW_ERROR_TYPE_INVALID_USER_FLOW_CODE)},
		{"ErrorInternal", int32(ErrorInternal), int32(dexpb.FlowErrorType_FLOW_ERROR_TYPE_INTERNAL)},
		{"KindWaitFor", int32(KindWaitFor), int32(dexpb.TaskKind_TASK_KIND_WAIT_FOR)},
		{"KindExecute", int32(KindExecute), int32(dexpb.TaskKind_TASK_KIND_EXECUTE)},
		{"KindRPC", int32(KindRPC), int32(dexpb.TaskKind_TASK_KIND_RPC)},
		{"FailureWorkerError", int32(FailureWorkerError), int32(dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_WORKER_ERROR)},
		{"FailureTimeout", int32(FailureTimeout), int32(dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_TIMEOUT)},
		{"FailureNotCompleted", int32(FailureNotCompleted), int32(dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_NOT_COMPLETED)},
		{"FailureInvalidFlowCode", int32(FailureInvalidFlowCode), int32(dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_INVALID_USER_FLOW_CODE)},
		{"FailureHeartbeatTimeout", int32(FailureHeartbeatTimeout), int32(dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_HEARTBEAT_TIMEOUT)},
		{"ReuseDisallow", int32(ReuseDisallow), int32(dexpb.IdReusePolicy_ID_REUSE_POLICY_DISALLOW)},
		{"ReuseAllowIfNotRunning", int32(ReuseAllowIfNotRunning), int32(dexpb.IdReusePolicy_ID_REUSE_POLICY_ALLOW_IF_NOT_RUNNING)},
		{"ReuseAllowIfPreviousFailed", int32(ReuseAllowIfPreviousFailed), int32(dexpb.IdReusePolicy_ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_FAILED)},
		{"ReuseTerminateIfRunning", int32(ReuseTerminateIfRunning), int32(dexpb.IdReusePolicy_ID_REUSE_POLICY_TERMINATE_IF_RUNNING)},
		{"TimeoutFail", int32(TimeoutFail), int32(dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_FAIL)},
		{"TimeoutCancel", int32(TimeoutCancel), int32(dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_CANCEL)},
		{"StopCancel", int32(StopCancel), int32(dexpb.StopType_STOP_TYPE_CANCEL)},
		{"StopTerminate", int32(StopTerminate), int32(dexpb.StopType_STOP_TYPE_TERMINATE)},
		{"StopFail", int32(StopFail), int32(dexpb.StopType_STOP_TYPE_FAIL)},
		{"DurabilitySync", int32(DurabilitySync), int32(dexpb.AttemptDurability_ATTEMPT_DURABILITY_SYNC)},
		{"DurabilityAsync", int32(DurabilityAsync), int32(dexpb.AttemptDurability_ATTEMPT_DURABILITY_ASYNC)},
		{"WaitForFailFlow", int32(WaitForFailFlow), int32(dexpb.WaitForFailurePolicy_WAIT_FOR_FAILURE_POLICY_FAIL_FLOW)},
		{"WaitForProceed", int32(WaitForProceed), int32(dexpb.WaitForFailurePolicy_WAIT_FOR_FAILURE_POLICY_PROCEED)},
		{"ExecuteFailFlow", int32(ExecuteFailFlow), int32(dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_FAIL_FLOW)},
		{"ExecuteProceedToRecovery", int32(ExecuteProceedToRecovery), int32(dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_PROCEED_TO_RECOVERY_STEP)},
	}
	for _, c := range cases {
		if c.sdk != c.api {
			t.Errorf("%s = %d, the API's value is %d", c.name, c.sdk, c.api)
		}
	}
	if got := StatusCompleted.String(); got != "FLOW_STATUS_COMPLETED" {
		t.Errorf("StatusCompleted.String() = %q", got)
	}
}
