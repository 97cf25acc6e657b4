package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

func TestValues_RoundTripKeepsUnsetApart(t *testing.T) {
	t.Parallel()
	cases := []*dexpb.EncodedValue{
		nil,
		{},
		{Encoding: "json", Type: "main.Order", Data: []byte(`{"a":1}`)},
		{Encoding: "binary", Data: []byte{0, 1}},
		{Type: "t:with:colons"},
	}
	for _, in := range cases {
		v, err := valueIn("v", in)
		if err != nil {
			t.Fatal(err)
		}
		if in == nil && (v.Type != "" || v.Data != nil) {
			t.Fatalf("unset value became %+v", v)
		}
		out := valueOut(v)
		if !proto.Equal(in, out) && (in != nil || out != nil) {
			t.Errorf("%v -> %+v -> %v", in, v, out)
		}
	}
	if _, err := valueIn("input", &dexpb.EncodedValue{Encoding: "a:b"}); err == nil {
		t.Error("an encoding with ':' must be refused")
	}
}

func TestWaits_ConvertBothWays(t *testing.T) {
	t.Parallel()
	w := &dexpb.Wait{Kind: &dexpb.Wait_AllOf{AllOf: &dexpb.WaitConditions{Conditions: []*dexpb.WaitCondition{
		{Id: "t", Condition: &dexpb.WaitCondition_Timer{Timer: &dexpb.TimerCondition{Duration: durationpb.New(time.Minute)}}},
		{Id: "c", Condition: &dexpb.WaitCondition_Channel{Channel: &dexpb.ChannelCondition{Channel: "ch",
			Bound: dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST_AT_MOST, Min: 1, Max: 3}}},
	}}}}
	ew, err := waitIn(w)
	if err != nil {
		t.Fatal(err)
	}
	if ew.Mode != engine.AllOf || *ew.Conditions[0].Timer != time.Minute || ew.Conditions[1].Channel.N != 1 || ew.Conditions[1].Channel.M != 3 {
		t.Fatalf("waitIn = %+v", ew)
	}
	if none, err := waitIn(&dexpb.Wait{}); none != nil || err != nil {
		t.Fatalf("a Wait without kind = %+v, %v; want no wait", none, err)
	}
	if _, err := waitIn(&dexpb.Wait{Kind: &dexpb.Wait_Until{Until: &dexpb.WaitCondition{
		Condition: &dexpb.WaitCondition_Channel{Channel: &dexpb.ChannelCondition{Channel: "ch"}}}}}); err == nil {
		t.Fatal("a channel condition without a bound must be refused")
	}
	stored := &engine.StoredWait{Mode: engine.AnyOf, Conditions: []engine.StoredCondition{
		{ID: "t", Kind: engine.CondTimer, TimerIndex: 0, FireAt: time.Unix(100, 0)},
		{ID: "c", Kind: engine.CondChannel, TimerIndex: -1, Channel: "ch", Bound: engine.ForN, Min: 2, Max: 2, Satisfied: true,
			Messages: []engine.Message{{Seq: 1, Value: engine.Value{Type: "json:", Data: []byte("1")}}, {Seq: 2}}},
	}}
	r := resultsOut(stored)
	if len(r.GetTimers()) != 1 || r.GetTimers()[0].GetFired() || len(r.GetChannels()) != 1 || r.GetChannels()[0].GetChannelConditionIndex() != 0 ||
		len(r.GetChannels()[0].GetMessages()) != 2 || r.GetChannels()[0].GetMessages()[0].GetEncoding() != "json" {
		t.Fatalf("resultsOut = %v", r)
	}
	ws := waitStateOut(stored)
	if !ws.GetSatisfied() || ws.GetTimers()[0].GetStatus() != dexpb.TimerStatus_TIMER_STATUS_CANCELED ||
		ws.GetChannels()[0].GetConsumedCount() != 2 || ws.GetWait().GetAnyOf() == nil {
		t.Fatalf("waitStateOut = %v", ws)
	}
}

func TestHello_ValidatesAndConverts(t *testing.T) {
	t.Parallel()
	ok := &dexpb.Hello{WorkerId: "w", MaxConcurrentTasks: 2, FlowTypes: []*dexpb.FlowTypeDeclaration{{
		FlowType: "f", Steps: []*dexpb.StepDeclaration{{StepType: "A", HasWaitFor: true, Options: &dexpb.StepOptions{
			ExecuteFailurePolicy: dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_PROCEED_TO_RECOVERY_STEP, ExecuteRecoveryStepType: "A"}}},
		RpcNames: []string{"r"}, DefaultStepOptions: &dexpb.StepOptions{WaitFor: &dexpb.StepMethodOptions{
			Durability: dexpb.AttemptDurability_ATTEMPT_DURABILITY_ASYNC}},
	}}}
	h, err := helloIn(ok)
	if err != nil {
		t.Fatal(err)
	}
	def := h.FlowTypes[0].Definition
	if def.Type != "f" || !def.Steps["A"].HasWaitFor || def.Steps["A"].Options.RecoveryStep != "A" ||
		h.FlowTypes[0].Defaults.WaitFor.Durability != engine.ASYNC || h.MaxConcurrent != 2 {
		t.Fatalf("helloIn = %+v", h)
	}
	for field, bad := range map[string]*dexpb.Hello{
		"hello.workerId":           {MaxConcurrentTasks: 1, FlowTypes: ok.FlowTypes},
		"hello.maxConcurrentTasks": {WorkerId: "w", FlowTypes: ok.FlowTypes},
		"hello.flowTypes":          {WorkerId: "w", MaxConcurrentTasks: 1},
		"hello.flowTypes[1].flowType": {WorkerId: "w", MaxConcurrentTasks: 1,
			FlowTypes: []*dexpb.FlowTypeDeclaration{{FlowType: "f"}, {FlowType: "f"}}},
		"hello.flowTypes[0].steps[0].options.executeRecoveryStepType": {WorkerId: "w", MaxConcurrentTasks: 1,
			FlowTypes: []*dexpb.FlowTypeDeclaration{{FlowType: "f", Steps: []*dexpb.StepDeclaration{{StepType: "A", Options: &dexpb.StepOptions{
				ExecuteFailurePolicy: dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_PROCEED_TO_RECOVERY_STEP}}}}}},
	} {
		_, err := helloIn(bad)
		var e *engine.Error
		if err == nil || !asEngine(err, &e) || e.Field != field {
			t.Errorf("helloIn for %s: %v", field, err)
		}
	}
}

