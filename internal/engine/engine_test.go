package engine

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// node is a minimal stand-in for the node: it decides, "logs" (marshals),
// applies and collects effects.
type node struct {
	t    *testing.T
	e    *Engine
	st   *FlowState
	log  [][]byte
	effs []Effect
}

func (n *node) do(cmd Command, now time.Time) error {
	recs, err := n.e.Decide(n.st, cmd, now)
	if err != nil {
		return err
	}
	for _, r := range recs {
		b, err := MarshalRecord(r)
		if err != nil {
			n.t.Fatal(err)
		}
		n.log = append(n.log, b)
		var eff []Effect
		n.st, eff = Apply(n.st, r)
		n.effs = append(n.effs, eff...)
	}
	return nil
}

func (n *node) must(cmd Command, now time.Time) {
	n.t.Helper()
	if err := n.do(cmd, now); err != nil {
		n.t.Fatalf("%T: %v", cmd, err)
	}
}

func (n *node) replay() *FlowState {
	var st *FlowState
	for _, b := range n.log {
		r, err := UnmarshalRecord(b)
		if err != nil {
			n.t.Fatal(err)
		}
		st, _ = Apply(st, r)
	}
	return st
}

func orderDef() *FlowDefinition {
	return &FlowDefinition{Type: "order", Steps: map[string]StepDef{
		"Reserve": {}, "Await": {HasWaitFor: true}, "Charge": {},
	}, RPCs: []string{"status"}, Attributes: []string{"status"}, Channels: []string{"approve"}}
}

func startedNode(t *testing.T) *node {
	n := &node{t: t, e: New(Config{})}
	n.must(StartFlow{FlowID: "o-1", FlowType: "order", RunID: "r1", StartStep: "Reserve",
		Input: Value{Data: []byte("42")}, Definition: orderDef(), Timeout: time.Hour}, base)
	return n
}

func tok(st *FlowState, step string, epoch uint64) Token {
	s := st.Step(step)
	return Token{Epoch: epoch, FlowID: st.FlowID, RunID: st.RunID, StepExecID: step, Method: s.Attempt.Method, Attempt: s.Attempt.Number}
}

// TestRecovery_ReplayRestoresTimersAndTasks: after a restart the node
// rebuilds every run from the log; the replayed state lists the same armed
// timers (due ones fire at once) and pending tasks as the live one.
// Covers: E20, W5, T5
func TestRecovery_ReplayRestoresTimersAndTasks(t *testing.T) {
	n := startedNode(t)
	now := base
	n.must(TaskStarted{Token: tok(n.st, "Reserve-1", 1)}, now)
	n.must(ExecuteResult{Token: tok(n.st, "Reserve-1", 1), Decision: Decision{Kind: DecideMovements,
		Movements: []Movement{{StepType: "Await"}, {StepType: "Charge"}}}}, now)
	n.must(TaskStarted{Token: tok(n.st, "Await-1", 1)}, now)
	d := 10 * time.Minute
	n.must(WaitForResult{Token: tok(n.st, "Await-1", 1), Wait: &Wait{Mode: AnyOf, Conditions: []Condition{
		{Timer: &d}, {Channel: &ChannelCondition{Channel: "approve", Bound: ForOne}}}}}, now)
	n.must(TaskStarted{Token: tok(n.st, "Charge-1", 1)}, now)

	replayed := n.replay()
	if !reflect.DeepEqual(replayed.Timers(), n.st.Timers()) {
		t.Fatalf("timers after replay %v, live %v", replayed.Timers(), n.st.Timers())
	}
	if !reflect.DeepEqual(replayed.PendingTasks(), n.st.PendingTasks()) {
		t.Fatalf("pending tasks after replay differ")
	}
	kinds := map[TimerKind]int{}
	for _, tm := range replayed.Timers() {
		kinds[tm.Timer.Kind]++
	}
	if kinds[TimerFlowTimeout] != 1 || kinds[TimerWait] != 1 || kinds[TimerAttemptTimeout] != 1 {
		t.Fatalf("timers = %v", replayed.Timers())
	}
	// The wait timer came due during an outage: it fires on recovery.
	n.st = replayed
	late := base.Add(3 * time.Hour / 4)
	n.must(TimerFired{FlowID: "o-1", RunID: "r1", Timer: Timer{Kind: TimerWait, StepExecID: "Await-1"}}, late)
	if got := n.st.PendingTasks(); len(got) != 1 || got[0].StepExecID != "Await-1" || got[0].Method != MethodExecute || got[0].FlowType != "order" {
		t.Fatalf("pending after the timer: %+v", got)
	}
}

