package serving

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
)

// Random envelopes of movement-bearing records and StepCreated records whose
// inputs collide in type or data: decode(encode(x)) == x, and re-encoding
// the decoded records gives the same bytes (a standby or a recovery sees
// what the live process applied).
func TestEnvelope_RoundTripRandom(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rng := rand.New(rand.NewPCG(7, 7))
	vals := []engine.Value{
		{Type: "json:a", Data: []byte("1")}, {Type: "json:b", Data: []byte("1")}, {Type: "", Data: []byte("1")},
		{Type: "json:a", Data: []byte("2")}, {Type: "json:a"}, {}, {Type: "json:a", Data: []byte{}},
		{Type: "json:a", Data: bytes.Repeat([]byte("x"), 20000)},
	}
	pick := func() engine.Value { return vals[rng.IntN(len(vals))] }
	movs := func() []engine.Movement {
		n := rng.IntN(4)
		var ms []engine.Movement
		for range n {
			ms = append(ms, engine.Movement{StepType: "s", Input: pick()})
		}
		return ms
	}
	for iter := range 20000 {
		n := 1 + rng.IntN(8)
		var recs []engine.Record
		for range n {
			var body engine.RecordBody
			switch rng.IntN(5) {
			case 0:
				body = engine.ExecuteCompleted{StepExecID: "a", Attempt: 1, Kind: engine.DecideMovements, Movements: movs()}
			case 1:
				body = engine.RPCCompleted{CallID: "c", Name: "n", Input: pick(), Output: pick(), Movements: movs()}
			case 2:
				fs := engine.FlowStarted{FlowType: "f"}
				if rng.IntN(2) == 0 {
					fs.StartStep = &engine.Movement{StepType: "s", Input: pick()}
				}
				body = fs
			default:
				body = engine.StepCreated{StepExecID: fmt.Sprint("s-", iter), StepType: "s", N: 1, Input: pick()}
			}
			recs = append(recs, engine.Record{FlowID: "f", RunID: "r", At: at, Body: body})
		}
		enc, err := encodeEnvelope(recs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeEnvelope(enc)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		// Compare against a v1-style round trip (each record alone) so
		// that codec normalisations (nil vs empty) are not counted.
		for k, r := range recs {
			b, err := engine.MarshalRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			want, err := engine.UnmarshalRecord(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got[k], want) {
				t.Fatalf("iter %d record %d:\n got %#v\nwant %#v", iter, k, got[k], want)
			}
		}
		enc2, err := encodeEnvelope(got)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("iter %d: re-encoding differs (%v)", iter, err)
		}
	}
}

// Encoding an envelope costs about as much as encoding its records: one
// ExecuteCompleted with m small distinct movements (a fan-out over items,
// 16,000 movements are ~0.5 MB of an 8 MiB request) and its m StepCreated
// records. The first version 2 encoder compared each StepCreated with
// every earlier movement, O(m^2), and failed this (3.7 s for m=16,000 on
// the shared VM, against 34 ms for the records). Timed three times, the
// best counting, so a busy machine does not fail it.
func TestEnvelope_EncodeIsLinear(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const m = 16000
	ms := make([]engine.Movement, m)
	recs := []engine.Record{{FlowID: "f", RunID: "r", At: at}}
	for i := range ms {
		ms[i] = engine.Movement{StepType: "s", Input: engine.Value{Type: "json:n", Data: fmt.Appendf(nil, "%08d", i)}}
	}
	recs[0].Body = engine.ExecuteCompleted{StepExecID: "a", Attempt: 1, Kind: engine.DecideMovements, Movements: ms}
	for i := range ms {
		recs = append(recs, engine.Record{FlowID: "f", RunID: "r", At: at, Body: engine.StepCreated{StepExecID: fmt.Sprint("s-", i), StepType: "s", N: 1, Input: ms[i].Input}})
	}
	var records, envelope time.Duration
	for try := 0; try < 3; try++ {
		start := time.Now()
		for _, r := range recs {
			if _, err := engine.MarshalRecord(r); err != nil {
				t.Fatal(err)
			}
		}
		records = time.Since(start)
		start = time.Now()
		if _, err := encodeEnvelope(recs); err != nil {
			t.Fatal(err)
		}
		envelope = time.Since(start)
		if envelope <= 5*records+50*time.Millisecond {
			t.Logf("m=%d: records encoded one by one %v, envelope %v", m, records, envelope)
			return
		}
	}
	t.Errorf("encoding the envelope took %v, its records alone %v: more than 5 times", envelope, records)
}
