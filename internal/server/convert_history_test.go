package server

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// historyRun plays a run through the engine the way the node does (decide,
// apply) and returns its history as GetHistoryEvents renders it.
type historyRun struct {
	t   *testing.T
	e   *engine.Engine
	st  *engine.FlowState
	now time.Time
}

func (h *historyRun) do(c engine.Command) {
	h.t.Helper()
	recs, err := h.e.Decide(h.st, c, h.now)
	if err != nil {
		h.t.Fatalf("%T: %v", c, err)
	}
	for _, r := range recs {
		h.st, _ = engine.Apply(h.st, r)
	}
}

func (h *historyRun) token(step string) engine.Token {
	s := h.st.Step(step)
	return engine.Token{Epoch: 1, FlowID: h.st.FlowID, RunID: h.st.RunID, StepExecID: step, Method: s.Attempt.Method, Attempt: s.Attempt.Number}
}

func (h *historyRun) start(step string) engine.Token {
	h.t.Helper()
	tok := h.token(step)
	h.do(engine.TaskStarted{Token: tok})
	return tok
}

func (h *historyRun) events() []*dexpb.HistoryEvent {
	evs, _ := h.st.HistoryPage(0, 1000)
	out := make([]*dexpb.HistoryEvent, len(evs))
	for i, ev := range evs {
		out[i] = historyOut(h.st, ev)
	}
	return out
}

func ev(v string) engine.Value { return engine.Value{Type: "json:string", Data: []byte(v)} }