// Covers: E28
func TestDecide_ErrorCodes(t *testing.T) {
	e := New(Config{})
	n := startedNode(t)
	tests := []struct {
		name   string
		st     *FlowState
		cmd    Command
		code   Code
		reason error
	}{
		{"unknown flow", nil, PublishToChannel{FlowID: "x", Messages: []Publish{{Channel: "approve"}}}, CodeNotFound, nil},
		{"other flow", n.st, SetAttributes{FlowID: "x"}, CodeNotFound, nil},
		{"empty flow id", n.st, StopFlow{}, CodeInvalidArgument, nil},
		{"unknown command", n.st, nil, CodeInvalidArgument, nil},
		{"stale token", n.st, ExecuteResult{Token: Token{FlowID: "o-1", RunID: "r1", StepExecID: "Reserve-1", Method: MethodExecute, Attempt: 1}}, CodeFailedPrecondition, ErrStaleToken},
		{"timer of unknown kind", n.st, TimerFired{FlowID: "o-1", RunID: "r1", Timer: Timer{Kind: "NAP"}}, CodeInvalidArgument, nil},
		{"timer without run", n.st, TimerFired{FlowID: "o-1", Timer: Timer{Kind: TimerFlowTimeout}}, CodeInvalidArgument, nil},
		{"timer not due", n.st, TimerFired{FlowID: "o-1", RunID: "r1", Timer: Timer{Kind: TimerFlowTimeout}}, CodeFailedPrecondition, ErrTimerNotDue},
		{"result of wrong method", n.st, WaitForResult{Token: Token{Method: MethodExecute}}, CodeInvalidArgument, nil},
		{"rpc result of wrong run", n.st, RPCResult{Token: Token{FlowID: "o-1", RunID: "r0", Method: MethodRPC, CallID: "c"}}, CodeFailedPrecondition, ErrStaleToken},
		{"start with definition of another type", nil, StartFlow{FlowID: "f", FlowType: "x", RunID: "r", Definition: orderDef()}, CodeInvalidArgument, nil},
		{"start with bad config", nil, StartFlow{FlowID: "f", FlowType: "x", RunID: "r", Config: &StepOptions{WaitForFailure: "NO"}}, CodeInvalidArgument, nil},
		{"start reusing the run id", n.st, StartFlow{FlowID: "o-1", FlowType: "order", RunID: "r1"}, CodeInvalidArgument, nil},
		{"set nil definition", n.st, SetDefinition{FlowID: "o-1"}, CodeInvalidArgument, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := e.Decide(tt.st, tt.cmd, base)
			if len(recs) != 0 || CodeOf(err) != tt.code {
				t.Fatalf("got %d records, %v; want %v", len(recs), err, tt.code)
			}
			if tt.reason != nil && !errors.Is(err, tt.reason) {
				t.Fatalf("error %v is not %v", err, tt.reason)
			}
		})
	}
	if CodeOf(errors.New("plain")) != CodeUnknown || CodeOf(fmt.Errorf("wrapped: %w", notFound("x"))) != CodeNotFound {
		t.Error("CodeOf does not look through wrapping")
	}
}

