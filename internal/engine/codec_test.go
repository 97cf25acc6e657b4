package engine

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"
)

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
// (testdata/records.golden; -update rewrites it): an accidental format
// change fails here.
func TestRecordCodec_Golden(t *testing.T) {
	var buf bytes.Buffer
	for _, r := range sampleRecords() {
		b, err := MarshalRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	const path = "testdata/records.golden"
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
	// Every golden line decodes.
	for _, line := range bytes.Split(bytes.TrimSpace(want), []byte("\n")) {
		if _, err := UnmarshalRecord(line); err != nil {
			t.Errorf("golden line does not decode: %v", err)
		}
	}
}

func TestRecordCodec_Rejects(t *testing.T) {
	good, err := MarshalRecord(sampleRecords()[0])
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string][]byte{
		"unknown type": []byte(`{"v":1,"type":"flow_exploded","flowId":"f","runId":"r","at":"2025-01-01T00:00:00Z","body":{}}`),
		"bad version":  bytes.Replace(good, []byte(`"v":1`), []byte(`"v":9`), 1),
		"not json":     []byte("\x00\x01"),
		"bad body":     []byte(`{"v":1,"type":"step_ended","flowId":"f","runId":"r","at":"2025-01-01T00:00:00Z","body":{"stepExecId":7}}`),
	} {
		if _, err := UnmarshalRecord(in); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	_, err = UnmarshalRecord([]byte(`{"v":1,"type":"flow_exploded","body":{}}`))
	if !errors.Is(err, ErrUnknownRecord) {
		t.Errorf("unknown type: got %v, want ErrUnknownRecord", err)
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
