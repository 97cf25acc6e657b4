package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// The encoding of records, states and history events (format 2).
//
// Every encoded value starts with one byte that names its format:
//
//	0x02  format 2: CBOR (RFC 8949) follows
//	'{'   format 1: JSON (the first format; still decoded, never written)
//
// Format 2 is CBOR with the types' JSON field names as map keys, so the
// shapes are those of format 1 and the field tags stay the one schema; a
// Value's bytes are a CBOR byte string, copied as they are (format 1
// wrote them in base64, which made a 4 MiB value cost a 5.6 MB record and
// most of a large flow's CPU). Times are RFC 3339 text with nanoseconds
// and their offset (the zero time is null), maps are written with their
// keys sorted (core deterministic), fields tagged omitempty are left out
// when their Go value is empty, exactly as encoding/json does, and
// indefinite lengths are refused: equal values give equal bytes.
//
// A record is the CBOR array [type, flowId, runId, at, body], the body
// being the record type's map. A state is the FlowState map, an event the
// HistoryEvent map. Decoding refuses duplicate map keys and anything after
// the value; unknown keys are ignored (as format 1 did), so a later
// version may add fields.

const (
	formatJSON byte = '{'
	formatCBOR byte = 0x02
)

var (
	cborEnc = mustEncMode(cbor.EncOptions{
		Sort:          cbor.SortCoreDeterministic,
		Time:          cbor.TimeRFC3339Nano,
		OmitEmpty:     cbor.OmitEmptyGoValue,
		NilContainers: cbor.NilContainerAsNull,
		IndefLength:   cbor.IndefLengthForbidden,
	})
	cborDec = mustDecMode(cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		MaxNestedLevels:  64,
		MaxArrayElements: math.MaxInt32,
		MaxMapPairs:      math.MaxInt32,
		UTF8:             cbor.UTF8DecodeInvalid,
	})
)

func mustEncMode(o cbor.EncOptions) cbor.EncMode {
	m, err := o.EncMode()
	if err != nil {
		panic(err)
	}
	return m
}

func mustDecMode(o cbor.DecOptions) cbor.DecMode {
	m, err := o.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}

// marshalCBOR encodes v in format 2: the format byte, then v's CBOR.
func marshalCBOR(v any) ([]byte, error) {
	// The encoder writes v's CBOR into its pooled buffer and hands it to
	// w once, which copies it after the format byte: one copy of the
	// encoding, where Marshal and a prefixed copy of its result made two
	// (a 4 MiB value in a state, an event and a record was copied six
	// times per step).
	var w prefixedWriter
	if err := cborEnc.NewEncoder(&w).Encode(v); err != nil {
		return nil, err
	}
	return w.out, nil
}

// prefixedWriter keeps the format byte and a copy of the one Write it
// receives: an exactly sized format 2 value.
type prefixedWriter struct{ out []byte }

func (w *prefixedWriter) Write(p []byte) (int, error) {
	if w.out != nil {
		return 0, errors.New("engine: CBOR encoding written twice")
	}
	w.out = make([]byte, 1+len(p))
	w.out[0] = formatCBOR
	copy(w.out[1:], p)
	return len(p), nil
}

// unmarshalAny decodes b, in format 1 or 2, into v.
func unmarshalAny(b []byte, v any) error {
	if len(b) == 0 {
		return errors.New("empty")
	}
	switch b[0] {
	case formatCBOR:
		return cborDec.Unmarshal(b[1:], v)
	case formatJSON:
		return json.Unmarshal(b, v)
	}
	return fmt.Errorf("unknown format byte 0x%02x", b[0])
}

// recordV2 is a record in format 2 (a CBOR array).
type recordV2 struct {
	_      struct{} `cbor:",toarray"`
	Type   string
	FlowID string
	RunID  string
	At     time.Time
	Body   any
}

// recordV2Raw is recordV2 as decoded: the body is decoded once its type
// is known.
type recordV2Raw struct {
	_      struct{} `cbor:",toarray"`
	Type   string
	FlowID string
	RunID  string
	At     time.Time
	Body   cbor.RawMessage
}

// recordEnvelope is a record in format 1 (JSON).
type recordEnvelope struct {
	V      int             `json:"v"`
	Type   string          `json:"type"`
	FlowID string          `json:"flowId"`
	RunID  string          `json:"runId"`
	At     time.Time       `json:"at"`
	Body   json.RawMessage `json:"body"`
}

// recordFormatJSON is the "v" of a format 1 record and state.
const recordFormatJSON = 1

