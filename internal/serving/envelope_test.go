package serving

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenEnvelopeV1 is the envelope pinned in testdata/envelope_v1.bin
// (envelope version 1) and envelope_format1.bin (version 1 with format 1
// records).
func goldenEnvelopeV1() []engine.Record {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	return []engine.Record{
		{FlowID: "order-\x00-1", RunID: "r1", At: at, Body: engine.FlowStarted{FlowType: "order", RequestID: "req-1"}},
		{FlowID: "order-\x00-1", RunID: "r1", At: at, Body: engine.AttributesSet{Attributes: []engine.AttributeWrite{
			{Name: "note", Value: engine.Value{Type: "string", Data: []byte(`"h\u00e9"`)}}}}},
	}
}

// goldenEnvelope is the envelope pinned in testdata/envelope.bin: every
// log batch's records are envelopes, so changing their bytes on purpose
// means a new envelopeVersion and `go test -run Envelope -update`. Its
// second step's input is the first movement's (an input reference); the
// third's is no movement's.
func goldenEnvelope() []engine.Record {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	in := engine.Value{Type: "json:order", Data: []byte(`{"id":7}`)}
	return append(goldenEnvelopeV1(),
		engine.Record{FlowID: "order-\x00-1", RunID: "r1", At: at, Body: engine.ExecuteCompleted{
			StepExecID: "a-1", Attempt: 1, Kind: engine.DecideMovements,
			Movements: []engine.Movement{{StepType: "b", Input: engine.Value{Type: "json:int", Data: []byte("5")}}, {StepType: "c", Input: in}},
			Scheduled: []string{"b-1", "c-1"}}},
		engine.Record{FlowID: "order-\x00-1", RunID: "r1", At: at, Body: engine.StepCreated{StepExecID: "c-1", StepType: "c", N: 1, Input: in}},
		engine.Record{FlowID: "order-\x00-1", RunID: "r1", At: at, Body: engine.StepCreated{StepExecID: "d-1", StepType: "d", N: 1,
			Input: engine.Value{Type: "json:order", Data: []byte(`{"id":8}`)}}},
	)
}

// Covers: G1
func TestEnvelope_Golden(t *testing.T) {
	t.Parallel()
	enc, err := encodeEnvelope(goldenEnvelope())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "envelope.bin")
	if *updateGolden {
		if err := os.WriteFile(path, enc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Envelope -update to create it)", err)
	}
	if !bytes.Equal(enc, want) {
		t.Fatalf("encodeEnvelope changed the format:\n got %x\nwant %x", enc, want)
	}
	got, err := decodeEnvelope(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, goldenEnvelope()) {
		t.Fatalf("decoded %+v\nwant %+v", got, goldenEnvelope())
	}
	// Every truncation is refused. (Bit flips are the batch checksum's job:
	// envelopes travel only inside checksummed batches, wal.Decode.)
	for n := range len(want) {
		if _, err := decodeEnvelope(want[:n]); err == nil {
			t.Fatalf("the envelope cut to %d of %d bytes decoded", n, len(want))
		}
	}
}

// TestEnvelope_DecodesEarlierVersions decodes the golden envelope as
// written before records moved to their second format (engine codec.go:
// CBOR instead of JSON) and before input references (envelope version 1):
// a log written by an earlier version still replays.
//
// Covers: G1
func TestEnvelope_DecodesEarlierVersions(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"envelope_format1.bin", "envelope_v1.bin"} {
		old, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeEnvelope(old)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, goldenEnvelopeV1()) {
			t.Fatalf("%s decoded %+v\nwant %+v", name, got, goldenEnvelopeV1())
		}
	}
}

