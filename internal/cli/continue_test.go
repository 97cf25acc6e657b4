package cli

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/dexzd/dexzd/api/dexpb"
)

// flow continue-as-new sends the exact run and the reason, prints the new
// run, and refuses to run without --run-id or --yes.
//
// Covers: E37
func TestFlowContinueAsNew_Request(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	f.continueAs = func(_ context.Context, r *dexpb.ContinueAsNewRequest) (*dexpb.ContinueAsNewResponse, error) {
		return &dexpb.ContinueAsNewResponse{NewRunId: r.GetRunId() + ".continued-1", Status: dexpb.FlowStatus_FLOW_STATUS_CONTINUED_AS_NEW}, nil
	}
	addr := f.start(t)
	r := runCLI(t, "--server", addr, "flow", "continue-as-new", "sub-7", "--run-id", "run-1", "--reason", "trim", "--yes")
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "run-1.continued-1") || !strings.Contains(r.stdout, "CONTINUED_AS_NEW") {
		t.Errorf("output %q lacks the new run and the status", r.stdout)
	}
	calls := f.callsTo("ContinueAsNew")
	want := &dexpb.ContinueAsNewRequest{FlowId: "sub-7", RunId: "run-1", Reason: "trim"}
	if len(calls) == 1 {
		// A random request ID, printed: a retry with it continues
		// nothing twice.
		id := calls[0].req.(*dexpb.ContinueAsNewRequest).GetRequestId()
		if len(id) != 32 || !strings.Contains(r.stdout, id) {
			t.Errorf("request ID %q (output %q), want a random one, printed", id, r.stdout)
		}
		want.RequestId = id
	}
	if len(calls) != 1 || !proto.Equal(calls[0].req, want) {
		t.Errorf("ContinueAsNew got %v, want %v", calls, want)
	}
	runCLI(t, "--server", addr, "flow", "continue-as-new", "sub-7", "--run-id", "run-1", "--yes", "--request-id", "k1").wantCode(t, exitOK)
	if calls := f.callsTo("ContinueAsNew"); len(calls) != 2 || calls[1].req.(*dexpb.ContinueAsNewRequest).GetRequestId() != "k1" {
		t.Errorf("--request-id k1: sent %v", calls)
	}
	for _, args := range [][]string{
		{"flow", "continue-as-new", "sub-7", "--yes"},
		{"flow", "continue-as-new", "sub-7", "--run-id", "run-1"},
	} {
		runCLI(t, append([]string{"--server", addr}, args...)...).wantCode(t, exitUsage)
	}
	if n := len(f.callsTo("ContinueAsNew")); n != 2 {
		t.Errorf("%d calls, want the usage errors to send none", n)
	}
}