// ErrUnknownRecord is returned by UnmarshalRecord for a record type this
// version does not know.
var ErrUnknownRecord = errors.New("engine: unknown record type")

// MarshalRecord encodes a record (format 2); callers treat the bytes as
// opaque.
func MarshalRecord(r Record) ([]byte, error) {
	if r.Body == nil {
		return nil, errors.New("engine: marshal record: no body")
	}
	b, err := marshalCBOR(recordV2{Type: r.Type(), FlowID: r.FlowID, RunID: r.RunID, At: r.At, Body: r.Body})
	if err != nil {
		return nil, fmt.Errorf("marshal %s record: %w", r.Type(), err)
	}
	return b, nil
}

// UnmarshalRecord decodes what MarshalRecord encoded, in either format. An
// unknown format, version or record type is an error, never skipped.
func UnmarshalRecord(b []byte) (Record, error) {
	if len(b) > 0 && b[0] == formatCBOR {
		var env recordV2Raw
		if err := cborDec.Unmarshal(b[1:], &env); err != nil {
			return Record{}, fmt.Errorf("unmarshal record: %w", err)
		}
		body, err := decodeBodyAs(env.Type, env.Body, cborDec.Unmarshal)
		if err != nil {
			return Record{}, err
		}
		return Record{FlowID: env.FlowID, RunID: env.RunID, At: env.At, Body: body}, nil
	}
	var env recordEnvelope
	if len(b) == 0 || b[0] != formatJSON {
		return Record{}, errors.New("unmarshal record: unknown format")
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return Record{}, fmt.Errorf("unmarshal record: %w", err)
	}
	if env.V != recordFormatJSON {
		return Record{}, fmt.Errorf("unmarshal record: unknown format version %d", env.V)
	}
	body, err := decodeBodyAs(env.Type, env.Body, json.Unmarshal)
	if err != nil {
		return Record{}, err
	}
	return Record{FlowID: env.FlowID, RunID: env.RunID, At: env.At, Body: body}, nil
}

// decodeBodyAs decodes a record body of type typ with unmarshal.
func decodeBodyAs(typ string, b []byte, unmarshal func([]byte, any) error) (RecordBody, error) {
	decode, ok := recordTypes[typ]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownRecord, typ)
	}
	body, err := decode(b, unmarshal)
	if err != nil {
		return nil, fmt.Errorf("unmarshal %s record: %w", typ, err)
	}
	return body, nil
}

type stateEnvelope struct {
	V     int        `json:"v"`
	State *FlowState `json:"state"`
}

// MarshalState encodes a run's state (format 2; deterministically: equal
// states give equal bytes).
func MarshalState(st *FlowState) ([]byte, error) {
	if st == nil {
		return nil, errors.New("engine: marshal state: nil state")
	}
	b, err := marshalCBOR(st)
	if err != nil {
		return nil, fmt.Errorf("marshal state: %w", err)
	}
	return b, nil
}

// UnmarshalState decodes what MarshalState encoded, in either format.
func UnmarshalState(b []byte) (*FlowState, error) {
	if len(b) > 0 && b[0] == formatCBOR {
		var st FlowState
		if err := cborDec.Unmarshal(b[1:], &st); err != nil {
			return nil, fmt.Errorf("unmarshal state: %w", err)
		}
		return &st, nil
	}
	var env stateEnvelope
	if err := unmarshalAny(b, &env); err != nil {
		return nil, fmt.Errorf("unmarshal state: %w", err)
	}
	if env.V != recordFormatJSON || env.State == nil {
		return nil, fmt.Errorf("unmarshal state: unknown format version %d", env.V)
	}
	return env.State, nil
}

// MarshalHistoryEvent encodes one history event (format 2): a store that
// keeps a run's history apart from the rest of its state (events never
// change once appended) writes each event once.
func MarshalHistoryEvent(ev *HistoryEvent) ([]byte, error) {
	if ev == nil {
		return nil, errors.New("engine: marshal history event: nil event")
	}
	b, err := marshalCBOR(ev)
	if err != nil {
		return nil, fmt.Errorf("marshal history event: %w", err)
	}
	return b, nil
}

// UnmarshalHistoryEvent decodes what MarshalHistoryEvent encoded, in
// either format.
func UnmarshalHistoryEvent(b []byte) (*HistoryEvent, error) {
	var ev HistoryEvent
	if err := unmarshalAny(b, &ev); err != nil {
		return nil, fmt.Errorf("unmarshal history event: %w", err)
	}
	return &ev, nil
}
