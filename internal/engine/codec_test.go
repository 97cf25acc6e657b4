package engine

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// format1Records is how many of sampleRecords testdata/records.golden
// holds: the record types and fields that existed in format 1.
const format1Records = 15

// sampleRecords returns one record of every type, with every field set.
func sampleRecords() []Record {
	t0 := base
	d := 5 * time.Second
	n := 3
	opts := &StepOptions{Execute: &MethodOptions{Timeout: &d, Retry: &RetryOptions{MaxAttempts: &n}}, RecoveryStep: "R"}
	def := &FlowDefinition{Type: "order", Steps: map[string]StepDef{"A": {HasWaitFor: true, Options: opts}},
		RPCs: []string{"r"}, Attributes: []string{"a"}, Channels: []string{"c"}}
	v := Value{Type: "json:string", Data: []byte(`"x"`)}
	staged := Staged{Attributes: []AttributeWrite{{Name: "a", Value: v}}, Publishes: []Publish{{Channel: "c", Value: v}}}
	wait := &StoredWait{Mode: AnyOf, Conditions: []StoredCondition{
		{ID: "t", Kind: CondTimer, TimerIndex: 0, FireAt: t0.Add(time.Hour)},
		{Kind: CondChannel, TimerIndex: -1, Channel: "c", Bound: AtLeastAtMost, Min: 1, Max: 2}}}
	moves := []Movement{{StepType: "A", Input: v, Options: opts, SkipWaitFor: true}}
	bodies := []RecordBody{
		FlowStarted{FlowType: "order", RequestID: "q", PreviousRunID: "r0", TerminatedRunID: "r0",
			IDReusePolicy: ReuseTerminateIfRunning, StartStep: &moves[0], Definition: def, Config: opts,
			TimeoutAt: t0.Add(time.Hour), TimeoutPolicy: TimeoutCancel, Attributes: staged.Attributes,
			PublishRequestIDs: []string{"p0", "p1"}},
		DefinitionSet{Definition: def, Config: opts, Steps: []StepRedefined{
			{StepExecID: "A-1", Options: resolveOptions(DefaultOptions(), opts), HasWaitFor: true}}},
		StepCreated{StepExecID: "A-1", StepType: "A", N: 1, Input: v, ParentID: "rpc:r",
			Options: resolveOptions(DefaultOptions(), opts), HasWaitFor: true, Override: opts},
		AttemptScheduled{StepExecID: "A-1", Method: MethodExecute, Attempt: 2, FirstAt: t0, NotBefore: t0.Add(d),
			WaitForFailed: &Failure{Type: "E", Message: "m", Stack: "s"}},
		AttemptStarted{StepExecID: "A-1", Method: MethodWaitFor, Attempt: 1, Epoch: 7, Async: true, TimeoutAt: t0.Add(d)},
		AttemptFailed{StepExecID: "A-1", Method: MethodWaitFor, Attempt: 1, Duration: d, Failure: Failure{Type: "E", Message: "m", Stack: "s"},
			NextAttemptAt: t0.Add(d)},
		WaitForCompleted{StepExecID: "A-1", Attempt: 1, Duration: d, Wait: wait, Staged: staged},
		ConditionSatisfied{StepExecID: "A-1", Index: 1, Count: 2},
		WaitTimerFired{StepExecID: "A-1", Index: 0, Skipped: true},
		ExecuteCompleted{StepExecID: "A-1", Attempt: 1, Duration: d, Kind: DecideForceFail, Movements: moves, Scheduled: []string{"A-2"},
			Output: v, Reason: "r", Staged: staged},
		ChannelPublished{Messages: staged.Publishes, RequestID: "p"},
		AttributesSet{Attributes: staged.Attributes},
		RPCCompleted{CallID: "c1", Name: "r", Duration: d, Input: v, Output: v, Movements: moves, Scheduled: []string{"A-2"}, Staged: staged},
		StepEnded{StepExecID: "A-1", Reason: "r"},
		FlowClosed{CloseInfo{Status: StatusFailed, ErrorType: ErrFlowTimeout, Message: "m"}},
		// Format 2 only (format1Records counts the ones before).
		FlowStarted{FlowType: "child", RequestID: "SubFlow:f0/r0/A-1/0",
			Parent: &ParentRef{FlowID: "f0", RunID: "r0", StepExecID: "A-1", Index: 0}},
		SubFlowUpdated{StepExecID: "A-1", Index: 1, ChildRunID: "r2", Result: &Result{
			Summary: Summary{FlowID: "SubFlow:f1-A-1-0", RunID: "r2", FlowType: "child", Status: StatusFailed,
				StartedAt: t0, ClosedAt: t0.Add(d), ParentFlowID: "f1"},
			Outputs: []Output{{StepType: "A", StepExecID: "A-1", Value: v}}, ErrorType: ErrWorkerAPIFail, Message: "m"}},
		RPCLocked{CallID: "c1", Name: "r", Locks: []string{"a", "b"}, Epoch: 7},
		RPCUnlocked{CallID: "c1", Reason: "r"},
		// E34 (format 2 only)
		FlowRetried{RetryRunID: "r1.retry-2", Attempt: 2, NotBefore: t0.Add(d)},
		FlowStarted{FlowType: "order", PreviousRunID: "r1", StartStep: &moves[0], StartDelay: d,
			Retry: &FlowRetry{Policy: RetryPolicy{InitialInterval: d, Coefficient: 2, MaxAttempts: 3}, Attempt: 2,
				FirstRunID: "r1", FirstStartedAt: t0, RetriedRunID: "r1", Timeout: time.Hour},
			TimeoutAt: t0.Add(time.Hour), TimeoutPolicy: TimeoutRunHandler, TimeoutHandler: &TimeoutHandler{StepType: "A", Deadline: d}},
		TimeoutHandlerStarted{StepExecID: "A-2", DeadlineAt: t0.Add(d), Canceled: []string{"A-1"}},
		StepsCanceled{Cause: "rpc:r", CallID: "c1", Steps: []CanceledStep{
			{StepExecID: "A-1", StepType: "A", Scope: CancelFlowWide}, {StepExecID: "B-1", StepType: "B", Scope: CancelSiblings}}},
		AttemptHeartbeat{StepExecID: "A-1", Method: MethodExecute, Attempt: 2, Details: v},
		// E30 lock sets and E38 heartbeat timeouts in a step's resolved
		// options (ResolvedOptions.Rare): encoded flat, under the keys
		// they had before they moved behind one pointer.
		StepCreated{StepExecID: "A-2", StepType: "A", N: 2, Input: v, Options: resolveOptions(DefaultOptions(), &StepOptions{
			WaitFor: &MethodOptions{Locks: []string{"a"}, HeartbeatTimeout: &d},
			Execute: &MethodOptions{Locks: []string{"a", "b"}}})},
		// E32: an AnyCombination Wait with its groups, locals and user
		// events; a FORCE_COMPLETE_IF_CHANNELS_EMPTY with what Decide found.
		WaitForCompleted{StepExecID: "A-3", Attempt: 1, Duration: d,
			Wait:   &StoredWait{Mode: AnyCombination, Conditions: wait.Conditions, Groups: [][]int{{0, 1}, {1}}},
			Staged: Staged{StagedEvents: &StagedEvents{Events: []UserEvent{{Name: "e", Value: v}}}}, Locals: map[string]Value{"k": v}},
		ExecuteCompleted{StepExecID: "A-3", Attempt: 1, Duration: d, Kind: DecideForceCompleteIfChannelsEmpty, Movements: moves,
			Output: v, IfChannelsEmpty: &IfChannelsEmpty{Channels: []string{"c"}, ChannelsEmpty: true}},
		// E37 reset: the forward link on the reset run, and the reset
		// run's start with the state at the point.
		FlowReset{ResetRunID: "r2", Point: ResetPoint{Kind: ResetStepExecution, StepExecID: "A-1", BeforeExecute: true}, Reason: "fixed"},
		FlowStarted{FlowType: "order", PreviousRunID: "r1", Attributes: []AttributeWrite{{Name: "a", Value: v}},
			Reset: &ResetStart{ResetRunID: "r1", Point: ResetPoint{Kind: ResetEventTime, Time: t0}, PointEventID: 4,
				Reason: "fixed", SkipReapply: true, StepCounters: map[string]int{"A": 2}, LastMessageSeq: 3,
				Channels: map[string][]Message{"c": {{Seq: 3, Value: v}}}, Outputs: []Output{{StepType: "A", StepExecID: "A-1", Value: v}},
				GracefulRequested: true, Steps: []ResetStep{{StepExecID: "A-2", StepType: "A", N: 2, Input: v, ParentID: "A-1", Options: opts, SkipWaitFor: true}}}},
		// E37 continue-as-new: the closing run's record and the new run's start.
		FlowContinuedAsNew{NewRunID: "r1.continued-1", Trigger: ContinueDecision, Reason: "monthly", StepExecID: "A-1"},
		FlowStarted{FlowType: "order", PreviousRunID: "r1", ContinuedFrom: "r1", TimeoutAt: t0.Add(time.Hour)},
		// E37: a reset run's start that begins an execution at its
		// Execute with its WaitFor's outcome, which a reset of that run
		// rebuilds.
		FlowStarted{FlowType: "order", PreviousRunID: "r1",
			Reset: &ResetStart{ResetRunID: "r1", Point: ResetPoint{Kind: ResetStepExecution, StepExecID: "A-2", BeforeExecute: true},
				PointEventID: 5, Steps: []ResetStep{{StepExecID: "A-2", StepType: "A", N: 2, Input: v, ToExecute: true,
					Wait: &StoredWait{Mode: AllOf, Conditions: []StoredCondition{{Kind: CondTimer, FireAt: t0.Add(d)}}}}}}},
		// E37 request IDs of a client's reset and continue-as-new (left
		// out when empty, so the records above encode as before).
		FlowReset{ResetRunID: "r3", Point: ResetPoint{Kind: ResetBeginning}, RequestID: "req-1"},
		FlowStarted{FlowType: "order", PreviousRunID: "r2", Reset: &ResetStart{ResetRunID: "r2",
			Point: ResetPoint{Kind: ResetBeginning}, PointEventID: 2, RequestID: "req-1"}},
		FlowContinuedAsNew{NewRunID: "r1.continued-2", Trigger: ContinueClient, RequestID: "req-2"},
	}
	recs := make([]Record, len(bodies))
	for i, b := range bodies {
		recs[i] = Record{FlowID: "f1", RunID: "r1", At: t0.Add(time.Duration(i) * time.Second), Body: b}
	}
	return recs
}