func asEngine(err error, e **engine.Error) bool { return errors.As(err, e) }

// A value declared JSON whose bytes are not JSON (`{{{not json`) used to be
// committed; it is refused at the boundary, naming the field, wherever a
// value comes in (issue 11 item 6).
func TestValues_DeclaredJSONMustBeJSON(t *testing.T) {
	t.Parallel()
	bad := &dexpb.EncodedValue{Encoding: "json", Type: "main.Order", Data: []byte("{{{not json")}
	for _, c := range []struct {
		field string
		v     *dexpb.EncodedValue
	}{
		{"input", bad},
		{"input", &dexpb.EncodedValue{Encoding: "json"}}, // empty is not JSON
		{"input", &dexpb.EncodedValue{Encoding: "json", Data: []byte(`{"a":1} x`)}},
	} {
		_, err := valueIn(c.field, c.v)
		var e *engine.Error
		if !errors.As(err, &e) || e.Code != engine.CodeInvalidArgument || e.Field != c.field+".data" {
			t.Errorf("valueIn(%q, %q) = %v; want INVALID_ARGUMENT naming %s.data", c.field, c.v.GetData(), err, c.field)
		}
	}
	for _, ok := range []*dexpb.EncodedValue{
		{Encoding: "json", Data: []byte(`null`)},
		{Encoding: "json", Data: []byte(` {"a":[1,2]} `)},
		{Encoding: "binary", Data: []byte("{{{not json")}, // only "json" is checked
	} {
		if _, err := valueIn("input", ok); err != nil {
			t.Errorf("valueIn(%q %q) = %v; want accepted", ok.GetEncoding(), ok.GetData(), err)
		}
	}
	// A task result: the attempt fails (E28) with a message naming the
	// field, and nothing of the value is committed.
	tok := engine.Token{Method: engine.MethodRPC}
	_, err := resultIn(tok, &dexpb.TaskResult{Result: &dexpb.TaskResult_Rpc{Rpc: &dexpb.RpcResult{Output: bad}}})
	if err == nil || !strings.Contains(err.Error(), "rpc.output.data") {
		t.Errorf("resultIn with a non-JSON output = %v; want an error naming rpc.output.data", err)
	}
	_, err = resultIn(tok, &dexpb.TaskResult{Writes: &dexpb.StagedWrites{AttributeWrites: []*dexpb.Attribute{{Name: "a", Value: bad}}},
		Result: &dexpb.TaskResult_Rpc{Rpc: &dexpb.RpcResult{}}})
	if err == nil || !strings.Contains(err.Error(), "writes.attributeWrites[0].value.data") {
		t.Errorf("resultIn with a non-JSON attribute = %v; want an error naming writes.attributeWrites[0].value.data", err)
	}
}

// A WaitFor or Execute task says what its retry policy has left, so that
// the worker can tell the last failure (max attempts, deadline, delay); an
// RPC task says nothing of it.
//
// Covers: E9
func TestTaskOut_RetryLimits(t *testing.T) {
	t.Parallel()
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out := taskOut(&engine.Task{Method: engine.MethodExecute, Attempt: 2, FirstAt: first,
		MaxAttempts: 3, RetryDeadline: first.Add(time.Minute), RetryDelay: 1500 * time.Millisecond})
	if out.GetMaxAttempts() != 3 || !out.GetRetryDeadline().AsTime().Equal(first.Add(time.Minute)) ||
		out.GetRetryDelay().AsDuration() != 1500*time.Millisecond {
		t.Errorf("task = %v", out)
	}
	out = taskOut(&engine.Task{Method: engine.MethodWaitFor, Attempt: 1, FirstAt: first, RetryDelay: time.Second})
	if out.GetMaxAttempts() != 0 || out.RetryDeadline != nil || out.GetRetryDelay().AsDuration() != time.Second {
		t.Errorf("unlimited task = %v", out)
	}
	out = taskOut(&engine.Task{Method: engine.MethodRPC, MaxAttempts: 3, RetryDelay: time.Second})
	if out.GetMaxAttempts() != 0 || out.RetryDelay != nil {
		t.Errorf("RPC task = %v", out)
	}
}
