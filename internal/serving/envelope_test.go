package serving

import (
	"bytes"
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

// goldenEnvelope is the envelope pinned in testdata/envelope.bin: every
// log batch's records are envelopes, so changing their bytes on purpose
// means a new envelopeVersion and `go test -run Envelope -update`.
func goldenEnvelope() []engine.Record {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	return []engine.Record{
		{FlowID: "order-\x00-1", RunID: "r1", At: at, Body: engine.FlowStarted{FlowType: "order", RequestID: "req-1"}},
		{FlowID: "order-\x00-1", RunID: "r1", At: at, Body: engine.AttributesSet{Attributes: []engine.AttributeWrite{
			{Name: "note", Value: engine.Value{Type: "string", Data: []byte(`"h\u00e9"`)}}}}},
	}
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

// TestEnvelope_DecodesFormat1Records decodes the golden envelope as
// written before records moved to their second format (engine codec.go:
// CBOR instead of JSON; the envelope's framing is unchanged): a log
// written by an earlier version still replays.
//
// Covers: G1
func TestEnvelope_DecodesFormat1Records(t *testing.T) {
	t.Parallel()
	old, err := os.ReadFile(filepath.Join("testdata", "envelope_format1.bin"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeEnvelope(old)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, goldenEnvelope()) {
		t.Fatalf("decoded %+v\nwant %+v", got, goldenEnvelope())
	}
}

// Covers: G1
func FuzzDecodeEnvelope(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "envelope.bin")); err == nil {
		f.Add(b)
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "envelope_format1.bin")); err == nil {
		f.Add(b)
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
