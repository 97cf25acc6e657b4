package dex_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dexraw"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// runWorker runs a worker until the test ends; stop cancels Run's context
// and returns Run's error.
func runWorker(t *testing.T, opts dex.WorkerOptions, flows ...*dex.Flow) (w *dex.Worker, stop func() error) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	if opts.ReconnectBackoff.Initial == 0 {
		opts.ReconnectBackoff = dex.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	}
	w, err := dex.NewWorker(opts, flows...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var stopped bool
	var runErr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("Run did not return within 20s")
			}
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return w, stop
}

func jsonValue(t *testing.T, v any) *dexpb.EncodedValue {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &dexpb.EncodedValue{Encoding: "json", Type: "test", Data: data}
}

func decodeJSON[T any](t *testing.T, ev *dexpb.EncodedValue) T {
	t.Helper()
	var v T
	if ev.GetEncoding() != "json" {
		t.Fatalf("encoding %q, want json", ev.GetEncoding())
	}
	if err := json.Unmarshal(ev.GetData(), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

var flowSeq atomic.Int64

// task builds a task of a fresh flow ID, so gates never repeat.
func task(kind dexpb.TaskKind, token, step string, in *dexpb.EncodedValue) *dexpb.Task {
	return &dexpb.Task{
		Kind: kind, TaskToken: []byte(token), FlowType: "order", FlowId: fmt.Sprintf("f-%s-%d", token, flowSeq.Add(1)), RunId: "r1",
		StepType: step, StepExecutionId: step + "-1", Attempt: 1, Input: in,
		AttemptTimeout: durationpb.New(10 * time.Second),
	}
}

// Covers: W1, E13
func TestWorker_HelloDeclaresFlows(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	addr := serve(t, ws, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}, WorkerID: "w-1", MaxConcurrentTasks: 4}, testFlow)
	h := ws.session(t).hello

	if h.GetWorkerId() != "w-1" || h.GetMaxConcurrentTasks() != 4 || !strings.HasPrefix(h.GetSdkVersion(), "dex-go/") {
		t.Errorf("hello = %v", h)
	}
	if len(h.GetFlowTypes()) != 1 {
		t.Fatalf("flow types = %d, want 1", len(h.GetFlowTypes()))
	}
	ft := h.GetFlowTypes()[0]
	if ft.GetFlowType() != "order" {
		t.Errorf("flow type = %q", ft.GetFlowType())
	}
	var steps []string
	waits := map[string]bool{}
	opts := map[string]*dexpb.StepOptions{}
	for _, s := range ft.GetSteps() {
		steps = append(steps, s.GetStepType())
		waits[s.GetStepType()] = s.GetHasWaitFor()
		opts[s.GetStepType()] = s.GetOptions()
	}
	if got := strings.Join(steps, ","); got != "Reserve,Await,Charge,Refund,Ship" {
		t.Errorf("steps = %s", got)
	}
	if !waits["Await"] || waits["Reserve"] || waits["Charge"] {
		t.Errorf("has_wait_for = %v", waits)
	}
	if got := strings.Join(ft.GetRpcNames(), ","); got != "status,add" {
		t.Errorf("rpc names = %s", got)
	}
	if got := strings.Join(ft.GetAttributeNames(), ","); got != "status,counter" {
		t.Errorf("attribute names = %s", got)
	}
	if got := strings.Join(ft.GetChannelNames(), ","); got != "approve,notes" {
		t.Errorf("channel names = %s", got)
	}
	if d := ft.GetDefaultStepOptions().GetWaitFor().GetAttemptTimeout().AsDuration(); d != 2*time.Second {
		t.Errorf("default WaitFor timeout = %s", d)
	}
	if opts["Reserve"] != nil {
		t.Errorf("Reserve options = %v, want unset", opts["Reserve"])
	}
	if got := opts["Await"].GetWaitForFailurePolicy(); got != dexpb.WaitForFailurePolicy_WAIT_FOR_FAILURE_POLICY_PROCEED {
		t.Errorf("Await WaitFor failure policy = %s", got)
	}
	c := opts["Charge"]
	if c.GetExecuteFailurePolicy() != dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_PROCEED_TO_RECOVERY_STEP ||
		c.GetExecuteRecoveryStepType() != "Refund" {
		t.Errorf("Charge failure policy = %s / %q", c.GetExecuteFailurePolicy(), c.GetExecuteRecoveryStepType())
	}
	rp := c.GetExecute().GetRetryPolicy()
	if rp.GetInitialInterval().AsDuration() != time.Second || rp.GetBackoffCoefficient() != 1.5 ||
		rp.GetMaximumAttempts() != 3 || rp.MaximumInterval != nil || rp.MaximumTotalDuration != nil {
		t.Errorf("Charge retry policy = %v", rp)
	}
	if c.GetExecute().GetDurability() != dexpb.AttemptDurability_ATTEMPT_DURABILITY_ASYNC ||
		c.GetExecute().GetAttemptTimeout().AsDuration() != 10*time.Second || c.GetWaitFor() != nil {
		t.Errorf("Charge execute options = %v", c)
	}
}