// GetHistoryEvents carries what the history messages define: the start
// as given, the Wait (timers with their durations), decisions with
// movements and the IDs they got, staged writes, RPC input and output,
// client publishes with their request ID, client attribute writes, skipped
// timers, failures with the time of their retry, unset once the retries
// ran out.
//
// Covers: E26, E9, E16, E19
func TestHistoryOut_CarriesValues(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	two := 2
	timeout := 3 * time.Second
	initial := 5 * time.Second
	def := &engine.FlowDefinition{Type: "order", Steps: map[string]engine.StepDef{
		"A": {HasWaitFor: true}, "B": {Options: &engine.StepOptions{Execute: &engine.MethodOptions{
			Retry: &engine.RetryOptions{MaxAttempts: &two, InitialInterval: &initial}}}}, "C": {},
	}, RPCs: []string{"kick"}, Attributes: []string{"n", "s"}, Channels: []string{"c", "d"}}
	h := &historyRun{t: t, e: engine.New(engine.Config{}), now: t0}
	h.do(engine.StartFlow{FlowID: "f", FlowType: "order", RunID: "r1", RequestID: "q1", StartStep: "A", Input: ev(`"in"`),
		StartOptions: &engine.StepOptions{WaitFor: &engine.MethodOptions{Timeout: &timeout}}, Timeout: time.Hour,
		Attributes: []engine.AttributeWrite{{Name: "n", Value: ev("1")}}, IDReusePolicy: engine.ReuseAllowIfNotRunning, Definition: def})
	tok := h.start("A-1")
	h.now = t0.Add(2 * time.Second)
	minute := time.Minute
	h.do(engine.WaitForResult{Token: tok, Wait: &engine.Wait{Mode: engine.AllOf, Conditions: []engine.Condition{
		{ID: "t", Timer: &minute}, {ID: "ch", Channel: &engine.ChannelCondition{Channel: "c", Bound: engine.ForOne}}}},
		Staged: engine.Staged{Attributes: []engine.AttributeWrite{{Name: "s", Value: ev(`"x"`)}}}})
	h.do(engine.SkipTimer{FlowID: "f", StepExecID: "A-1", TimerID: "t"})
	h.do(engine.PublishToChannel{FlowID: "f", RequestID: "p1", Messages: []engine.Publish{
		{Channel: "c", Value: ev("1")}, {Channel: "c", Value: ev("2")}, {Channel: "d", Value: ev("3")}, {Channel: "c", Value: ev("4")}}})
	h.do(engine.SetAttributes{FlowID: "f", Attributes: []engine.AttributeWrite{{Name: "s", Value: ev(`"y"`)}}})
	h.do(engine.RPCResult{Token: engine.Token{Epoch: 1, FlowID: "f", RunID: "r1", Method: engine.MethodRPC, CallID: "c1"},
		Name: "kick", StartedAt: h.now, Input: ev(`"ping"`), Output: ev(`"pong"`),
		Movements: []engine.Movement{{StepType: "C", Input: ev(`"fromrpc"`)}}})
	tok = h.start("A-1")
	h.now = h.now.Add(time.Second)
	h.do(engine.ExecuteResult{Token: tok, Decision: engine.Decision{Kind: engine.DecideMovements, Movements: []engine.Movement{
		{StepType: "B", Input: ev(`"b"`), Options: &engine.StepOptions{Execute: &engine.MethodOptions{Timeout: &timeout}}},
		{StepType: "C", Input: ev(`"c"`), SkipWaitFor: true}}},
		Staged: engine.Staged{Publishes: []engine.Publish{{Channel: "d", Value: ev("5")}}}})
	tok = h.start("B-1")
	h.now = h.now.Add(time.Second)
	h.do(engine.TaskFailed{Token: tok, Failure: engine.Failure{Type: "Boom", Message: "first"}})
	h.now = h.now.Add(initial)
	tok = h.start("B-1")
	h.do(engine.TaskFailed{Token: tok, Failure: engine.Failure{Type: "Boom", Message: "second"}})

	events := h.events()
	check := func(i int, what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("event %d (%s) = %v", i+1, what, events[i])
		}
	}
	if len(events) != 10 {
		t.Fatalf("%d events, want 10: %v", len(events), events)
	}
	fs := events[0].GetFlowStarted()
	check(0, "flow started", fs.GetFlowType() == "order" && fs.GetRequestId() == "q1" &&
		fs.GetStartStep().GetStepType() == "A" && string(fs.GetStartStep().GetInput().GetData()) == `"in"` &&
		fs.GetStartStep().GetOptions().GetWaitFor().GetAttemptTimeout().AsDuration() == timeout &&
		fs.GetStartStepExecutionId() == "A-1" && len(fs.GetInitialAttributes()) == 1 &&
		fs.GetFlowTimeout().AsDuration() == time.Hour && fs.GetFlowTimeoutPolicy() == dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_FAIL &&
		fs.GetIdReusePolicy() == dexpb.IdReusePolicy_ID_REUSE_POLICY_ALLOW_IF_NOT_RUNNING && fs.GetTerminatedRunId() == "")

	wantWait := &dexpb.Wait{Kind: &dexpb.Wait_AllOf{AllOf: &dexpb.WaitConditions{Conditions: []*dexpb.WaitCondition{
		{Id: "t", Condition: &dexpb.WaitCondition_Timer{Timer: &dexpb.TimerCondition{Duration: durationpb.New(time.Minute)}}},
		{Id: "ch", Condition: &dexpb.WaitCondition_Channel{Channel: &dexpb.ChannelCondition{Channel: "c",
			Bound: dexpb.ChannelBound_CHANNEL_BOUND_FOR_ONE}}}}}}}
	wc := events[1].GetWaitForCompleted()
	check(1, "wait for completed", wc.GetStepExecutionId() == "A-1" && wc.GetDuration().AsDuration() == 2*time.Second &&
		proto.Equal(wc.GetWait(), wantWait) && wc.GetWrites().GetAttributeWrites()[0].GetName() == "s")

	ts := events[2].GetTimerSkipped()
	check(2, "timer skipped", ts.GetStepExecutionId() == "A-1" && ts.GetConditionId() == "t" && ts.GetTimerIndex() == 0)

	cp := events[3].GetChannelPublished()
	ps := cp.GetPublishes()
	check(3, "channel published", cp.GetRequestId() == "p1" && len(ps) == 3 &&
		ps[0].GetChannel() == "c" && len(ps[0].GetValues()) == 2 && string(ps[0].GetValues()[1].GetData()) == "2" &&
		ps[1].GetChannel() == "d" && ps[2].GetChannel() == "c" && string(ps[2].GetValues()[0].GetData()) == "4" &&
		ps[0].GetValues()[0].GetEncoding() == "json")

	as := events[4].GetAttributesSet()
	check(4, "attributes set", len(as.GetAttributes()) == 1 && string(as.GetAttributes()[0].GetValue().GetData()) == `"y"`)

	rc := events[5].GetRpcCompleted()
	check(5, "rpc completed", rc.GetRpcName() == "kick" && string(rc.GetInput().GetData()) == `"ping"` &&
		string(rc.GetOutput().GetData()) == `"pong"` && rc.GetMovements()[0].GetStepType() == "C" &&
		len(rc.GetScheduledStepExecutionIds()) == 1 && rc.GetScheduledStepExecutionIds()[0] == "C-1")

	ec := events[6].GetExecuteCompleted()
	ms := ec.GetDecision().GetMovements().GetMovements()
	check(6, "execute completed", ec.GetStepExecutionId() == "A-1" && len(ms) == 2 &&
		ms[0].GetOptions().GetExecute().GetAttemptTimeout().AsDuration() == timeout && ms[1].GetSkipWaitFor() &&
		string(ms[1].GetInput().GetData()) == `"c"` && len(ec.GetScheduledStepExecutionIds()) == 2 &&
		ec.GetScheduledStepExecutionIds()[0] == "B-1" && ec.GetScheduledStepExecutionIds()[1] == "C-2" &&
		ec.GetWrites().GetChannelPublishes()[0].GetChannel() == "d")

	f1 := events[7].GetExecuteFailed()
	backoff := f1.GetNextAttemptTime().AsTime().Sub(f1.GetFailure().GetTime().AsTime()) // initial, ±20 % jitter
	check(7, "first failure", f1.GetFailure().GetAttempt() == 1 && f1.GetNextAttemptTime() != nil &&
		backoff >= initial*8/10 && backoff <= initial*12/10)
	f2 := events[8].GetExecuteFailed()
	check(8, "last failure", f2.GetFailure().GetAttempt() == 2 && f2.GetNextAttemptTime() == nil)

	fc := events[9].GetFlowClosed()
	check(9, "flow closed", fc.GetStatus() == dexpb.FlowStatus_FLOW_STATUS_FAILED &&
		fc.GetError().GetType() == dexpb.FlowErrorType_FLOW_ERROR_TYPE_WORKER_API_FAIL)
}