// A step's input is logged once: the StepCreated after the movement that
// made it refers to the movement's input (a 4 MiB input made 8 MiB log
// records before). The reference resolves to the same value.
//
// Covers: G1
func TestEnvelope_StepInputLoggedOnce(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := engine.Value{Type: "json:blob", Data: bytes.Repeat([]byte("x"), 1<<20)}
	in.Data[0], in.Data[len(in.Data)-1] = '"', '"'
	for _, first := range []engine.RecordBody{
		engine.ExecuteCompleted{StepExecID: "a-1", Attempt: 1, Kind: engine.DecideMovements,
			Movements: []engine.Movement{{StepType: "b", Input: in}}, Scheduled: []string{"b-1"}},
		engine.RPCCompleted{CallID: "c", Name: "rpc", Movements: []engine.Movement{{StepType: "b", Input: in}}, Scheduled: []string{"b-1"}},
		engine.FlowStarted{FlowType: "f", StartStep: &engine.Movement{StepType: "b", Input: in}},
	} {
		recs := []engine.Record{
			{FlowID: "f", RunID: "r", At: at, Body: first},
			{FlowID: "f", RunID: "r", At: at, Body: engine.StepCreated{StepExecID: "b-1", StepType: "b", N: 1, Input: in}},
		}
		enc, err := encodeEnvelope(recs)
		if err != nil {
			t.Fatal(err)
		}
		if max := len(in.Data) + 1024; len(enc) > max {
			t.Errorf("after %T the envelope is %d bytes for one %d-byte input, want at most %d", first, len(enc), len(in.Data), max)
		}
		got, err := decodeEnvelope(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, recs) {
			t.Errorf("after %T: the decoded records differ", first)
		}
	}
}

// An input reference must name an earlier record's movement, hold a
// StepCreated without input, and appear in a version 2 envelope only.
//
// Covers: G1
func TestEnvelope_RefusesBadInputReferences(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	started, err := engine.MarshalRecord(engine.Record{FlowID: "f", RunID: "r", At: at, Body: engine.FlowStarted{FlowType: "f",
		StartStep: &engine.Movement{StepType: "b", Input: engine.Value{Type: "json:int", Data: []byte("1")}}}})
	if err != nil {
		t.Fatal(err)
	}
	created := func(in engine.Value) []byte {
		b, err := engine.MarshalRecord(engine.Record{FlowID: "f", RunID: "r", At: at, Body: engine.StepCreated{StepExecID: "b-1", StepType: "b", N: 1, Input: in}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	envelope := func(version byte, entries ...[]byte) []byte {
		b := binary.AppendUvarint([]byte{version}, uint64(len(entries)))
		for _, e := range entries {
			b = append(binary.AppendUvarint(b, uint64(len(e))), e...)
		}
		return b
	}
	ref := func(i, j byte, rec []byte) []byte { return append([]byte{entryRef, i, j}, rec...) }
	if _, err := decodeEnvelope(envelope(envelopeVersion, started, ref(0, 0, created(engine.Value{})))); err != nil {
		t.Fatalf("a good reference: %v", err)
	}
	for name, env := range map[string][]byte{
		"in version 1":          envelope(envelopeVersionNoRefs, started, ref(0, 0, created(engine.Value{}))),
		"to itself":             envelope(envelopeVersion, started, ref(1, 0, created(engine.Value{}))),
		"to no movement":        envelope(envelopeVersion, started, ref(0, 1, created(engine.Value{}))),
		"with an input":         envelope(envelopeVersion, started, ref(0, 0, created(engine.Value{Type: "json:int", Data: []byte("2")}))),
		"holding no StepCreate": envelope(envelopeVersion, started, ref(0, 0, started)),
		"cut short":             envelope(envelopeVersion, started, []byte{entryRef, 0}),
	} {
		if _, err := decodeEnvelope(env); !errors.Is(err, errBadEnvelope) {
			t.Errorf("a reference %s: err %v, want errBadEnvelope", name, err)
		}
	}
}

// Covers: G1
func FuzzDecodeEnvelope(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "envelope.bin")); err == nil {
		f.Add(b)
	}
	for _, name := range []string{"envelope_format1.bin", "envelope_v1.bin"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Add([]byte{envelopeVersion, 1, 0})
	f.Add([]byte{envelopeVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := decodeEnvelope(data)
		if err != nil {
			if !errors.Is(err, errBadEnvelope) {
				t.Fatalf("error %v does not match errBadEnvelope", err)
			}
			return
		}
		if len(recs) == 0 {
			t.Fatal("an envelope without records decoded")
		}
		enc, err := encodeEnvelope(recs)
		if err != nil {
			t.Fatalf("re-encoding a decoded envelope: %v", err)
		}
		again, err := decodeEnvelope(enc)
		if err != nil || !reflect.DeepEqual(again, recs) {
			t.Fatalf("decode(encode(decode(data))) = %+v, %v; want %+v", again, err, recs)
		}
	})
}