// Covers: E4, E6, E15, E16, E17, E18, W1
func TestWorker_WaitForAndExecuteRoundTrip(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	addr := serve(t, ws, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}}, testFlow)
	sess := ws.session(t)

	// WaitFor: a Wait with IDs, plus a staged attribute write.
	sess.send(task(dexpb.TaskKind(dex.KindWaitFor), "t1", "Await", jsonValue(t, Order{ID: "42", Cents: 1200})))
	res := sess.result(t).GetTaskResult()
	if string(res.GetTaskToken()) != "t1" {
		t.Fatalf("token = %q", res.GetTaskToken())
	}
	w := res.GetWaitFor().GetWait()
	conds := w.GetAnyOf().GetConditions()
	if len(conds) != 3 {
		t.Fatalf("wait = %v, want AnyOf of 3", w)
	}
	if c := conds[0]; c.GetId() != "approval" || c.GetChannel().GetChannel() != "approve" ||
		c.GetChannel().GetBound() != dexpb.ChannelBound_CHANNEL_BOUND_FOR_ONE {
		t.Errorf("condition 0 = %v", c)
	}
	if c := conds[1].GetChannel(); c.GetBound() != dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST_AT_MOST || c.GetMin() != 1 || c.GetMax() != 3 {
		t.Errorf("condition 1 = %v", c)
	}
	if c := conds[2]; c.GetId() != "deadline" || c.GetTimer().GetDuration().AsDuration() != time.Hour {
		t.Errorf("condition 2 = %v", c)
	}
	if aw := res.GetWrites().GetAttributeWrites(); len(aw) != 1 || aw[0].GetName() != "status" ||
		decodeJSON[string](t, aw[0].GetValue()) != "awaiting" || aw[0].GetValue().GetType() != "string" {
		t.Errorf("writes = %v", res.GetWrites())
	}

	// Execute: the approval won; the notes condition consumed nothing.
	ex := task(dexpb.TaskKind(dex.KindExecute), "t2", "Await", jsonValue(t, Order{ID: "42", Cents: 1200}))
	ex.ConditionResults = &dexpb.ConditionResults{
		Timers: []*dexpb.TimerResult{{TimerIndex: 0, ConditionId: "deadline"}},
		Channels: []*dexpb.ChannelResult{
			{ChannelConditionIndex: 0, ConditionId: "approval", Channel: "approve", Satisfied: true, Messages: []*dexpb.EncodedValue{jsonValue(t, true)}},
			{ChannelConditionIndex: 1, Channel: "notes"},
		},
	}
	sess.send(ex)
	res = sess.result(t).GetTaskResult()
	ms := res.GetExecute().GetDecision().GetMovements().GetMovements()
	if len(ms) != 2 || ms[0].GetStepType() != "Charge" || ms[1].GetStepType() != "Ship" {
		t.Fatalf("decision = %v, want movements to Charge and Ship", res.GetExecute().GetDecision())
	}
	if o := decodeJSON[Order](t, ms[0].GetInput()); o != (Order{ID: "42", Cents: 1200}) || ms[0].GetInput().GetType() != "dex_test.Order" {
		t.Errorf("movement input = %v (%s)", o, ms[0].GetInput().GetType())
	}
	if !ms[1].GetSkipWaitFor() || ms[1].GetOptions().GetExecute().GetAttemptTimeout().AsDuration() != 5*time.Second || ms[0].GetOptions() != nil {
		t.Errorf("movement options = %v / %v", ms[0], ms[1])
	}

	// Execute: the timer fired.
	ex = task(dexpb.TaskKind(dex.KindExecute), "t3", "Await", jsonValue(t, Order{ID: "43"}))
	ex.ConditionResults = &dexpb.ConditionResults{Timers: []*dexpb.TimerResult{{TimerIndex: 0, ConditionId: "deadline", Fired: true}}}
	sess.send(ex)
	res = sess.result(t).GetTaskResult()
	if r := res.GetExecute().GetDecision().GetForceFail().GetReason(); r != "not approved in time" {
		t.Errorf("decision = %v, want ForceFail", res.GetExecute().GetDecision())
	}

	// Reserve: staged attribute write and channel publish commit with the
	// movement.
	sess.send(task(dexpb.TaskKind(dex.KindExecute), "t4", "Reserve", jsonValue(t, Order{ID: "44"})))
	res = sess.result(t).GetTaskResult()
	if m := res.GetExecute().GetDecision().GetMovements().GetMovements(); len(m) != 1 || m[0].GetStepType() != "Await" {
		t.Errorf("decision = %v", res.GetExecute().GetDecision())
	}
	pubs := res.GetWrites().GetChannelPublishes()
	if len(pubs) != 1 || pubs[0].GetChannel() != "notes" || decodeJSON[string](t, pubs[0].GetValues()[0]) != "reserved 44" {
		t.Errorf("publishes = %v", pubs)
	}
}