// Decisions and options in history read back as the worker sent them.
//
// Covers: E26
func TestHistoryOut_DecisionsRoundTrip(t *testing.T) {
	t.Parallel()
	coef, attempts := 1.5, uint32(4)
	opts := &dexpb.StepOptions{
		WaitFor: &dexpb.StepMethodOptions{AttemptTimeout: durationpb.New(0), Durability: dexpb.AttemptDurability_ATTEMPT_DURABILITY_ASYNC},
		Execute: &dexpb.StepMethodOptions{RetryPolicy: &dexpb.RetryPolicy{InitialInterval: durationpb.New(time.Second),
			BackoffCoefficient: &coef, MaximumInterval: durationpb.New(time.Minute), MaximumAttempts: &attempts,
			MaximumTotalDuration: durationpb.New(time.Hour)}},
		WaitForFailurePolicy:    dexpb.WaitForFailurePolicy_WAIT_FOR_FAILURE_POLICY_PROCEED,
		ExecuteFailurePolicy:    dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_PROCEED_TO_RECOVERY_STEP,
		ExecuteRecoveryStepType: "R",
	}
	for _, d := range []*dexpb.StepDecision{
		{Decision: &dexpb.StepDecision_Movements{Movements: &dexpb.Movements{Movements: []*dexpb.Movement{
			{StepType: "B", Input: &dexpb.EncodedValue{Encoding: "json", Data: []byte("1")}, Options: opts},
			{StepType: "C", SkipWaitFor: true}}}}},
		{Decision: &dexpb.StepDecision_GracefulComplete{GracefulComplete: &dexpb.GracefulComplete{
			Output: &dexpb.EncodedValue{Encoding: "json", Type: "int", Data: []byte("2")}}}},
		{Decision: &dexpb.StepDecision_ForceComplete{ForceComplete: &dexpb.ForceComplete{}}},
		{Decision: &dexpb.StepDecision_ForceFail{ForceFail: &dexpb.ForceFail{Reason: "no"}}},
		{Decision: &dexpb.StepDecision_DeadEnd{DeadEnd: &dexpb.DeadEnd{}}},
	} {
		in, err := decisionIn(d)
		if err != nil {
			t.Fatal(err)
		}
		if back := decisionOut(&in); !proto.Equal(back, d) {
			t.Errorf("decision %v came back as %v", d, back)
		}
	}
}
