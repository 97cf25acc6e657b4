package cli

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
)

func TestUsageErrors_ExitTwoWithAUsageLine(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	addr := f.start(t)
	tests := []struct {
		args       []string
		wantStderr []string
	}{
		{nil, []string{"missing command", "usage: dexcli <group>"}},
		{[]string{"bogus"}, []string{`unknown command "bogus"`, `Run "dexcli help"`}},
		{[]string{"flow"}, []string{`missing command for "flow"`, "usage: dexcli flow <command>"}},
		{[]string{"flow", "explode"}, []string{`unknown command "flow explode"`}},
		{[]string{"flow", "lsit"}, []string{`unknown command "flow lsit"; did you mean "flow list"?`}},
		{[]string{"flwo", "list"}, []string{`unknown command "flwo"; did you mean "flow"?`}},
		{[]string{"admin", "step"}, []string{`did you mean "admin step-down"?`}},
		{[]string{"flow", "list", "--since", "2d"}, []string{`--since "2d": not a duration`, "72h for three days"}},
		{[]string{"flow", "describe"}, []string{"missing argument", "usage: dexcli flow describe FLOW_ID [flags]"}},
		{[]string{"flow", "describe", "a", "b"}, []string{`unexpected argument "b"`}},
		{[]string{"flow", "describe", "a", "--bogus"}, []string{"unknown flag: --bogus"}},
		{[]string{"flow", "describe", "a", "--output", "yaml"}, []string{"--output must be table or json"}},
		{[]string{"flow", "describe", "a", "--timeout", "soon"}, []string{`--timeout "soon": not a duration`}},
		{[]string{"admin", "describe", "--yes"}, []string{"unknown flag: --yes"}},
		{[]string{"help", "flow", "start", "extra"}, []string{"help takes a group and a command"}},
	}
	for _, tt := range tests {
		r := runCLI(t, append(tt.args, "--server", addr)...)
		if r.code != exitUsage {
			t.Errorf("%q: exit %d, want 2; stderr:\n%s", tt.args, r.code, r.stderr)
		}
		r.wantStderr(t, tt.wantStderr...)
		if r.stdout != "" {
			t.Errorf("%q: usage error printed to stdout: %q", tt.args, r.stdout)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) != 0 {
		t.Errorf("a usage error sent %d calls", len(f.calls))
	}
}

func TestHelp_ExitZeroWithExamples(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"help"}, {"--help"}, {"-h"},
		{"flow", "--help"}, {"help", "flow"}, {"admin", "-h"},
		{"flow", "start", "--help"}, {"help", "admin", "step-down"}, {"admin", "step-down", "-h", "--yes"},
	} {
		r := runCLI(t, args...)
		r.wantCode(t, exitOK)
		r.wantStdout(t, "Usage:", "Examples:", "--server")
	}
	r := runCLI(t, "flow", "start", "--help")
	r.wantStdout(t, "--input JSON", "--id-reuse POLICY", "--request-id ID", "dexcli flow start order order-42")
	r = runCLI(t, "admin", "--help")
	r.wantStdout(t, "step-down", "describe")
}

func TestFlags_AnywhereOnTheLine(t *testing.T) {
	t.Parallel()
	f := activeNode()
	addr := f.start(t)
	for _, args := range [][]string{
		{"--server", addr, "-o", "json", "admin", "describe"},
		{"admin", "--output", "json", "describe", "--server", addr},
		{"admin", "describe", "--server=" + addr, "-o=json"},
		{"-output=json", "admin", "describe", "-server", addr},
	} {
		r := runCLI(t, args...)
		r.wantCode(t, exitOK)
		if m := decodeJSON(t, r.stdout); m["nodeEpoch"] != "7" {
			t.Errorf("%q: output %v", args, m)
		}
	}
	// Command flags before the command words, with "--" ending the flags.
	g := fixtureServer()
	gaddr := g.start(t)
	runCLI(t, "--run", "run-9", "flow", "describe", "--server", gaddr, "--", "-odd-id").wantCode(t, exitOK)
	req := g.callsTo("GetFlowSummary")[0].req.(*dexpb.GetFlowSummaryRequest)
	if req.GetFlowId() != "-odd-id" || req.GetRunId() != "run-9" {
		t.Errorf("GetFlowSummary got %v", req)
	}
}