// Covers: E11
func TestWorker_ExecuteLearnsWaitForFailure(t *testing.T) {
	t.Parallel()
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"unused:1"}, Logger: quietLogger()}, testFlow)
	if err != nil {
		t.Fatal(err)
	}
	ex := task(dexpb.TaskKind(dex.KindExecute), "t1", "Await", jsonValue(t, Order{ID: "1"}))
	ex.WaitForFailed = true
	ex.WaitForFailure = &dexpb.AttemptFailure{
		Method: dexpb.TaskKind(dex.KindWaitFor), Attempt: 3, Kind: dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_WORKER_ERROR,
		ErrorType: "*net.OpError", Message: "connection refused",
	}
	res := dexraw.HandleTask(context.Background(), w, ex).GetTaskResult()
	reason := res.GetExecute().GetDecision().GetForceFail().GetReason()
	if !strings.Contains(reason, "wait failed: attempt 3") || !strings.Contains(reason, "connection refused") {
		t.Errorf("reason = %q", reason)
	}

	// A nil Wait is the empty Wait, satisfied at once.
	res = dexraw.HandleTask(context.Background(), w, task(dexpb.TaskKind(dex.KindWaitFor), "t2", "Await", jsonValue(t, Order{ID: "no-wait"}))).GetTaskResult()
	if wt := res.GetWaitFor().GetWait(); wt == nil || wt.GetKind() != nil {
		t.Errorf("wait = %v, want empty", wt)
	}
}

// Covers: E21, E22
func TestWorker_RPCRoundTrip(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	addr := serve(t, ws, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}}, testFlow)
	sess := ws.session(t)

	rpc := &dexpb.Task{
		Kind: dexpb.TaskKind(dex.KindRPC), TaskToken: []byte("r1"), FlowType: "order", FlowId: "f", RunId: "r", Attempt: 1,
		RpcName: "add", Input: jsonValue(t, 7),
		Attributes:        []*dexpb.Attribute{{Name: "counter", Value: jsonValue(t, 5)}},
		ChannelQueueSizes: map[string]uint32{"notes": 2},
	}
	sess.send(rpc)
	res := sess.result(t).GetTaskResult()
	if out := decodeJSON[int](t, res.GetRpc().GetOutput()); out != 14 {
		t.Errorf("output = %d, want 5+7+2 queued", out)
	}
	if aw := res.GetWrites().GetAttributeWrites(); len(aw) != 1 || decodeJSON[int](t, aw[0].GetValue()) != 12 {
		t.Errorf("writes = %v", res.GetWrites())
	}
	if ms := res.GetRpc().GetMovements(); len(ms) != 1 || ms[0].GetStepType() != "Ship" {
		t.Errorf("movements = %v", ms)
	}

	// status reads the attribute handed out with the task.
	sess.send(&dexpb.Task{Kind: dexpb.TaskKind(dex.KindRPC), TaskToken: []byte("r2"), FlowType: "order", RpcName: "status",
		Attributes: []*dexpb.Attribute{{Name: "status", Value: jsonValue(t, "charged")}}})
	if out := decodeJSON[string](t, sess.result(t).GetTaskResult().GetRpc().GetOutput()); out != "charged" {
		t.Errorf("status = %q", out)
	}

	// An RPC error is a TaskFailure.
	sess.send(&dexpb.Task{Kind: dexpb.TaskKind(dex.KindRPC), TaskToken: []byte("r3"), FlowType: "order", RpcName: "add", Input: jsonValue(t, -1)})
	if f := sess.result(t).GetTaskFailure(); f.GetMessage() != "negative" {
		t.Errorf("failure = %v", f)
	}
}