// Covers: E22, E28
func TestRPCTask(t *testing.T) {
	n := startedNode(t)
	n.must(SetAttributes{FlowID: "o-1", Attributes: []AttributeWrite{{Name: "status", Value: Value{Data: []byte("new")}}}}, base)
	n.must(PublishToChannel{FlowID: "o-1", Messages: []Publish{{Channel: "approve"}, {Channel: "approve"}}}, base)
	task, err := n.e.RPCTask(n.st, InvokeRPC{FlowID: "o-1", CallID: "c1", Name: "status", Input: Value{Data: []byte("q")}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := Token{Epoch: 4, FlowID: "o-1", RunID: "r1", Method: MethodRPC, CallID: "c1"}
	if task.Token != want || task.QueueSizes["approve"] != 2 || string(task.Attributes["status"].Data) != "new" || task.RPC != "status" {
		t.Fatalf("task = %+v", task)
	}
	task.Attributes["status"] = Value{}
	if string(n.st.Attributes["status"].Data) != "new" {
		t.Fatal("the task shares the state's attribute map")
	}
	for name, call := range map[string]InvokeRPC{
		"no call id":   {FlowID: "o-1", Name: "status"},
		"no name":      {FlowID: "o-1", CallID: "c"},
		"undeclared":   {FlowID: "o-1", CallID: "c", Name: "nope"},
		"unknown flow": {FlowID: "zz", CallID: "c", Name: "status"},
	} {
		if _, err := n.e.RPCTask(n.st, call, 1); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	big := New(Config{MaxPayloadBytes: 1})
	if _, err := big.RPCTask(n.st, InvokeRPC{FlowID: "o-1", CallID: "c", Name: "status", Input: Value{Data: []byte("xy")}}, 1); CodeOf(err) != CodeResourceExhausted {
		t.Errorf("oversized RPC input: %v", err)
	}
}

// Covers: E26
func TestHistoryPage(t *testing.T) {
	st := &FlowState{}
	for i := 0; i < 5; i++ {
		st.event(Record{At: base}, HistoryEvent{Type: EventChannelPublished})
	}
	page, next := st.HistoryPage(0, 2)
	if len(page) != 2 || page[0].ID != 1 || next != 2 {
		t.Fatalf("first page %+v next %d", page, next)
	}
	page, next = st.HistoryPage(next, 2)
	if len(page) != 2 || page[0].ID != 3 || next != 4 {
		t.Fatalf("second page %+v next %d", page, next)
	}
	page, next = st.HistoryPage(next, 2)
	if len(page) != 1 || page[0].ID != 5 || next != 0 {
		t.Fatalf("last page %+v next %d", page, next)
	}
	if page, next = st.HistoryPage(9, 2); page != nil || next != 0 {
		t.Fatal("page past the end")
	}
}

// A run remembers the request IDs of its last PublishRequestIDWindow
// accepted publishes, oldest forgotten first; the set is rebuilt by a
// replay, and deciding never changes the caller's state.
// Covers: E16
func TestPublish_RequestIDWindow(t *testing.T) {
	t.Parallel()
	n := startedNode(t)
	msg := []Publish{{Channel: "approve", Value: Value{Data: []byte("m")}}}
	check := false // compare the state before and after Decide (slow)
	publish := func(id string) int {
		t.Helper()
		var before []byte
		if check {
			before = mustMarshalState(n.st)
		}
		recs, err := n.e.Decide(n.st, PublishToChannel{FlowID: "o-1", RequestID: id, Messages: msg}, base)
		if err != nil {
			t.Fatalf("publish %q: %v", id, err)
		}
		if check && !bytes.Equal(before, mustMarshalState(n.st)) {
			t.Fatalf("publish %q: Decide changed its input state", id)
		}
		for _, r := range recs {
			b, err := MarshalRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			n.log = append(n.log, b)
			n.st, _ = Apply(n.st, r)
		}
		return len(recs)
	}
	for i := range PublishRequestIDWindow + 1 {
		check = i >= PublishRequestIDWindow-1
		if got := publish(fmt.Sprint("p", i)); got != 1 {
			t.Fatalf("publish p%d: %d records, want 1", i, got)
		}
	}
	if ids := n.st.PublishRequestIDs; len(ids) != PublishRequestIDWindow || ids[0] != "p1" || ids[len(ids)-1] != fmt.Sprint("p", PublishRequestIDWindow) {
		t.Fatalf("remembered %d IDs, from %q to %q", len(ids), ids[0], ids[len(ids)-1])
	}
	if got := publish(fmt.Sprint("p", PublishRequestIDWindow)); got != 0 {
		t.Errorf("retry of the newest publish: %d records, want none", got)
	}
	if got := publish("p1"); got != 0 {
		t.Errorf("retry of the oldest remembered publish: %d records, want none", got)
	}
	if got := publish("p0"); got != 1 {
		t.Errorf("publish of a forgotten ID: %d records, want 1 (it is accepted again)", got)
	}
	if got := publish(""); got != 1 || publish("") != 1 {
		t.Error("publishes without a request ID were deduplicated")
	}
	if q := len(n.st.Channels["approve"]); q != PublishRequestIDWindow+4 {
		t.Errorf("queue holds %d messages, want %d", q, PublishRequestIDWindow+4)
	}
	if live, replayed := mustMarshalState(n.st), mustMarshalState(n.replay()); !bytes.Equal(live, replayed) {
		t.Error("replay does not rebuild the remembered request IDs")
	}
}

// A run remembers the call IDs of its last RPCCallIDWindow committed RPCs,
// oldest forgotten first: a result sent again for a remembered call
// commits nothing (no second message, no second event); the set is rebuilt
// by a replay and survives the state's encoding.
// Covers: E22, E6
func TestRPC_CallIDWindow(t *testing.T) {
	t.Parallel()
	n := startedNode(t)
	result := func(id string) int {
		t.Helper()
		recs, err := n.e.Decide(n.st, RPCResult{Token: Token{Epoch: 1, FlowID: "o-1", RunID: "r1", Method: MethodRPC, CallID: id},
			Name: "status", Staged: Staged{Publishes: []Publish{{Channel: "approve", Value: Value{Data: []byte(id)}}}}}, base)
		if err != nil {
			t.Fatalf("RPC result %q: %v", id, err)
		}
		for _, r := range recs {
			b, err := MarshalRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			n.log = append(n.log, b)
			n.st, _ = Apply(n.st, r)
		}
		return len(recs)
	}
	for i := range RPCCallIDWindow + 1 {
		if got := result(fmt.Sprint("c", i)); got != 1 {
			t.Fatalf("call c%d: %d records, want 1", i, got)
		}
	}
	if ids := n.st.RPCCallIDs; len(ids) != RPCCallIDWindow || ids[0] != "c1" || ids[len(ids)-1] != fmt.Sprint("c", RPCCallIDWindow) {
		t.Fatalf("remembered %d call IDs, from %q to %q", len(ids), ids[0], ids[len(ids)-1])
	}
	events := len(n.st.History)
	if got := result(fmt.Sprint("c", RPCCallIDWindow)); got != 0 {
		t.Errorf("resent result of the newest call: %d records, want none", got)
	}
	if got := result("c1"); got != 0 {
		t.Errorf("resent result of the oldest remembered call: %d records, want none", got)
	}
	if len(n.st.History) != events || len(n.st.Channels["approve"]) != RPCCallIDWindow+1 {
		t.Errorf("resends changed the run: %d events (want %d), %d queued (want %d)",
			len(n.st.History), events, len(n.st.Channels["approve"]), RPCCallIDWindow+1)
	}
	if _, err := n.e.RPCTask(n.st, InvokeRPC{FlowID: "o-1", CallID: "c7", Name: "status"}, 1); CodeOf(err) != CodeInvalidArgument {
		t.Errorf("RPCTask with a committed call ID: %v, want INVALID_ARGUMENT", err)
	}
	live := mustMarshalState(n.st)
	if replayed := mustMarshalState(n.replay()); !bytes.Equal(live, replayed) {
		t.Error("replay does not rebuild the committed call IDs")
	}
	if round, err := UnmarshalState(live); err != nil || !reflect.DeepEqual(round.RPCCallIDs, n.st.RPCCallIDs) {
		t.Errorf("the committed call IDs do not survive the state encoding: %v", err)
	}
}

// The summary carries what ListFlows filters on; the result is available
// once the run is closed, and the close wakes WaitForFlow callers.
// Covers: E25, E26, E27, E7
func TestSummaryAndResult(t *testing.T) {
	n := startedNode(t)
	if _, ok := n.st.Result(); ok {
		t.Fatal("result of a running flow")
	}
	sum := n.st.Summary()
	if sum.FlowID != "o-1" || sum.RunID != "r1" || sum.FlowType != "order" || sum.Status != StatusRunning || !sum.StartedAt.Equal(base) {
		t.Fatalf("summary = %+v", sum)
	}
	n.effs = nil
	n.must(StopFlow{FlowID: "o-1", Kind: StopFail, Reason: "why"}, base.Add(time.Minute))
	// The running attempt's worker is told (E38), then WaitForFlow callers.
	if len(n.effs) != 2 || n.effs[0] != (CancelTask{FlowID: "o-1", RunID: "r1", StepExecID: "Reserve-1", Method: MethodExecute,
		Attempt: 1, Reason: "flow o-1 run r1 closed FAILED"}) || n.effs[1] != (NotifyClosed{FlowID: "o-1", RunID: "r1", Status: StatusFailed}) {
		t.Fatalf("effects = %+v", n.effs)
	}
	r, ok := n.st.Result()
	if !ok || r.Status != StatusFailed || r.ErrorType != ErrClientAPIFailingFlow || r.Message != "why" || !r.ClosedAt.Equal(base.Add(time.Minute)) {
		t.Fatalf("result = %+v", r)
	}
}

// Apply is total: records that do not fit the state change nothing.
// Covers: E23, W2
func TestApply_Total(t *testing.T) {
	for _, r := range sampleRecords() {
		if st, _ := Apply(nil, r); st != nil && r.Type() != "flow_started" {
			t.Errorf("%s applied to nil made a state", r.Type())
		}
		other := &FlowState{FlowID: "f1", RunID: "other", Status: StatusRunning}
		before := mustMarshalState(other)
		if st, eff := Apply(other, r); r.Type() != "flow_started" && (!bytes.Equal(mustMarshalState(st), before) || eff != nil) {
			t.Errorf("%s applied to another run changed it", r.Type())
		}
		empty := &FlowState{FlowID: "f1", RunID: "r1", Status: StatusRunning}
		Apply(empty, r) // unknown steps: must not panic
	}
}

// TestClone_Independent: changes to a clone never reach the original.
func TestClone_Independent(t *testing.T) {
	n := startedNode(t)
	n.must(PublishToChannel{FlowID: "o-1", Messages: []Publish{{Channel: "approve", Value: Value{Data: []byte("a")}}}}, base)
	n.must(TaskStarted{Token: tok(n.st, "Reserve-1", 1)}, base)
	orig := mustMarshalState(n.st)
	c := n.st.Clone()
	recs, err := n.e.Decide(c, ExecuteResult{Token: tok(c, "Reserve-1", 1), Decision: Decision{Kind: DecideMovements, Movements: []Movement{{StepType: "Await"}}},
		Staged: Staged{Publishes: []Publish{{Channel: "approve"}}, Attributes: []AttributeWrite{{Name: "status"}}}}, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		c, _ = Apply(c, r)
	}
	if !bytes.Equal(orig, mustMarshalState(n.st)) {
		t.Fatal("applying to a clone changed the original")
	}
	if bytes.Equal(orig, mustMarshalState(c)) {
		t.Fatal("the clone did not change")
	}
}

// Example of the node's loop: decide, log, apply, act.
func ExampleEngine_Decide() {
	e := New(Config{})
	var st *FlowState
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	recs, err := e.Decide(st, StartFlow{FlowID: "order-42", FlowType: "order", RunID: "run-1", StartStep: "Reserve",
		Definition: &FlowDefinition{Type: "order", Steps: map[string]StepDef{"Reserve": {}}}}, now)
	if err != nil {
		panic(err)
	}
	for _, r := range recs {
		b, _ := MarshalRecord(r) // append b to the batch; write the batch
		r, _ = UnmarshalRecord(b)
		var effects []Effect
		st, effects = Apply(st, r)
		for _, eff := range effects {
			if d, ok := eff.(DispatchTask); ok {
				fmt.Println("dispatch", d.StepExecID, d.Method, d.Attempt, d.Durability)
			}
		}
	}
	fmt.Println(st.RunID, st.Status)
	// Output:
	// dispatch Reserve-1 execute 1 ASYNC
	// run-1 RUNNING
}
