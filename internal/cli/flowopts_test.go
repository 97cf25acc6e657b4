package cli

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
)

// flow start's flow-level options (E34): --start-delay, the --retry flags
// and --timeout-handler reach StartFlowRequest; bad combinations are usage
// errors that send nothing.
//
// Covers: E34
func TestFlowStart_FlowLevelOptions(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	addr := f.start(t)
	r := runCLI(t, "flow", "start", "order", "order-42", "--server", addr, "--request-id", "req-1",
		"--start-delay", "1h", "--retry-max-attempts", "3", "--retry-initial", "10s",
		"--timeout-after", "24h", "--timeout-handler", "Escalate", "--timeout-handler-deadline", "5m")
	r.wantCode(t, exitOK)
	calls := f.callsTo("StartFlow")
	if len(calls) != 1 {
		t.Fatalf("StartFlow sent %d times", len(calls))
	}
	three := uint32(3)
	want := &dexpb.StartFlowRequest{FlowType: "order", FlowId: "order-42", RequestId: "req-1",
		StartDelay:        durationpb.New(time.Hour),
		RetryPolicy:       &dexpb.RetryPolicy{MaximumAttempts: &three, InitialInterval: durationpb.New(10 * time.Second)},
		FlowTimeout:       durationpb.New(24 * time.Hour),
		FlowTimeoutPolicy: dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_HANDLER,
		TimeoutHandler:    &dexpb.TimeoutHandler{StepType: "Escalate", Deadline: durationpb.New(5 * time.Minute)},
	}
	if !proto.Equal(calls[0].req, want) {
		t.Errorf("StartFlow got\n%v\nwant\n%v", calls[0].req, want)
	}

	for _, args := range [][]string{
		{"--start-delay", "-1s"},
		{"--retry-max-attempts", "-1"},
		{"--timeout-handler", "Escalate"},
		{"--timeout-handler-deadline", "1m"},
		{"--timeout-after", "1h", "--timeout-policy", "cancel", "--timeout-handler", "Escalate"},
	} {
		r := runCLI(t, append([]string{"--server", addr, "flow", "start", "order", "o1"}, args...)...)
		r.wantCode(t, exitUsage)
		r.wantStderr(t, "usage: dexcli flow start FLOW_TYPE FLOW_ID [flags]")
	}
	if n := len(f.callsTo("StartFlow")); n != 1 {
		t.Errorf("StartFlow sent %d times, want once", n)
	}
}