// Covers: E5
func TestWorker_DecisionsEncode(t *testing.T) {
	t.Parallel()
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"unused:1"}, Logger: quietLogger()}, testFlow)
	if err != nil {
		t.Fatal(err)
	}
	run := func(step string, o Order) *dexpb.PollWorkerTaskRequest {
		return dexraw.HandleTask(context.Background(), w, task(dexpb.TaskKind(dex.KindExecute), "t", step, jsonValue(t, o)))
	}
	if d := run("Ship", Order{ID: "1", Cents: 5}).GetTaskResult().GetExecute().GetDecision(); d.GetGracefulComplete() == nil ||
		decodeJSON[Receipt](t, d.GetGracefulComplete().GetOutput()) != (Receipt{OrderID: "1", Cents: 5}) ||
		d.GetGracefulComplete().GetOutput().GetType() != "dex_test.Receipt" {
		t.Errorf("graceful = %v", d)
	}
	if d := run("Ship", Order{ID: "force"}).GetTaskResult().GetExecute().GetDecision(); d.GetForceComplete() == nil {
		t.Errorf("force complete = %v", d)
	}
	if d := run("Refund", Order{ID: "2"}).GetTaskResult().GetExecute().GetDecision(); decodeJSON[string](t, d.GetGracefulComplete().GetOutput()) != "refunded 2" {
		t.Errorf("refund = %v", d)
	}
	if d := run("Await", Order{ID: "3"}).GetTaskResult().GetExecute().GetDecision(); d.GetDeadEnd() == nil {
		t.Errorf("dead end = %v", d)
	}
	// A movement outside the step's MovesTo fails the attempt locally, for
	// good: no retry can change the code's answer (non-retryable).
	f := run("Charge", Order{ID: "undeclared"}).GetTaskFailure()
	if f.GetErrorType() != "dex.InvalidResult" || !strings.Contains(f.GetMessage(), `step "Charge" moves to "Refund"`) || !f.GetNonRetryable() {
		t.Errorf("failure = %v", f)
	}
	// An unknown step type is refused without running anything.
	f = run("Nope", Order{}).GetTaskFailure()
	if f.GetErrorType() != "dex.InvalidResult" || !strings.Contains(f.GetMessage(), `no step "Nope"`) || !f.GetNonRetryable() {
		t.Errorf("failure = %v", f)
	}
	// An input that does not decode is a DecodeError, non-retryable too.
	f = dexraw.HandleTask(context.Background(), w, task(dexpb.TaskKind(dex.KindExecute), "t", "Ship", &dexpb.EncodedValue{Encoding: "json", Data: []byte(`"x"`)})).GetTaskFailure()
	if f.GetErrorType() != "dex.DecodeError" || !f.GetNonRetryable() {
		t.Errorf("failure = %v", f)
	}
}

// Covers: E9, E10, E14
func TestWorker_ReportsErrorsWithTypeStackAndRetryAfter(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	addr := serve(t, ws, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}}, testFlow)
	sess := ws.session(t)

	sess.send(task(dexpb.TaskKind(dex.KindExecute), "declined", "Charge", jsonValue(t, Order{ID: "declined"})))
	f := sess.result(t).GetTaskFailure()
	if f.GetErrorType() != "*dex_test.chargeError" || f.GetMessage() != "charge declined: card declined: 51" || f.GetRetryAfter() != nil {
		t.Errorf("failure = %v", f)
	}
	if !strings.HasPrefix(f.GetStack(), "github.com/dexzd/dexzd/dex_test.Charge.Execute(") || strings.Contains(f.GetStack(), "dex.invoke") {
		t.Errorf("stack = %q", f.GetStack())
	}

	sess.send(task(dexpb.TaskKind(dex.KindExecute), "busy", "Charge", jsonValue(t, Order{ID: "busy"})))
	f = sess.result(t).GetTaskFailure()
	if f.GetRetryAfter().AsDuration() != 3*time.Second || f.GetErrorType() != "*errors.errorString" || f.GetMessage() != "gateway busy for busy" {
		t.Errorf("failure = %v", f)
	}
	if !strings.Contains(f.GetStack(), "dex_test.chargeBusy") {
		t.Errorf("stack does not show where RetryAfter was called: %q", f.GetStack())
	}

	sess.send(task(dexpb.TaskKind(dex.KindExecute), "panic", "Charge", jsonValue(t, Order{ID: "panic"})))
	f = sess.result(t).GetTaskFailure()
	if f.GetErrorType() != "dex.Panic" || !strings.Contains(f.GetMessage(), "charge panic exploded") {
		t.Errorf("failure = %v", f)
	}
	if !strings.Contains(f.GetStack(), "dex_test.Charge.Execute") {
		t.Errorf("stack does not show the panicking frame: %q", f.GetStack())
	}
}