// TestRecordCodec_RoundTrip checks that every record type survives
// MarshalRecord/UnmarshalRecord and that the sample covers every type.
func TestRecordCodec_RoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range sampleRecords() {
		seen[r.Type()] = true
		b, err := MarshalRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := UnmarshalRecord(b)
		if err != nil {
			t.Fatalf("%s: %v", r.Type(), err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Errorf("%s: round trip differs:\n got %#v\nwant %#v", r.Type(), back, r)
		}
	}
	for typ := range recordTypes {
		if !seen[typ] {
			t.Errorf("record type %q has no sample", typ)
		}
	}
}

// TestRecordCodec_Golden pins the encoding of every record type
// (testdata/records.cbor.golden, each record as its CBOR diagnostic
// notation and its bytes in hex; -update rewrites it): an accidental
// format change fails here.
func TestRecordCodec_Golden(t *testing.T) {
	var buf bytes.Buffer
	for _, r := range sampleRecords() {
		b, err := MarshalRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != formatCBOR {
			t.Fatalf("%s: format byte 0x%02x", r.Type(), b[0])
		}
		diag, err := cbor.Diagnose(b[1:])
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&buf, "# %s\n%s\n", diag, hex.EncodeToString(b))
	}
	const path = "testdata/records.cbor.golden"
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("record encoding changed; run go test -update if intended\n got:\n%s\nwant:\n%s", buf.Bytes(), want)
	}
}

