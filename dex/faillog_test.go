package dex_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
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

// The failure of a step's last attempt is one ERROR line saying the
// retries are exhausted: the attempt is the task's max_attempts, or the
// retry would start after its retry_deadline (after the task's
// retry_delay, or the failure's retry_after). Earlier failures are WARNs.
//
// Covers: E9, E14
func TestWorker_LogsExhaustedRetriesAsError(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	ws := newFakeWorkerServer()
	addr := serve(t, ws, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, testFlow)
	sess := ws.session(t)

	now := time.Now()
	cases := []struct {
		name      string
		order     string // "declined": an ordinary error; "busy": RetryAfter(3s)
		attempt   uint32
		max       uint32
		deadline  time.Time
		delay     time.Duration
		exhausted bool
	}{
		{name: "attempt 2 of 3", order: "declined", attempt: 2, max: 3},
		{name: "attempt 3 of 3", order: "declined", attempt: 3, max: 3, exhausted: true},
		{name: "unlimited", order: "declined", attempt: 50},
		{name: "retry before the deadline", order: "declined", attempt: 1, deadline: now.Add(time.Hour), delay: time.Second},
		{name: "retry after the deadline", order: "declined", attempt: 1, deadline: now.Add(time.Minute), delay: 2 * time.Minute, exhausted: true},
		{name: "retry-after past the deadline", order: "busy", attempt: 1, deadline: now.Add(time.Second), delay: time.Millisecond, exhausted: true},
		{name: "retry-after before the deadline", order: "busy", attempt: 1, deadline: now.Add(time.Hour), delay: 2 * time.Hour},
	}
	for i, c := range cases {
		tk := task(dexpb.TaskKind(dex.KindExecute), fmt.Sprintf("x%d", i), "Charge", jsonValue(t, Order{ID: c.order}))
		tk.Attempt, tk.MaxAttempts = c.attempt, c.max
		if !c.deadline.IsZero() {
			tk.RetryDeadline, tk.RetryDelay = timestamppb.New(c.deadline), durationpb.New(c.delay)
		}
		sess.send(tk)
		if f := sess.result(t).GetTaskFailure(); f == nil || f.GetNonRetryable() {
			t.Fatalf("%s: failure = %v", c.name, f)
		}
		line := logLine(logs.String(), "flow_id="+tk.GetFlowId()+" ")
		want := `level=WARN msg="attempt failed; the server retries it under the step's retry policy"`
		if c.exhausted {
			want = `level=ERROR msg="attempt failed and the step's retries are exhausted; the step's failure policy applies"`
		}
		if !strings.Contains(line, want) || !strings.Contains(line, fmt.Sprintf("attempt=%d", c.attempt)) ||
			!strings.Contains(line, "step_execution_id=Charge-1") || !strings.Contains(line, "error_type=") {
			t.Errorf("%s: log line %q, want %s", c.name, line, want)
		}
	}
}

// logLine is the one line of out that contains s, or "".
func logLine(out, s string) string {
	for l := range strings.SplitSeq(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
