package serving

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/wal"
)

// A log record (one element of wal.Batch.Records) is an envelope holding
// every engine record of one Decide call, so that they are written and
// applied atomically, in order, and nothing else interleaves with them:
//
//	0  1  envelope version: 2 (1 is still read)
//	1  …  record count n (uvarint), at least 1
//	…  …  n times: length (uvarint), then an entry, one of
//	        engine.MarshalRecord bytes (first byte 0x02, or '{' before
//	          records moved to CBOR), or
//	        0x00, i (uvarint), j (uvarint), then the engine.MarshalRecord
//	          bytes of a StepCreated without input: its input is the input
//	          of movement j of record i (i before this one; version 2 only).
//
// The reference exists because a step's input is the movement that created
// it: ExecuteCompleted, RPCCompleted and FlowStarted keep their movements
// for history (E26) and the StepCreated records that follow carry the same
// value, so an envelope held every input twice (a 4 MiB input made an 8 MiB
// log record for each step). Each record names its own format in its first
// byte (engine codec.go), so a log holding both formats replays. Nothing may
// follow the last record. All records of one envelope belong to one flow ID
// (one Decide call addresses one flow). A malformed envelope is a corrupt
// log: it stops the writer or the replay and is never skipped.
const envelopeVersion = 2

// envelopeVersionNoRefs is the version written before input references.
const envelopeVersionNoRefs = 1

// entryRef starts an entry that refers to a movement's input.
const entryRef = 0x00

// errBadEnvelope matches every envelope decoding error.
var errBadEnvelope = errors.New("malformed log record envelope")

// movements returns the movements a record keeps for history, whose inputs
// the StepCreated records after it may refer to.
func movements(body engine.RecordBody) []engine.Movement {
	switch b := body.(type) {
	case engine.ExecuteCompleted:
		return b.Movements
	case engine.RPCCompleted:
		return b.Movements
	case engine.FlowStarted:
		if b.StartStep != nil {
			return []engine.Movement{*b.StartStep}
		}
	}
	return nil
}

// inputIndex finds, for a StepCreated, the movement among the earlier
// records of an envelope whose input equals its own: the latest such
// record, and its first such movement. Inputs are indexed by a hash of
// their type and data, so an envelope of n movements and n steps costs
// O(n) hashing, not a scan of every earlier movement per step (a result of
// 16,000 movements took 3.7 s on the sequencer that way).
type inputIndex struct {
	seed maphash.Seed
	refs map[uint64][]inputLoc
}

type inputLoc struct{ i, j int }

func newInputIndex() *inputIndex {
	return &inputIndex{seed: maphash.MakeSeed(), refs: make(map[uint64][]inputLoc)}
}

func (x *inputIndex) hash(v engine.Value) uint64 {
	var h maphash.Hash
	h.SetSeed(x.seed)
	_, _ = h.WriteString(v.Type)
	_ = h.WriteByte(0)
	_, _ = h.Write(v.Data)
	return h.Sum64()
}

// add indexes the movement inputs of recs[i].
func (x *inputIndex) add(recs []engine.Record, i int) {
	for j, m := range movements(recs[i].Body) {
		if len(m.Input.Data) == 0 {
			continue
		}
		h := x.hash(m.Input)
		x.refs[h] = append(x.refs[h], inputLoc{i, j})
	}
}

// find returns the reference for rec among the indexed records of recs
// (ok false: none, or rec is no StepCreated with an input).
func (x *inputIndex) find(recs []engine.Record, rec engine.Record) (i, j int, ok bool) {
	sc, isSC := rec.Body.(engine.StepCreated)
	if !isSC || len(sc.Input.Data) == 0 {
		return 0, 0, false
	}
	locs := x.refs[x.hash(sc.Input)]
	// locs ascend by record, then movement: the first equal one from the
	// end names the latest record; go on back for its first movement.
	for k := len(locs) - 1; k >= 0; k-- {
		l := locs[k]
		if ok && l.i != i {
			break
		}
		m := movements(recs[l.i].Body)[l.j]
		if m.Input.Type == sc.Input.Type && bytes.Equal(m.Input.Data, sc.Input.Data) {
			i, j, ok = l.i, l.j, true
		}
	}
	return i, j, ok
}