// TestRecordCodec_ReadsFormat1 decodes the records of the first format
// (JSON, testdata/records.golden, as written before format 2): logs and
// snapshots written by earlier versions stay readable.
func TestRecordCodec_ReadsFormat1(t *testing.T) {
	want := sampleRecords()[:format1Records]
	data, err := os.ReadFile("testdata/records.golden")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	if len(lines) != len(want) {
		t.Fatalf("%d format 1 lines, %d samples", len(lines), len(want))
	}
	for i, line := range lines {
		got, err := UnmarshalRecord(line)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("line %d decodes as\n%#v\nwant\n%#v", i+1, got, want[i])
		}
	}
}

func TestRecordCodec_Rejects(t *testing.T) {
	good, err := MarshalRecord(sampleRecords()[len(sampleRecords())-1])
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := MarshalRecord(Record{FlowID: "f", RunID: "r", Body: StepEnded{StepExecID: "A-1"}})
	if err != nil {
		t.Fatal(err)
	}
	unknown = bytes.Replace(unknown, []byte("step_ended"), []byte("step_ender"), 1)
	for name, in := range map[string][]byte{
		"json unknown type": []byte(`{"v":1,"type":"flow_exploded","flowId":"f","runId":"r","at":"2025-01-01T00:00:00Z","body":{}}`),
		"json bad version":  []byte(`{"v":9,"type":"step_ended","flowId":"f","runId":"r","at":"2025-01-01T00:00:00Z","body":{}}`),
		"json bad body":     []byte(`{"v":1,"type":"step_ended","flowId":"f","runId":"r","at":"2025-01-01T00:00:00Z","body":{"stepExecId":7}}`),
		"unknown format":    []byte("\x00\x01"),
		"empty":             nil,
		"cbor unknown type": unknown,
		"cbor truncated":    good[:len(good)-1],
		"cbor trailing":     append(bytes.Clone(good), 0),
		"cbor not an array": {formatCBOR, 0xa0},
	} {
		if _, err := UnmarshalRecord(in); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	_, err = UnmarshalRecord([]byte(`{"v":1,"type":"flow_exploded","body":{}}`))
	if !errors.Is(err, ErrUnknownRecord) {
		t.Errorf("unknown type: got %v, want ErrUnknownRecord", err)
	}
	if _, err := UnmarshalRecord(unknown); !errors.Is(err, ErrUnknownRecord) {
		t.Errorf("unknown type (format 2): got %v, want ErrUnknownRecord", err)
	}
	if _, err := MarshalRecord(Record{}); err == nil {
		t.Error("a record without body marshalled")
	}
	if _, err := UnmarshalState([]byte(`{"v":2,"state":{}}`)); err == nil {
		t.Error("a state of an unknown version decoded")
	}
	if _, err := MarshalState(nil); err == nil {
		t.Error("a nil state marshalled")
	}
	// A map with the same key twice is refused (format 2).
	dup := []byte{formatCBOR, 0xa2}
	for _, v := range []string{"a", "b"} {
		dup = append(append(append(dup, 0x66), "flowId"...), 0x61, v[0])
	}
	if _, err := UnmarshalState(dup); err == nil {
		t.Error("a state with a duplicate key decoded")
	}
}

// TestStateCodec_LargeValueIsCopiedAsIs checks that a value's bytes cost
// their own size in an encoded state and record, not 4/3 of it (format 1
// wrote them in base64): the large-input problem of issue 11.
func TestStateCodec_LargeValueIsCopiedAsIs(t *testing.T) {
	big := Value{Type: "json:string", Data: bytes.Repeat([]byte{0xff, 'x'}, 1<<19)}
	rec := Record{FlowID: "f", RunID: "r", Body: StepCreated{StepExecID: "A-1", StepType: "A", N: 1, Input: big}}
	b, err := MarshalRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if over := len(b) - len(big.Data); over < 0 || over > 512 {
		t.Errorf("a %d-byte value makes a %d-byte record", len(big.Data), len(b))
	}
	back, err := UnmarshalRecord(b)
	if err != nil || !bytes.Equal(back.Body.(StepCreated).Input.Data, big.Data) {
		t.Fatalf("round trip: %v", err)
	}
	st := &FlowState{FlowID: "f", RunID: "r", Attributes: map[string]Value{"a": big}}
	sb, err := MarshalState(st)
	if err != nil {
		t.Fatal(err)
	}
	if over := len(sb) - len(big.Data); over < 0 || over > 512 {
		t.Errorf("a %d-byte value makes a %d-byte state", len(big.Data), len(sb))
	}
}

// Covers: W2
func TestToken_EncodeDecode(t *testing.T) {
	for _, tok := range []Token{
		{Epoch: 7, FlowID: "f/1", RunID: "r", StepExecID: "A-1", Method: MethodExecute, Attempt: 3},
		{Epoch: 1 << 40, FlowID: "f", RunID: "r", Method: MethodRPC, CallID: "c9"},
		{},
	} {
		back, err := DecodeToken(tok.Encode())
		if err != nil || back != tok {
			t.Errorf("round trip of %+v: %+v, %v", tok, back, err)
		}
	}
	good := Token{Epoch: 1, FlowID: "f", Method: MethodWaitFor, Attempt: 1}.Encode()
	for _, bad := range [][]byte{nil, {9}, good[:len(good)-1], append(append([]byte{}, good...), 0)} {
		if _, err := DecodeToken(bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("DecodeToken(%x) = %v, want ErrBadToken", bad, err)
		}
	}
}

func FuzzUnmarshalRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		b, _ := MarshalRecord(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := UnmarshalRecord(b)
		if err != nil {
			return
		}
		// A decoded record applies without panicking, to nothing and to a
		// running state.
		Apply(nil, r)
		st, _ := Apply(nil, Record{FlowID: r.FlowID, RunID: r.RunID, Body: FlowStarted{FlowType: "t"}})
		Apply(st, r)
	})
}