func TestServer_FromEnvironmentAndListFailover(t *testing.T) {
	t.Parallel()
	standby := &fakeServer{describe: func(context.Context, *dexpb.DescribeRequest) (*dexpb.DescribeResponse, error) {
		return nil, status.Error(codes.Unavailable, "standby")
	}}
	active := activeNode()
	list := closedAddr(t) + ", " + standby.start(t) + "," + active.start(t)
	r := runCLIEnv(t, map[string]string{serverEnv: list}, "admin", "describe")
	r.wantCode(t, exitOK)
	r.wantStdout(t, "node-a")
	if len(standby.callsTo("Describe")) != 1 || len(active.callsTo("Describe")) != 1 {
		t.Errorf("Describe calls: standby %d, active %d", len(standby.callsTo("Describe")), len(active.callsTo("Describe")))
	}
	// --server wins over the environment.
	r = runCLIEnv(t, map[string]string{serverEnv: closedAddr(t)}, "admin", "describe", "--server", active.start(t))
	r.wantCode(t, exitOK)
}

func TestFailedRequests_ExitOneWithCodeAndHint(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	f.getSummary = func(_ context.Context, r *dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error) {
		if r.GetFlowId() == "order-42" {
			return &dexpb.GetFlowSummaryResponse{Summary: &dexpb.FlowSummary{
				FlowId: "order-42", Status: dexpb.FlowStatus_FLOW_STATUS_COMPLETED, CloseTime: ts(0),
			}}, nil
		}
		return nil, status.Error(codes.NotFound, "flow not found")
	}
	f.publish = func(context.Context, *dexpb.PublishToChannelRequest) (*dexpb.PublishToChannelResponse, error) {
		return nil, status.Error(codes.FailedPrecondition, "flow is closed")
	}
	f.startFlow = func(context.Context, *dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
		return nil, status.Error(codes.AlreadyExists, "flow has a running run")
	}
	addr := f.start(t)

	r := runCLI(t, "--server", addr, "flow", "describe", "order-7")
	r.wantCode(t, exitFailure)
	r.wantStderr(t, "flow describe: NOT_FOUND: flow not found", `flow "order-7" not found; list flows with "dexcli flow list"`)

	r = runCLI(t, "--server", addr, "flow", "publish", "order-42", "approve", "true")
	r.wantCode(t, exitFailure)
	r.wantStderr(t, "FAILED_PRECONDITION",
		`flow "order-42" is not running (COMPLETED at 2025-01-02T03:04:05.123Z); use "dexcli flow describe order-42"`)

	r = runCLI(t, "--server", addr, "flow", "start", "order", "order-42", "-o", "json")
	r.wantCode(t, exitFailure)
	r.wantStderr(t, "ALREADY_EXISTS", "--id-reuse")
	e, _ := decodeJSON(t, r.stdout)["error"].(map[string]any)
	if e["code"] != "ALREADY_EXISTS" || e["message"] != "flow has a running run" || !strings.Contains(e["hint"].(string), "--id-reuse") {
		t.Errorf("JSON error document %v", e)
	}

	r = runCLI(t, "--server", closedAddr(t), "flow", "describe", "order-42")
	r.wantCode(t, exitFailure)
	r.wantStderr(t, "UNAVAILABLE", "check --server")
}

func TestInterrupt_ExitsWith130(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	entered := make(chan struct{})
	var once sync.Once
	f.waitForFlow = func(ctx context.Context, _ *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
		once.Do(func() { close(entered) })
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	addr := f.start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
		}
		cancel()
	}()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"--server", addr, "flow", "wait", "order-42", "--run", "run-1"}, &out, &errb, func(string) string { return "" })
	if code != exitInterrupted {
		t.Fatalf("exit %d, want 130; stderr:\n%s", code, errb.String())
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"node-a":           "node-a",
		"127.0.0.1:8801":   "127.0.0.1:8801",
		"":                 "''",
		"a b":              "'a b'",
		"it's":             `'it'\''s'`,
		"/run/secrets/tok": "/run/secrets/tok",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// An address that is not HOST:PORT, in --server or DEX_SERVER, is a usage
// error (exit 2) naming the address, not an unreachable server.
func TestServer_NotHostPortIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"localhost", "http://127.0.0.1:8801", "127.0.0.1:8801,dns:///x:1", ":8801", "127.0.0.1:0", "127.0.0.1:http", "[::1"} {
		r := runCLI(t, "flow", "describe", "a", "--server", bad)
		if r.code != exitUsage {
			t.Errorf("--server %q: exit %d, want 2; stderr:\n%s", bad, r.code, r.stderr)
		}
		r.wantStderr(t, "HOST:PORT expected")
	}
	r := runCLIEnv(t, map[string]string{serverEnv: "https://dex.example:8801"}, "flow", "describe", "a")
	r.wantCode(t, exitUsage)
	r.wantStderr(t, `"https://dex.example:8801"`, "without a scheme")
}