// Covers: W1
func TestWorker_PongsAndHeartbeats(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	ws.welcome = &dexpb.Welcome{NodeId: "n", HeartbeatInterval: durationpb.New(20 * time.Millisecond)}
	addr := serve(t, ws, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}}, testFlow)
	sess := ws.session(t)

	sess.toWorker <- &dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_Ping{Ping: &dexpb.Ping{Nonce: 99}}}
	select {
	case p := <-sess.pongs:
		if p.GetNonce() != 99 {
			t.Errorf("pong nonce = %d", p.GetNonce())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no pong")
	}

	tk := task(dexpb.TaskKind(dex.KindExecute), "hb", "Charge", jsonValue(t, Order{ID: "gate"}))
	sess.send(tk)
	deadline := time.After(10 * time.Second)
	for found := false; !found; {
		select {
		case hb := <-sess.heartbeats:
			for _, tok := range hb.GetRunningTaskTokens() {
				found = found || string(tok) == "hb"
			}
		case <-deadline:
			t.Fatal("no heartbeat listing the running task")
		}
	}
	close(gate("gate" + tk.GetFlowId()))
	if res := sess.result(t); res.GetTaskResult() == nil {
		t.Errorf("result = %v", res)
	}
}

// Covers: P5, W1
func TestWorker_ReconnectsToNextAddressAfterUnavailable(t *testing.T) {
	t.Parallel()
	standby, active := newFakeWorkerServer(), newFakeWorkerServer()
	standby.unavailable.Store(true)
	a1, a2 := serve(t, standby, nil), serve(t, active, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{a1, a2}}, testFlow)

	sess := active.session(t)
	if standby.refusals.Load() == 0 {
		t.Error("the worker did not try the first address")
	}
	sess.send(task(dexpb.TaskKind(dex.KindExecute), "t", "Ship", jsonValue(t, Order{ID: "1"})))
	if res := sess.result(t); res.GetTaskResult() == nil {
		t.Errorf("result = %v", res)
	}

	// The active steps down: the stream ends with UNAVAILABLE and the worker
	// finds the new active at the first address.
	active.unavailable.Store(true)
	standby.unavailable.Store(false)
	sess.end <- status.Error(codes.Unavailable, "stepped down")
	sess = standby.session(t)
	sess.send(task(dexpb.TaskKind(dex.KindExecute), "t2", "Ship", jsonValue(t, Order{ID: "2"})))
	if res := sess.result(t); res.GetTaskResult() == nil {
		t.Errorf("result = %v", res)
	}
}

// Covers: W2, W3, P5
func TestWorker_ResendsResultsOfRunningTasksAfterReconnect(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	addr := serve(t, ws, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}}, testFlow)
	sess := ws.session(t)

	// A task that was running when the stream broke.
	tk := task(dexpb.TaskKind(dex.KindExecute), "running", "Charge", jsonValue(t, Order{ID: "gate"}))
	sess.send(tk)
	// A result sent but never acknowledged.
	sess.noAck.Store(true)
	sess.send(task(dexpb.TaskKind(dex.KindExecute), "unacked", "Ship", jsonValue(t, Order{ID: "1"})))
	if tok := tokenOf(sess.result(t)); string(tok) != "unacked" {
		t.Fatalf("token = %q", tok)
	}
	sess.end <- status.Error(codes.Unavailable, "connection lost")

	sess2 := ws.session(t)
	close(gate("gate" + tk.GetFlowId()))
	got := map[string]bool{}
	for len(got) < 2 {
		got[string(tokenOf(sess2.result(t)))] = true
	}
	if !got["running"] || !got["unacked"] {
		t.Errorf("results on the new stream = %v", got)
	}
}

