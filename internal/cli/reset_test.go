package cli

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/dexzd/dexzd/api/dexpb"
)

// flow reset refuses to run without --yes, an exact run ID, a reason and
// exactly one point, and sends nothing then; given them, it sends the
// point as the flags name it.
//
// Covers: E37
func TestFlowReset_ConfirmsAndNamesOnePoint(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	addr := f.start(t)
	base := []string{"--server", addr, "flow", "reset", "order-42"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--run-id", "run-1", "--beginning", "--reason", "r"}, "confirm with --yes"},
		{[]string{"--beginning", "--reason", "r", "--yes"}, "--run-id is required"},
		{[]string{"--run-id", "run-1", "--reason", "r", "--yes"}, "give exactly one point"},
		{[]string{"--run-id", "run-1", "--beginning", "--step-type", "Charge", "--reason", "r", "--yes"}, "give exactly one point"},
		{[]string{"--run-id", "run-1", "--step-type", "Charge", "--before-execute", "--reason", "r", "--yes"}, "--before-execute needs --step-execution"},
		{[]string{"--run-id", "run-1", "--beginning", "--yes"}, "--reason is required"},
		{[]string{"--run-id", "run-1", "--time", "yesterday", "--reason", "r", "--yes"}, "not an RFC 3339 time"},
	} {
		r := runCLI(t, append(base, tt.args...)...)
		r.wantCode(t, exitUsage)
		r.wantStderr(t, tt.want)
	}
	if calls := f.callsTo("ResetFlow"); len(calls) != 0 {
		t.Fatalf("refused resets sent %d calls", len(calls))
	}

	at := time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	runCLI(t, append(base, "--run-id", "run-1", "--time", at.Format(time.RFC3339), "--skip-reapply", "--reason", "outage", "--yes")...).wantCode(t, exitOK)
	runCLI(t, append(base, "--run-id", "run-1", "--step-execution", "Charge-2", "--before-execute", "--reason", "skip", "--yes",
		"--request-id", "retry-7")...).wantCode(t, exitOK)
	want := []*dexpb.ResetFlowRequest{
		{FlowId: "order-42", RunId: "run-1", SkipReapply: true, Reason: "outage",
			Point: &dexpb.ResetPoint{Point: &dexpb.ResetPoint_EventTime{EventTime: timestamppb.New(at)}}},
		{FlowId: "order-42", RunId: "run-1", Reason: "skip", Point: &dexpb.ResetPoint{Point: &dexpb.ResetPoint_StepExecution{
			StepExecution: &dexpb.StepExecutionPoint{StepExecutionId: "Charge-2", BeforeExecute: true}}}, RequestId: "retry-7"},
	}
	calls := f.callsTo("ResetFlow")
	if len(calls) != len(want) {
		t.Fatalf("%d ResetFlow calls, want %d", len(calls), len(want))
	}
	// Without --request-id a random one is sent (E37: a retry with it
	// resets nothing twice).
	if first := calls[0].req.(*dexpb.ResetFlowRequest); len(first.GetRequestId()) != 32 {
		t.Errorf("request ID %q, want a random one", first.GetRequestId())
	} else {
		want[0].RequestId = first.GetRequestId()
	}
	for i, c := range calls {
		if !proto.Equal(c.req, want[i]) {
			t.Errorf("call %d: %v, want %v", i, c.req, want[i])
		}
	}
}
