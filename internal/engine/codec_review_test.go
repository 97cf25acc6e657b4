package engine

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// Review of issue 11's format 2 (CBOR): what the engine can hold must
// survive MarshalState/UnmarshalState, and equal states give equal bytes.

// stateWith returns a small running state whose StartedAt and TimeoutAt are
// at.
func stateWith(at time.Time) *FlowState {
	return &FlowState{FlowID: "f", RunID: "r", FlowType: "t", Status: StatusRunning,
		StartedAt: at, TimeoutAt: at,
		History: []*HistoryEvent{{ID: 1, At: at, Type: EventFlowStarted}}}
}

// A time the encoder writes must decode: encoding/json (format 1) refuses
// to write a time outside RFC 3339's years 0-9999; format 2 must refuse it
// too rather than write a state or record that no replay can read.
func TestReview_StateTimeOutsideRFC3339Years(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		b, err := MarshalState(stateWith(at))
		if err != nil {
			continue // refused at write: fine
		}
		if _, err := UnmarshalState(b); err != nil {
			t.Fatalf("MarshalState wrote a state with time %v that UnmarshalState refuses: %v", at, err)
		}
	}
}

// Times keep their instant and their encoding through a round trip in any
// location, with a monotonic reading or not; equal instants in one
// location give equal bytes.
func TestReview_StateTimesRoundTrip(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip(err)
	}
	now := time.Now() // carries a monotonic reading
	for _, at := range []time.Time{
		now, now.Round(0), now.In(ny), now.UTC(), base.In(time.FixedZone("odd", 5*3600+30*60)),
		time.Date(2025, 3, 9, 2, 30, 0, 1, ny), time.Unix(0, 1), time.Unix(-1, 999999999),
	} {
		st := stateWith(at)
		b, err := MarshalState(st)
		if err != nil {
			t.Fatalf("%v: %v", at, err)
		}
		back, err := UnmarshalState(b)
		if err != nil {
			t.Fatalf("%v: %v", at, err)
		}
		if !back.StartedAt.Equal(at) || !back.History[0].At.Equal(at) {
			t.Errorf("%v came back as %v", at, back.StartedAt)
		}
		again, err := MarshalState(back)
		if err != nil || !bytes.Equal(again, b) {
			t.Errorf("%v: bytes differ after a round trip (%v)", at, err)
		}
		if b2, _ := MarshalState(stateWith(at.Round(0))); !bytes.Equal(b2, b) {
			t.Errorf("%v: a monotonic reading changes the bytes", at)
		}
	}
}

// Invalid UTF-8 in IDs and names survives (format 1 turned it into
// U+FFFD, so replay differed from the live state in memory).
func TestReview_InvalidUTF8RoundTrips(t *testing.T) {
	st := stateWith(base)
	st.FlowID, st.RunID, st.FlowType = "f\xff", "r\xc3", "\xed\xa0\x80"
	st.StepCounters = map[string]int{"\xff": 1, "a": 2}
	st.Attributes = map[string]Value{"\xfe": {Type: "\xff", Data: []byte{0xff}}}
	b, err := MarshalState(st)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, st) {
		t.Fatalf("got %+v\nwant %+v", back, st)
	}
}

// Nil and empty slices and maps keep their difference where encoding/json
// kept it, and lose it where it lost it (omitempty): the bytes of a state
// are those of its round trip.
func TestReview_NilAndEmptyContainers(t *testing.T) {
	for _, st := range []*FlowState{
		{FlowID: "f", RunID: "r", StepCounters: map[string]int{}, Steps: []*StepExec{}, RPCCallIDs: []string{}},
		{FlowID: "f", RunID: "r", Steps: []*StepExec{{ID: "s", Input: Value{Data: []byte{}},
			Wait: &StoredWait{Conditions: []StoredCondition{}}}}},
		{FlowID: "f", RunID: "r", Steps: []*StepExec{{ID: "s", Wait: &StoredWait{}}}},
		{FlowID: "f", RunID: "r", Attributes: map[string]Value{"a": {}}, Channels: map[string][]Message{"c": {}}},
	} {
		b, err := MarshalState(st)
		if err != nil {
			t.Fatal(err)
		}
		back, err := UnmarshalState(b)
		if err != nil {
			t.Fatal(err)
		}
		again, err := MarshalState(back)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("bytes differ after a round trip: %x vs %x (%v)", b, again, err)
		}
	}
}

// The decoder refuses nesting deeper than 64 levels: no type the engine
// stores may nest deeper, and none may be recursive (a chain of causes
// would reach the limit with the data, not the schema).
func TestReview_StoredTypesNestWithinDecodeLimit(t *testing.T) {
	var depth func(t reflect.Type, path []reflect.Type) (int, bool)
	depth = func(typ reflect.Type, path []reflect.Type) (int, bool) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ == reflect.TypeFor[time.Time]() {
			return 0, true
		}
		for _, p := range path {
			if p == typ {
				return 0, false // recursive
			}
		}
		switch typ.Kind() {
		case reflect.Slice, reflect.Array:
			if typ.Elem().Kind() == reflect.Uint8 {
				return 0, true
			}
			d, ok := depth(typ.Elem(), append(path, typ))
			return d + 1, ok
		case reflect.Map:
			d, ok := depth(typ.Elem(), append(path, typ))
			return d + 1, ok
		case reflect.Struct:
			best := 0
			for i := range typ.NumField() {
				f := typ.Field(i)
				if !f.IsExported() {
					continue
				}
				d, ok := depth(f.Type, append(path, typ))
				if !ok {
					t.Errorf("recursive type through %s.%s", typ, f.Name)
					return 0, false
				}
				if f.Anonymous {
					d-- // promoted fields share the map
				}
				best = max(best, d)
			}
			return best + 1, true
		case reflect.Interface:
			t.Errorf("interface field in %v", path)
		}
		return 0, true
	}
	types := []reflect.Type{reflect.TypeFor[FlowState](), reflect.TypeFor[HistoryEvent]()}
	for _, r := range sampleRecords() {
		types = append(types, reflect.TypeOf(r.Body))
	}
	for _, typ := range types {
		d, ok := depth(typ, nil)
		if !ok || d+2 > 64 { // a record wraps its body in an array
			t.Errorf("%v nests %d levels", typ, d)
		}
		t.Logf("%v: %d levels", typ, d)
	}
}

// omitzero fields use IsZero as encoding/json does: an empty (non-nil)
// Value or Staged encodes as an absent one, in both formats, so a state
// and its round trip give the same bytes.
func TestReview_OmitZeroUsesIsZero(t *testing.T) {
	zero := &HistoryEvent{ID: 1, At: base, Type: EventRPCCompleted}
	empty := &HistoryEvent{ID: 1, At: base, Type: EventRPCCompleted,
		Input: Value{Data: []byte{}}, Output: Value{Data: []byte{}},
		Staged: Staged{Attributes: []AttributeWrite{}, Publishes: []Publish{}}}
	zb, err := MarshalHistoryEvent(zero)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := MarshalHistoryEvent(empty)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(zb, eb) {
		t.Fatalf("empty values encode differently from absent ones:\n%x\n%x", zb, eb)
	}
	zj, _ := json.Marshal(zero)
	ej, _ := json.Marshal(empty)
	if !bytes.Equal(zj, ej) {
		t.Fatalf("format 1 differs too: %s vs %s", zj, ej)
	}
}
