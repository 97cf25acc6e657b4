package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
)

// activeNode answers Describe with node-a at epoch 7 and StepDown with a
// takeover by another process at epoch 8.
func activeNode() *fakeServer {
	return &fakeServer{
		describe: func(context.Context, *dexpb.DescribeRequest) (*dexpb.DescribeResponse, error) {
			return &dexpb.DescribeResponse{NodeId: "node-a", NodeEpoch: 7, HolderProcessId: "proc-1"}, nil
		},
		stepDown: func(_ context.Context, r *dexpb.StepDownRequest) (*dexpb.StepDownResponse, error) {
			return &dexpb.StepDownResponse{
				NodeId:                    r.GetExpectedNodeId(),
				ReleasedNodeEpoch:         r.GetExpectedNodeEpoch(),
				LeaseReacquisitionHoldOff: durationpb.New(5 * time.Second),
				LeaseHolderAfterStepDown:  dexpb.LeaseHolderAfterStepDown_LEASE_HOLDER_AFTER_STEP_DOWN_TAKEN_OVER_BY_ANOTHER_PROCESS,
				ActiveNodeEpoch:           proto.Uint64(r.GetExpectedNodeEpoch() + 1),
				ActiveHolderProcessId:     "proc-2",
			}, nil
		},
	}
}

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("output is not one JSON document: %v\n%s", err, s)
	}
	return m
}

// Covers: A10
func TestAdminDescribe_EpochIsADecimalString(t *testing.T) {
	t.Parallel()
	f := &fakeServer{describe: func(context.Context, *dexpb.DescribeRequest) (*dexpb.DescribeResponse, error) {
		return &dexpb.DescribeResponse{NodeId: "node-a", NodeEpoch: 18446744073709551615, HolderProcessId: "proc-1"}, nil
	}}
	addr := f.start(t)

	r := runCLI(t, "--server", addr, "admin", "describe", "--output", "json")
	r.wantCode(t, exitOK)
	m := decodeJSON(t, r.stdout)
	want := map[string]any{"nodeId": "node-a", "nodeEpoch": "18446744073709551615", "holderProcessId": "proc-1"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
	}

	r = runCLI(t, "--server", addr, "admin", "describe")
	r.wantCode(t, exitOK)
	r.wantStdout(t, "Node ID", "node-a", "Node epoch", "18446744073709551615", "Holder process ID", "proc-1")
	if strings.Contains(r.stdout, "e+") {
		t.Errorf("epoch printed in exponent form:\n%s", r.stdout)
	}
}