// encodeEnvelope encodes the records of one Decide call.
func encodeEnvelope(recs []engine.Record) ([]byte, error) {
	if len(recs) == 0 {
		return nil, errors.New("encode envelope: no records")
	}
	entries := make([][]byte, len(recs))
	size := 1 + binary.MaxVarintLen64
	refs := newInputIndex()
	for k, r := range recs {
		var hdr []byte
		if i, j, ok := refs.find(recs, r); ok {
			sc := r.Body.(engine.StepCreated)
			sc.Input = engine.Value{}
			r.Body = sc
			hdr = binary.AppendUvarint(binary.AppendUvarint([]byte{entryRef}, uint64(i)), uint64(j))
		}
		data, err := engine.MarshalRecord(r)
		if err != nil {
			return nil, fmt.Errorf("encode envelope: %w", err)
		}
		if hdr != nil {
			data = append(hdr, data...)
		}
		entries[k] = data
		size += binary.MaxVarintLen64 + len(data)
		refs.add(recs, k)
	}
	b := make([]byte, 0, size)
	b = append(b, envelopeVersion)
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b, nil
}

// decodeEnvelope decodes what encodeEnvelope encoded, in either version.
func decodeEnvelope(b []byte) ([]engine.Record, error) {
	if len(b) == 0 || (b[0] != envelopeVersion && b[0] != envelopeVersionNoRefs) {
		return nil, fmt.Errorf("%w: unknown version", errBadEnvelope)
	}
	refs := b[0] == envelopeVersion
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad record count", errBadEnvelope)
	}
	b = b[k:]
	recs := make([]engine.Record, 0, n)
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: record %d of %d is truncated", errBadEnvelope, i, n)
		}
		r, err := decodeEntry(b[k:k+int(l)], recs, refs)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d of %d: %w", errBadEnvelope, i, n, err)
		}
		recs = append(recs, r)
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last record", errBadEnvelope, len(b))
	}
	return recs, nil
}

// decodeEntry decodes one entry after the records earlier (refs: input
// references are allowed).
func decodeEntry(e []byte, earlier []engine.Record, refs bool) (engine.Record, error) {
	if len(e) == 0 || e[0] != entryRef {
		return engine.UnmarshalRecord(e)
	}
	if !refs {
		return engine.Record{}, errors.New("an input reference in a version 1 envelope")
	}
	e = e[1:]
	i, k := binary.Uvarint(e)
	if k <= 0 || i >= uint64(len(earlier)) {
		return engine.Record{}, errors.New("the input reference names no earlier record")
	}
	e = e[k:]
	j, k := binary.Uvarint(e)
	ms := movements(earlier[i].Body)
	if k <= 0 || j >= uint64(len(ms)) {
		return engine.Record{}, fmt.Errorf("the input reference names no movement of record %d", i)
	}
	r, err := engine.UnmarshalRecord(e[k:])
	if err != nil {
		return engine.Record{}, err
	}
	sc, ok := r.Body.(engine.StepCreated)
	if !ok || !sc.Input.IsZero() {
		return engine.Record{}, fmt.Errorf("an input reference holds a %s record with an input, not a StepCreated without one", r.Type())
	}
	sc.Input = ms[j].Input
	r.Body = sc
	return r, nil
}

// applied is what applying one batch to the store produced.
type applied struct {
	effects []engine.Effect
	// states are the committed states of the flows the batch touched, as
	// of its end.
	states map[string]*engine.FlowState
	// envelopes counts the batch's envelopes per flow ID.
	envelopes map[string]int
	// flows counts the batch's records for the metrics (flowcounts.go).
	flows FlowCounts
}

