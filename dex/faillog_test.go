package dex_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
)

// A failed attempt is one WARN line on the worker naming the flow, the step
// execution, the attempt, the error type and message (no stack); a
// non-retryable one (here an input that does not decode) is an ERROR.
//
// Covers: E14
func TestWorker_LogsFailedAttempts(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	ws := newFakeWorkerServer()
	addr := serve(t, ws, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, testFlow)
	sess := ws.session(t)

	bad := task(dexpb.TaskKind(dex.KindExecute), "t1", "Ship", &dexpb.EncodedValue{Encoding: "json", Data: []byte(`"x"`)})
	sess.send(bad)
	if f := sess.result(t).GetTaskFailure(); !f.GetNonRetryable() {
		t.Fatalf("failure = %v", f)
	}
	out := logs.String()
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "attempt failed") {
			line = l
		}
	}
	for _, want := range []string{"level=ERROR", "flow_id=" + bad.GetFlowId(), "step_execution_id=Ship-1", "attempt=1",
		"error_type=dex.DecodeError", "non-retryable"} {
		if !strings.Contains(line, want) {
			t.Errorf("the failed attempt's log line lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(line, "goroutine") {
		t.Errorf("the log line carries a stack: %s", line)
	}

	// An ordinary step error: a WARN, the server retries.
	declined := task(dexpb.TaskKind(dex.KindExecute), "t2", "Charge", jsonValue(t, Order{ID: "declined"}))
	sess.send(declined)
	if f := sess.result(t).GetTaskFailure(); f.GetNonRetryable() || !strings.Contains(f.GetMessage(), "charge declined") {
		t.Fatalf("failure = %v", f)
	}
	if !strings.Contains(logs.String(), `level=WARN msg="attempt failed; the server retries it under the step's retry policy"`) ||
		!strings.Contains(logs.String(), "flow_id="+declined.GetFlowId()) {
		t.Errorf("no WARN for the declined charge:\n%s", logs.String())
	}

	// An RPC handler's error: a WARN, the caller gets it.
	sess.send(&dexpb.Task{Kind: dexpb.TaskKind(dex.KindRPC), TaskToken: []byte("r3"), FlowType: "order", FlowId: "f-rpc", RpcName: "add", Input: jsonValue(t, -1)})
	if f := sess.result(t).GetTaskFailure(); f.GetMessage() != "negative" || f.GetNonRetryable() {
		t.Fatalf("failure = %v", f)
	}
	if !strings.Contains(logs.String(), `level=WARN msg="RPC handler failed; its caller gets the error"`) ||
		!strings.Contains(logs.String(), "flow_id=f-rpc") || !strings.Contains(logs.String(), "error=negative") {
		t.Errorf("no WARN for the ordinary failure:\n%s", logs.String())
	}
}