// Covers: A11
func TestAdminStepDown_FlagRules(t *testing.T) {
	t.Parallel()
	describeFails := func(code codes.Code) func(*fakeServer) {
		return func(f *fakeServer) {
			f.describe = func(context.Context, *dexpb.DescribeRequest) (*dexpb.DescribeResponse, error) {
				return nil, status.Error(code, "step down in progress")
			}
		}
	}
	tests := []struct {
		name         string
		args         []string
		modify       func(*fakeServer)
		wantCode     int
		wantDescribe int
		// wantStepDown is the request StepDown must receive; nil: none.
		wantStepDown *dexpb.StepDownRequest
		wantStderr   []string
	}{{
		name:     "without --yes is a usage error",
		args:     []string{"--expected-node-id", "node-a", "--expected-node-epoch", "7"},
		wantCode: exitUsage, wantStderr: []string{"--yes", "usage: dexcli admin step-down"},
	}, {
		name:     "--expected-node-epoch alone is a usage error",
		args:     []string{"--yes", "--expected-node-epoch", "7"},
		wantCode: exitUsage, wantStderr: []string{"--expected-node-epoch needs --expected-node-id"},
	}, {
		name:     "epoch 0 is a usage error",
		args:     []string{"--yes", "--expected-node-id", "node-a", "--expected-node-epoch", "0"},
		wantCode: exitUsage,
	}, {
		name:     "no expectations: describe first and expect what it returned",
		args:     []string{"--yes"},
		wantCode: exitOK, wantDescribe: 1,
		wantStepDown: &dexpb.StepDownRequest{ExpectedNodeId: "node-a", ExpectedNodeEpoch: 7},
	}, {
		name:     "--expected-node-id alone: describe, then expect the described epoch",
		args:     []string{"--yes", "--expected-node-id", "node-a"},
		wantCode: exitOK, wantDescribe: 1,
		wantStepDown: &dexpb.StepDownRequest{ExpectedNodeId: "node-a", ExpectedNodeEpoch: 7},
	}, {
		name:     "--expected-node-id of another node: refuse, step nothing down",
		args:     []string{"--yes", "--expected-node-id", "node-b"},
		wantCode: exitFailure, wantDescribe: 1,
		wantStderr: []string{`reports node ID "node-a", not "node-b"`, "nothing was stepped down"},
	}, {
		name:     "both expectations: send them as given without describing",
		args:     []string{"--yes", "--expected-node-id", "node-z", "--expected-node-epoch", "42"},
		wantCode: exitOK, wantDescribe: 0,
		wantStepDown: &dexpb.StepDownRequest{ExpectedNodeId: "node-z", ExpectedNodeEpoch: 42},
	}, {
		name:     "first describe fails: step nothing down",
		args:     []string{"--yes"},
		modify:   describeFails(codes.FailedPrecondition),
		wantCode: exitFailure, wantDescribe: 1,
		wantStderr: []string{"FAILED_PRECONDITION", "nothing was stepped down"},
	}, {
		name:     "first describe fails with --expected-node-id: step nothing down",
		args:     []string{"--yes", "--expected-node-id", "node-a"},
		modify:   describeFails(codes.Unavailable),
		wantCode: exitFailure, wantDescribe: 1,
		wantStderr: []string{"UNAVAILABLE", "nothing was stepped down"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := activeNode()
			if tt.modify != nil {
				tt.modify(f)
			}
			addr := f.start(t)
			r := runCLI(t, append([]string{"--server", addr, "admin", "step-down"}, tt.args...)...)
			r.wantCode(t, tt.wantCode)
			r.wantStderr(t, tt.wantStderr...)
			if n := len(f.callsTo("Describe")); n != tt.wantDescribe {
				t.Errorf("Describe called %d times, want %d", n, tt.wantDescribe)
			}
			got := f.callsTo("StepDown")
			switch {
			case tt.wantStepDown == nil && len(got) != 0:
				t.Errorf("StepDown sent %v, want none", got[0].req)
			case tt.wantStepDown != nil && len(got) != 1:
				t.Errorf("StepDown sent %d times, want once", len(got))
			case tt.wantStepDown != nil && !proto.Equal(got[0].req, tt.wantStepDown):
				t.Errorf("StepDown got %v, want %v", got[0].req, tt.wantStepDown)
			}
		})
	}
}

// Covers: A12
func TestAdminStepDown_OutputFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		resp   *dexpb.StepDownResponse
		golden string
	}{{
		name: "taken over by another process",
		resp: &dexpb.StepDownResponse{
			NodeId: "node-a", ReleasedNodeEpoch: 7, LeaseReacquisitionHoldOff: durationpb.New(5 * time.Second),
			LeaseHolderAfterStepDown: dexpb.LeaseHolderAfterStepDown_LEASE_HOLDER_AFTER_STEP_DOWN_TAKEN_OVER_BY_ANOTHER_PROCESS,
			ActiveNodeEpoch:          proto.Uint64(8), ActiveHolderProcessId: "proc-2",
		},
		golden: "admin_step_down_taken_over",
	}, {
		name: "taken back by this process",
		resp: &dexpb.StepDownResponse{
			NodeId: "node-a", ReleasedNodeEpoch: 7, LeaseReacquisitionHoldOff: durationpb.New(1500 * time.Millisecond),
			LeaseHolderAfterStepDown: dexpb.LeaseHolderAfterStepDown_LEASE_HOLDER_AFTER_STEP_DOWN_TAKEN_BACK_BY_THIS_PROCESS,
			ActiveNodeEpoch:          proto.Uint64(9), ActiveHolderProcessId: "proc-1",
		},
		golden: "admin_step_down_taken_back",
	}, {
		name: "unknown holder",
		resp: &dexpb.StepDownResponse{
			NodeId: "node-a", ReleasedNodeEpoch: 7, LeaseReacquisitionHoldOff: durationpb.New(5 * time.Second),
			LeaseHolderAfterStepDown: dexpb.LeaseHolderAfterStepDown_LEASE_HOLDER_AFTER_STEP_DOWN_UNKNOWN,
			LeaseHolderUnknownDetail: "lease read failed: timeout",
		},
		golden: "admin_step_down_unknown",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := activeNode()
			f.stepDown = func(context.Context, *dexpb.StepDownRequest) (*dexpb.StepDownResponse, error) { return tt.resp, nil }
			addr := f.start(t)
			for _, format := range []string{"json", "table"} {
				r := runCLI(t, "--server", addr, "-o", format, "admin", "step-down", "--yes")
				r.wantCode(t, exitOK)
				checkGolden(t, tt.golden, format, r.stdout, addr)
			}
		})
	}
}