// applyBatch applies one log batch to the store (T1): every envelope's
// records go through engine.Apply on the committed states, in order, and the
// result is stored atomically with the batch's sequence number. A fence
// batch only advances the position. It returns the effects and the touched
// states; replay ignores them.
func applyBatch(store flowstore.Store, b wal.Batch) (applied, error) {
	return applyBatchWith(store, b, nil)
}

// applyBatchWith is applyBatch with known: the records of envelopes this
// process encoded itself (the sequencer's), which need no decoding; nil, or
// a nil answer, decodes.
func applyBatchWith(store flowstore.Store, b wal.Batch, known func(raw []byte) []engine.Record) (applied, error) {
	out := applied{states: map[string]*engine.FlowState{}, envelopes: map[string]int{}}
	err := store.Apply(b.Seq, func(tx flowstore.Tx) error {
		var declared map[string][2]string // flow type -> the run that took its declaration last
		for i, raw := range b.Records {
			recs, err := decodeKnown(raw, known)
			if err != nil {
				return fmt.Errorf("batch %d record %d: %w", b.Seq, i, err)
			}
			flowID := recs[0].FlowID
			out.envelopes[flowID]++
			for _, rec := range recs {
				st, ok := out.states[rec.FlowID]
				if !ok {
					var err error
					if st, err = tx.Flow(rec.FlowID); err != nil {
						return fmt.Errorf("batch %d: read flow %q: %w", b.Seq, rec.FlowID, err)
					}
				}
				if _, ok := rec.Body.(engine.FlowStarted); ok && st != nil && st.RunID != rec.RunID {
					// The previous run ends here (closed by the same Decide
					// under TERMINATE_IF_RUNNING, or long closed): store its
					// final state before the new run replaces it as latest.
					if err := tx.PutFlow(st); err != nil {
						return fmt.Errorf("batch %d: store flow %q: %w", b.Seq, st.FlowID, err)
					}
				}
				// Apply is total; a continuation's start that meets no
				// carried state would start an empty run (E37).
				if err := engine.CheckApply(st, rec); err != nil {
					return fmt.Errorf("batch %d record %d: corrupt log: %w", b.Seq, i, err)
				}
				st, eff := engine.Apply(st, rec)
				if typ := declares(rec, st); typ != "" {
					if declared == nil {
						declared = map[string][2]string{}
					}
					declared[typ] = [2]string{rec.FlowID, rec.RunID}
				}
				out.flows.Count(rec.Body)
				out.effects = append(out.effects, eff...)
				if st != nil {
					out.states[rec.FlowID] = st
				}
			}
		}
		for _, st := range out.states {
			if err := tx.PutFlow(st); err != nil {
				return fmt.Errorf("batch %d: store flow %q: %w", b.Seq, st.FlowID, err)
			}
		}
		for typ, ids := range declared {
			if err := tx.PutFlowType(typ, ids[0], ids[1]); err != nil {
				return fmt.Errorf("batch %d: store flow type %q: %w", b.Seq, typ, err)
			}
		}
		return nil
	})
	if err != nil {
		return applied{}, fmt.Errorf("apply batch %d: %w", b.Seq, err)
	}
	return out, nil
}

// declares returns the flow type whose declaration rec gave its run (a
// start with a definition, or a definition set later), "" for any other
// record. st is the run's state after rec. The store remembers the run per
// type (StoreTx.PutFlowType), so that a restarted process knows every type
// declared before, with the latest declaration, before any worker of it
// reconnects (Core.Recover).
func declares(rec engine.Record, st *engine.FlowState) string {
	switch b := rec.Body.(type) {
	case engine.FlowStarted:
		if b.Definition != nil {
			return b.FlowType
		}
	case engine.DefinitionSet:
		if st != nil && b.Definition != nil {
			return st.FlowType
		}
	}
	return ""
}

// decodeKnown returns the records of the envelope raw: known's, else
// decoded.
func decodeKnown(raw []byte, known func([]byte) []engine.Record) ([]engine.Record, error) {
	if known != nil {
		if recs := known(raw); recs != nil {
			return recs, nil
		}
	}
	return decodeEnvelope(raw)
}