func FuzzDecodeToken(f *testing.F) {
	f.Add(Token{Epoch: 3, FlowID: "f", RunID: "r", StepExecID: "A-1", Method: MethodExecute, Attempt: 2}.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := DecodeToken(b)
		if err != nil {
			return
		}
		again, err := DecodeToken(tok.Encode())
		if err != nil || again != tok {
			t.Errorf("token %+v decoded from %x does not round trip: %+v, %v", tok, b, again, err)
		}
	})
}

// TestStateCodec_ReadsFormat1 decodes a state and a history event written
// in the first format (JSON): local stores and snapshots of earlier
// versions stay readable.
func TestStateCodec_ReadsFormat1(t *testing.T) {
	ev := &HistoryEvent{ID: 1, At: base, Type: EventFlowStarted, Input: Value{Type: "json:string", Data: []byte(`"x"`)}}
	st := &FlowState{FlowID: "f", RunID: "r", FlowType: "order", Status: StatusRunning, StartedAt: base,
		Attributes: map[string]Value{"a": {Type: "json:number", Data: []byte("1")}}, History: []*HistoryEvent{ev}}
	old, err := json.Marshal(stateEnvelope{V: recordFormatJSON, State: st})
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalState(old)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("format 1 state decodes as\n%#v\nwant\n%#v", got, st)
	}
	oldEv, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	gotEv, err := UnmarshalHistoryEvent(oldEv)
	if err != nil || !reflect.DeepEqual(gotEv, ev) {
		t.Errorf("format 1 event decodes as %#v, %v", gotEv, err)
	}
	newEv, err := MarshalHistoryEvent(ev)
	if err != nil || newEv[0] != formatCBOR {
		t.Fatalf("MarshalHistoryEvent: %v", err)
	}
	if gotEv, err := UnmarshalHistoryEvent(newEv); err != nil || !reflect.DeepEqual(gotEv, ev) {
		t.Errorf("format 2 event decodes as %#v, %v", gotEv, err)
	}
}