// Covers: A12
func TestAdminStepDown_WaitsTwoMinutesUnlessTimeoutIsSet(t *testing.T) {
	t.Parallel()
	f := activeNode()
	addr := f.start(t)
	runCLI(t, "--server", addr, "admin", "step-down", "--yes").wantCode(t, exitOK)
	runCLI(t, "--server", addr, "admin", "step-down", "--yes", "--timeout", "5m").wantCode(t, exitOK)
	calls := f.callsTo("StepDown")
	if len(calls) != 2 {
		t.Fatalf("StepDown sent %d times, want 2", len(calls))
	}
	for i, want := range []time.Duration{2 * time.Minute, 5 * time.Minute} {
		if left := calls[i].timeLeft; left > want || left < want-20*time.Second {
			t.Errorf("call %d had %s left, want about %s", i, left, want)
		}
	}
}

// Covers: A13
func TestAdminStepDown_UnknownOutcome(t *testing.T) {
	t.Parallel()
	for _, code := range []codes.Code{codes.DeadlineExceeded, codes.Canceled, codes.Unavailable} {
		t.Run(codeName(code), func(t *testing.T) {
			t.Parallel()
			f := activeNode()
			f.stepDown = func(context.Context, *dexpb.StepDownRequest) (*dexpb.StepDownResponse, error) {
				return nil, status.Error(code, "lease released, call interrupted")
			}
			addr := f.start(t)
			// A second address that must not be tried: the first one was
			// reached, so the step down may have happened there.
			other := activeNode()
			otherAddr := other.start(t)
			servers := addr + "," + otherAddr
			retry := "dexcli --server " + servers + " admin step-down --yes --expected-node-id node-a --expected-node-epoch 7"

			r := runCLI(t, "--server", servers, "admin", "step-down", "--yes")
			r.wantCode(t, exitFailure)
			r.wantStderr(t, codeName(code), "outcome of the step down is unknown",
				"expectedNodeId     node-a", "expectedNodeEpoch  7", retry, "Never retry with a node epoch")
			if n := len(other.callsTo("StepDown")); n != 0 {
				t.Errorf("StepDown retried on the second address %d times", n)
			}

			r = runCLI(t, "--server", servers, "admin", "step-down", "--yes", "-o", "json")
			r.wantCode(t, exitFailure)
			m := decodeJSON(t, r.stdout)
			for k, v := range map[string]any{"outcome": "unknown", "expectedNodeId": "node-a", "expectedNodeEpoch": "7", "retryCommand": retry} {
				if m[k] != v {
					t.Errorf("%s = %#v, want %#v", k, m[k], v)
				}
			}
			if e, _ := m["error"].(map[string]any); e["code"] != codeName(code) {
				t.Errorf("error = %v, want code %s", m["error"], codeName(code))
			}
		})
	}
}

// Covers: A13
func TestAdminStepDown_ClientDeadlineIsAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	f := activeNode()
	f.stepDown = func(ctx context.Context, _ *dexpb.StepDownRequest) (*dexpb.StepDownResponse, error) {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	addr := f.start(t)
	dir := t.TempDir()
	cred := filepath.Join(dir, "token")
	if err := os.WriteFile(cred, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "--server", addr, "admin", "step-down", "--yes", "--expected-node-id", "node-a",
		"--expected-node-epoch", "12", "--timeout", "300ms", "--credential-file", cred)
	r.wantCode(t, exitFailure)
	r.wantStderr(t, "DEADLINE_EXCEEDED", "unknown",
		"dexcli --server "+addr+" admin step-down --yes --expected-node-id node-a --expected-node-epoch 12 --credential-file "+cred+" --timeout 300ms")
}