// Covers: W1
func TestWorker_GracefulStopWaitsForRunningTasks(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	addr := serve(t, ws, nil)
	logs := &signalHandler{msg: "worker stopping", seen: make(chan struct{})}
	_, stop := runWorker(t, dex.WorkerOptions{Addresses: []string{addr}, DrainTimeout: 10 * time.Second, Logger: slog.New(logs)}, testFlow)
	sess := ws.session(t)

	tk := task(dexpb.TaskKind(dex.KindExecute), "slow", "Charge", jsonValue(t, Order{ID: "gate"}))
	sess.send(tk)
	waitHeartbeatOrRunning(t, sess)
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case <-logs.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not begin to stop")
	}
	// A task that arrives while stopping is handed back at once.
	sess.send(task(dexpb.TaskKind(dex.KindExecute), "late", "Ship", jsonValue(t, Order{ID: "2"})))
	if f := sess.result(t).GetTaskFailure(); f.GetErrorType() != "dex.WorkerStopping" || string(f.GetTaskToken()) != "late" {
		t.Errorf("late task failure = %v", f)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Run returned %v while a task was running", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate("gate" + tk.GetFlowId()))
	for {
		m := sess.result(t)
		if string(tokenOf(m)) == "slow" {
			if m.GetTaskResult() == nil {
				t.Errorf("slow task = %v, want its result", m)
			}
			break
		}
	}
	if err := <-stopped; err != nil {
		t.Errorf("Run = %v", err)
	}
	select {
	case <-sess.closed:
	case <-time.After(5 * time.Second):
		t.Error("the worker did not close the stream")
	}
}

// waitHeartbeatOrRunning gives the worker time to receive a task; the task
// blocks, so there is no result to wait for.
func waitHeartbeatOrRunning(t *testing.T, sess *fakeSession) {
	t.Helper()
	sess.toWorker <- &dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_Ping{Ping: &dexpb.Ping{Nonce: 1}}}
	select {
	case <-sess.pongs: // the worker read the task before the ping
	case <-time.After(10 * time.Second):
		t.Fatal("no pong")
	}
}

// Covers: W1
func TestWorker_RefusedHelloEndsRun(t *testing.T) {
	t.Parallel()
	addr := serve(t, refusingServer{}, nil)
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{addr}, Logger: quietLogger()}, testFlow)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = w.Run(ctx)
	if status.Code(errors.Unwrap(err)) != codes.InvalidArgument && !strings.Contains(err.Error(), "InvalidArgument") {
		t.Errorf("Run = %v, want INVALID_ARGUMENT", err)
	}
}

type refusingServer struct {
	dexpb.UnimplementedWorkerTaskServiceServer
}

func (refusingServer) PollWorkerTask(s dexpb.WorkerTaskService_PollWorkerTaskServer) error {
	_, _ = s.Recv()
	return status.Error(codes.InvalidArgument, "hello.flow_types: empty")
}

// signalHandler is a slog.Handler that closes seen when msg is logged.
type signalHandler struct {
	msg  string
	seen chan struct{}
	once sync.Once
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}

func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *signalHandler) WithGroup(string) slog.Handler      { return h }

// Covers: W1, P5
func TestWorker_DeliversResultsDuringDrainThenReconnects(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	addr := serve(t, ws, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}}, testFlow)
	sess := ws.session(t)

	tk := task(dexpb.TaskKind(dex.KindExecute), "draining", "Charge", jsonValue(t, Order{ID: "gate"}))
	sess.send(tk)
	sess.toWorker <- &dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_Drain{Drain: &dexpb.Drain{
		Reason: dexpb.DrainReason_DRAIN_REASON_STEP_DOWN, Timeout: durationpb.New(5 * time.Second),
	}}}
	close(gate("gate" + tk.GetFlowId()))
	if m := sess.result(t); string(tokenOf(m)) != "draining" || m.GetTaskResult() == nil {
		t.Fatalf("result during drain = %v", m)
	}
	sess.end <- status.Error(codes.Unavailable, "drained")
	ws.session(t) // the worker reconnects
}

// Covers: W1
func TestWorker_ReconnectsWhenTheStreamGoesSilent(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	// The fake never pings: after three ping intervals of silence the
	// worker opens a new stream.
	ws.welcome = &dexpb.Welcome{NodeId: "n", PingInterval: durationpb.New(20 * time.Millisecond)}
	addr := serve(t, ws, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}}, testFlow)
	first := ws.session(t)
	ws.session(t)
	select {
	case <-first.closed:
	case <-time.After(10 * time.Second):
		t.Error("the silent stream was not closed")
	}
}
