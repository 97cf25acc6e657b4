package flows_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dexraw"
	"github.com/dexzd/dexzd/examples/flows"
)

func newWorker(t *testing.T) *dex.Worker {
	t.Helper()
	w, err := dex.NewWorker(dex.WorkerOptions{
		Addresses: []string{"127.0.0.1:1"},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, flows.All()...)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func value(t *testing.T, v any) *dexpb.EncodedValue {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &dexpb.EncodedValue{Encoding: "json", Data: data}
}

func decode[T any](t *testing.T, ev *dexpb.EncodedValue) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(ev.GetData(), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func execute(flow, step string, attempt uint32, in *dexpb.EncodedValue) *dexpb.Task {
	return &dexpb.Task{Kind: dexpb.TaskKind(dex.KindExecute), TaskToken: []byte("t"), FlowType: flow, FlowId: "f", RunId: "r",
		StepType: step, StepExecutionId: step + "-1", Attempt: attempt, Input: in}
}

func rpc(name string, in *dexpb.EncodedValue, count int, t *testing.T) *dexpb.Task {
	return &dexpb.Task{Kind: dexpb.TaskKind(dex.KindRPC), TaskToken: []byte("t"), FlowType: "counter", FlowId: "c", RunId: "r",
		RpcName: name, Input: in, Attributes: []*dexpb.Attribute{{Name: "count", Value: value(t, count)}}}
}

func TestAll_Validate(t *testing.T) {
	t.Parallel()
	for _, f := range flows.All() {
		if err := f.Validate(); err != nil {
			t.Error(err)
		}
	}
}

// Covers: E5, E6, E9, E10, E12
func TestOrderFlow_ChargeRetriesThenShips(t *testing.T) {
	t.Parallel()
	w := newWorker(t)
	ctx := context.Background()
	order := flows.Order{ID: "42", Cents: 1200, Card: "visa"}

	res := dexraw.HandleTask(ctx, w, execute("order", "Reserve", 1, value(t, order))).GetTaskResult()
	if m := res.GetExecute().GetDecision().GetMovements().GetMovements(); len(m) != 1 || m[0].GetStepType() != "Charge" {
		t.Fatalf("Reserve decided %v", res.GetExecute().GetDecision())
	}
	if w := res.GetWrites().GetAttributeWrites(); len(w) != 2 || decode[string](t, w[0].GetValue()) != "reserved" ||
		w[1].GetName() != "cents" || decode[int](t, w[1].GetValue()) != 1200 {
		t.Errorf("Reserve wrote %v", w)
	}
	for attempt := uint32(1); attempt <= 2; attempt++ {
		f := dexraw.HandleTask(ctx, w, execute("order", "Charge", attempt, value(t, order))).GetTaskFailure()
		if f.GetMessage() != flows.ErrGatewayBusy.Error() || f.GetRetryAfter() == nil {
			t.Fatalf("Charge attempt %d = %v, want a transient failure with retry-after", attempt, f)
		}
	}
	res = dexraw.HandleTask(ctx, w, execute("order", "Charge", 3, value(t, order))).GetTaskResult()
	if m := res.GetExecute().GetDecision().GetMovements().GetMovements(); len(m) != 1 || m[0].GetStepType() != "Ship" {
		t.Fatalf("Charge attempt 3 decided %v", res.GetExecute().GetDecision())
	}
	res = dexraw.HandleTask(ctx, w, execute("order", "Ship", 1, value(t, order))).GetTaskResult()
	got := decode[flows.Receipt](t, res.GetExecute().GetDecision().GetGracefulComplete().GetOutput())
	if want := (flows.Receipt{OrderID: "42", Status: "shipped", Cents: 1200, Tracking: "TRK-42"}); got != want {
		t.Errorf("receipt = %+v, want %+v", got, want)
	}
}

// Covers: E12, E13
func TestOrderFlow_DeclinedCardRecoversToCancel(t *testing.T) {
	t.Parallel()
	w := newWorker(t)
	order := flows.Order{ID: "43", Cents: 500, Card: "declined"}
	f := dexraw.HandleTask(context.Background(), w, execute("order", "Charge", 4, value(t, order))).GetTaskFailure()
	if f.GetErrorType() != "*flows.DeclinedError" || f.GetRetryAfter() != nil {
		t.Errorf("failure = %v", f)
	}
	// The server runs the recovery step once the retries are exhausted.
	var charge *dexpb.StepDeclaration
	for _, s := range dexraw.Hello(w).GetFlowTypes()[0].GetSteps() {
		if s.GetStepType() == "Charge" {
			charge = s
		}
	}
	if o := charge.GetOptions(); o.GetExecuteRecoveryStepType() != "Cancel" || o.GetExecute().GetRetryPolicy().GetMaximumAttempts() != 4 {
		t.Errorf("Charge options = %v", o)
	}
	res := dexraw.HandleTask(context.Background(), w, execute("order", "Cancel", 1, value(t, order))).GetTaskResult()
	if got := decode[flows.Receipt](t, res.GetExecute().GetDecision().GetGracefulComplete().GetOutput()); got.Status != "canceled" {
		t.Errorf("receipt = %+v", got)
	}
}

// Covers: E15, E18
func TestApprovalFlow_Outcomes(t *testing.T) {
	t.Parallel()
	w := newWorker(t)
	req := flows.Request{ID: "r1", Amount: 10}

	wt := dexraw.HandleTask(context.Background(), w, &dexpb.Task{Kind: dexpb.TaskKind(dex.KindWaitFor), TaskToken: []byte("t"), FlowType: "approval",
		StepType: "AwaitApproval", Input: value(t, req)}).GetTaskResult().GetWaitFor().GetWait()
	if c := wt.GetAnyOf().GetConditions(); len(c) != 2 || c[0].GetChannel().GetChannel() != "approve" || c[1].GetId() != "timeout" {
		t.Fatalf("wait = %v", wt)
	}

	vote := func(v flows.Vote) *dexpb.ConditionResults {
		return &dexpb.ConditionResults{
			Timers:   []*dexpb.TimerResult{{TimerIndex: 0, ConditionId: "timeout"}},
			Channels: []*dexpb.ChannelResult{{Channel: "approve", Satisfied: true, Messages: []*dexpb.EncodedValue{value(t, v)}}},
		}
	}
	timedOut := &dexpb.ConditionResults{
		Timers:   []*dexpb.TimerResult{{TimerIndex: 0, ConditionId: "timeout", Fired: true}},
		Channels: []*dexpb.ChannelResult{{Channel: "approve"}},
	}
	for _, tt := range []struct {
		results *dexpb.ConditionResults
		want    flows.Verdict
	}{
		{vote(flows.Vote{Approved: true, By: "ann"}), flows.Verdict{RequestID: "r1", Outcome: "approved", By: "ann"}},
		{vote(flows.Vote{Approved: false, By: "bob"}), flows.Verdict{RequestID: "r1", Outcome: "rejected", By: "bob"}},
		{timedOut, flows.Verdict{RequestID: "r1", Outcome: "timed-out"}},
	} {
		task := execute("approval", "AwaitApproval", 1, value(t, req))
		task.ConditionResults = tt.results
		res := dexraw.HandleTask(context.Background(), w, task).GetTaskResult()
		if got := decode[flows.Verdict](t, res.GetExecute().GetDecision().GetGracefulComplete().GetOutput()); got != tt.want {
			t.Errorf("verdict = %+v, want %+v", got, tt.want)
		}
	}
}

// Covers: E21, E22
func TestCounterFlow_RPCs(t *testing.T) {
	t.Parallel()
	w := newWorker(t)
	ctx := context.Background()

	res := dexraw.HandleTask(ctx, w, rpc("add", value(t, 5), 3, t)).GetTaskResult()
	if decode[int](t, res.GetRpc().GetOutput()) != 8 || decode[int](t, res.GetWrites().GetAttributeWrites()[0].GetValue()) != 8 {
		t.Errorf("add = %v", res)
	}
	res = dexraw.HandleTask(ctx, w, rpc("get", value(t, struct{}{}), 8, t)).GetTaskResult()
	if decode[int](t, res.GetRpc().GetOutput()) != 8 || res.GetWrites() != nil {
		t.Errorf("get = %v", res)
	}
	if f := dexraw.HandleTask(ctx, w, rpc("add", value(t, -1), 8, t)).GetTaskFailure(); f.GetMessage() != "a counter only grows" {
		t.Errorf("add -1 = %v", f)
	}
	res = dexraw.HandleTask(ctx, w, rpc("finish", nil, 8, t)).GetTaskResult()
	m := res.GetRpc().GetMovements()
	if len(m) != 1 || m[0].GetStepType() != "Finished" || decode[int](t, m[0].GetInput()) != 8 {
		t.Fatalf("finish movements = %v", m)
	}
	res = dexraw.HandleTask(ctx, w, &dexpb.Task{Kind: dexpb.TaskKind(dex.KindExecute), TaskToken: []byte("t"), FlowType: "counter",
		StepType: "Finished", Input: m[0].GetInput()}).GetTaskResult()
	if decode[int](t, res.GetExecute().GetDecision().GetGracefulComplete().GetOutput()) != 8 {
		t.Errorf("Finished = %v", res)
	}
}

// The shipment fans out over one parcel child per parcel (AllOf) and
// lists the labels; the quote race (AnyOf) takes the winner's quote and
// names the losers, which the server reports RUNNING.
//
// Covers: E31
func TestSubFlows_ShipmentAndQuoteRace(t *testing.T) {
	t.Parallel()
	w := newWorker(t)
	ctx := context.Background()
	s := flows.Shipment{ID: "s1", Parcels: []flows.Parcel{{ID: "p1", Grams: 2000}, {ID: "p2", Grams: 500}}}
	wt := dexraw.HandleTask(ctx, w, &dexpb.Task{Kind: dexpb.TaskKind(dex.KindWaitFor), TaskToken: []byte("t"), FlowType: "shipment",
		StepType: "PackAll", Input: value(t, s)}).GetTaskResult().GetWaitFor().GetWait()
	conds := wt.GetAllOf().GetConditions()
	if len(conds) != 2 || conds[0].GetSubFlow().GetFlowType() != "parcel" || conds[1].GetId() != "p2" ||
		decode[flows.Parcel](t, conds[1].GetSubFlow().GetInput()) != s.Parcels[1] {
		t.Fatalf("wait = %v", wt)
	}
	done := func(i int, id string, out any) *dexpb.SubFlowResult {
		return &dexpb.SubFlowResult{SubFlowConditionIndex: uint32(i), ConditionId: id, Satisfied: true, Result: &dexpb.FlowResult{
			FlowType: "parcel", FlowId: "SubFlow:x-PackAll-1-" + id, Status: dexpb.FlowStatus_FLOW_STATUS_COMPLETED,
			Outputs: []*dexpb.StepOutput{{Output: value(t, out)}}}}
	}
	task := execute("shipment", "PackAll", 1, value(t, s))
	task.ConditionResults = &dexpb.ConditionResults{SubFlows: []*dexpb.SubFlowResult{
		done(0, "p1", flows.Label{ParcelID: "p1", Tracking: "TRK-p1"}), done(1, "p2", flows.Label{ParcelID: "p2", Tracking: "TRK-p2"})}}
	m := decode[flows.Manifest](t, dexraw.HandleTask(ctx, w, task).GetTaskResult().GetExecute().GetDecision().GetGracefulComplete().GetOutput())
	if len(m.Labels) != 2 || m.Labels[1].Tracking != "TRK-p2" || len(m.Failed) != 0 {
		t.Errorf("manifest = %+v", m)
	}

	race := flows.QuoteRace{Requests: []flows.QuoteRequest{{Carrier: "fast", Grams: 1000}, {Carrier: "slow", Grams: 1000}}}
	task = execute("quote-race", "RaceQuotes", 1, value(t, race))
	task.ConditionResults = &dexpb.ConditionResults{
		Timers: []*dexpb.TimerResult{{TimerIndex: 0, ConditionId: "give-up"}},
		SubFlows: []*dexpb.SubFlowResult{
			{SubFlowConditionIndex: 0, ConditionId: "fast", Satisfied: true, Result: &dexpb.FlowResult{FlowType: "carrier-quote",
				FlowId: "SubFlow:q-RaceQuotes-1-0", Status: dexpb.FlowStatus_FLOW_STATUS_COMPLETED,
				Outputs: []*dexpb.StepOutput{{Output: value(t, flows.Quote{Carrier: "fast", Cents: 400})}}}},
			{SubFlowConditionIndex: 1, ConditionId: "slow", Result: &dexpb.FlowResult{FlowType: "carrier-quote",
				FlowId: "SubFlow:q-RaceQuotes-1-1", Status: dexpb.FlowStatus_FLOW_STATUS_RUNNING}},
		}}
	best := decode[flows.BestQuote](t, dexraw.HandleTask(ctx, w, task).GetTaskResult().GetExecute().GetDecision().GetGracefulComplete().GetOutput())
	if best.Quote == nil || best.Quote.Carrier != "fast" || len(best.Losers) != 1 || best.Losers[0] != "SubFlow:q-RaceQuotes-1-1" {
		t.Errorf("best quote = %+v", best)
	}
}

// Drain takes its own region's order and adds it to the customer's
// instance of the Spent map; the RPC lists the customers and the regions
// with queued orders.
//
// Covers: E33
func TestDispatchFlow_RoutesPerRegionAndTotalsPerCustomer(t *testing.T) {
	t.Parallel()
	w := newWorker(t)
	ctx := context.Background()
	wt := dexraw.HandleTask(ctx, w, &dexpb.Task{Kind: dexpb.TaskKind(dex.KindWaitFor), TaskToken: []byte("t"), FlowType: "dispatch",
		StepType: "Drain", Input: value(t, "eu/west")}).GetTaskResult().GetWaitFor().GetWait()
	if ch := wt.GetUntil().GetChannel().GetChannel(); ch != "orders/eu%2Fwest" {
		t.Fatalf("Drain waits on %q, want orders/eu%%2Fwest", ch)
	}
	task := execute("dispatch", "Drain", 1, value(t, "eu/west"))
	task.Attributes = []*dexpb.Attribute{{Name: "spent/ann", Value: value(t, 100)}}
	task.ConditionResults = &dexpb.ConditionResults{Channels: []*dexpb.ChannelResult{{Channel: "orders/eu%2Fwest", Satisfied: true,
		Messages: []*dexpb.EncodedValue{value(t, flows.RegionOrder{Customer: "ann", Cents: 20})}}}}
	res := dexraw.HandleTask(ctx, w, task).GetTaskResult()
	if a := res.GetWrites().GetAttributeWrites(); len(a) != 1 || a[0].GetName() != "spent/ann" || decode[int](t, a[0].GetValue()) != 120 {
		t.Fatalf("Drain wrote %v, want spent/ann=120", a)
	}
	if m := res.GetExecute().GetDecision().GetMovements().GetMovements(); len(m) != 1 || m[0].GetStepType() != "Drain" {
		t.Fatalf("Drain decided %v, want another Drain", res.GetExecute().GetDecision())
	}
	res = dexraw.HandleTask(ctx, w, &dexpb.Task{Kind: dexpb.TaskKind(dex.KindRPC), TaskToken: []byte("t"), FlowType: "dispatch", FlowId: "d", RunId: "r",
		RpcName: "dispatch-status", Input: value(t, struct{}{}),
		Attributes:        []*dexpb.Attribute{{Name: "spent/ann", Value: value(t, 120)}, {Name: "spent/bo%2Fb", Value: value(t, 7)}},
		ChannelQueueSizes: map[string]uint32{"orders/us": 2, "orders/eu": 0}}).GetTaskResult()
	v := decode[flows.DispatchView](t, res.GetRpc().GetOutput())
	if len(v.Spent) != 2 || v.Spent["ann"] != 120 || v.Spent["bo/b"] != 7 || len(v.Queued) != 1 || v.Queued["us"] != 2 {
		t.Fatalf("dispatch-status = %+v", v)
	}
}