func TestAdminStepDown_MovesOnFromUnreachableAndRefusingAddresses(t *testing.T) {
	t.Parallel()
	standby := activeNode()
	standby.stepDown = func(context.Context, *dexpb.StepDownRequest) (*dexpb.StepDownResponse, error) {
		return nil, status.Error(codes.FailedPrecondition, "not active")
	}
	standbyAddr := standby.start(t)
	active := activeNode()
	activeAddr := active.start(t)

	r := runCLI(t, "--server", closedAddr(t)+","+standbyAddr+","+activeAddr, "admin", "step-down", "--yes",
		"--expected-node-id", "node-a", "--expected-node-epoch", "7", "-o", "json")
	r.wantCode(t, exitOK)
	if len(standby.callsTo("StepDown")) != 1 || len(active.callsTo("StepDown")) != 1 {
		t.Errorf("StepDown calls: standby %d, active %d; want 1 each", len(standby.callsTo("StepDown")), len(active.callsTo("StepDown")))
	}
	if m := decodeJSON(t, r.stdout); m["leaseHolderAfterStepDown"] != "takenOverByAnotherProcess" {
		t.Errorf("output %v", m)
	}

	// When every address refuses or cannot be reached, the refusal is the
	// answer: nothing changed.
	r = runCLI(t, "--server", standbyAddr+","+closedAddr(t), "admin", "step-down", "--yes", "--expected-node-id", "node-a", "--expected-node-epoch", "7")
	r.wantCode(t, exitFailure)
	r.wantStderr(t, "FAILED_PRECONDITION", "nothing changed")
	if strings.Contains(r.stderr, "unknown") {
		t.Errorf("a refusal reported as an unknown outcome:\n%s", r.stderr)
	}
}

// Covers: A14
func TestAdmin_ServerAndCredentialFile(t *testing.T) {
	t.Parallel()
	f := activeNode()
	f.getSummary = func(context.Context, *dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error) {
		return &dexpb.GetFlowSummaryResponse{Summary: &dexpb.FlowSummary{FlowId: "f"}}, nil
	}
	addr := f.start(t)
	cred := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(cred, []byte("  s3cret-token \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, "--server", addr, "admin", "describe", "--credential-file", cred).wantCode(t, exitOK)
	runCLI(t, "admin", "step-down", "--credential-file", cred, "--yes", "--server", addr).wantCode(t, exitOK)
	runCLI(t, "flow", "describe", "f", "--server="+addr, "--credential-file="+cred).wantCode(t, exitOK)
	for _, m := range []string{"Describe", "StepDown", "GetFlowSummary"} {
		calls := f.callsTo(m)
		if len(calls) == 0 {
			t.Fatalf("no %s call", m)
		}
		for _, c := range calls {
			if len(c.auth) != 1 || c.auth[0] != "Bearer s3cret-token" {
				t.Errorf("%s authorization = %q, want [\"Bearer s3cret-token\"]", m, c.auth)
			}
		}
	}

	// Without the flag no authorization is sent.
	runCLI(t, "--server", addr, "admin", "describe").wantCode(t, exitOK)
	if calls := f.callsTo("Describe"); len(calls[len(calls)-1].auth) != 0 {
		t.Errorf("authorization sent without --credential-file: %q", calls[len(calls)-1].auth)
	}

	// A missing or empty credential file is a usage error; nothing is sent.
	before := len(f.callsTo("Describe"))
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, "--server", addr, "admin", "describe", "--credential-file", filepath.Join(t.TempDir(), "missing")).wantCode(t, exitUsage)
	runCLI(t, "--server", addr, "admin", "describe", "--credential-file", empty).wantCode(t, exitUsage)
	if after := len(f.callsTo("Describe")); after != before {
		t.Errorf("Describe sent with a bad credential file")
	}
}

// Covers: A14
func TestAdmin_CredentialErrorsHaveHints(t *testing.T) {
	t.Parallel()
	f := &fakeServer{describe: func(context.Context, *dexpb.DescribeRequest) (*dexpb.DescribeResponse, error) {
		return nil, status.Error(codes.Unauthenticated, "admin credential required")
	}}
	addr := f.start(t)
	r := runCLI(t, "--server", addr, "admin", "describe")
	r.wantCode(t, exitFailure)
	r.wantStderr(t, "UNAUTHENTICATED", "--credential-file")
}
