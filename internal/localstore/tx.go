package localstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dexzd/dexzd/internal/engine"
)

// ErrRunConflict: PutFlow was given a new run while the flow ID's latest
// run is still RUNNING (store the old run's closed state first), or a run
// that is already kept as an older run.
var ErrRunConflict = errors.New("localstore: run conflict")

// errTxDone: a Tx used after its Apply function returned.
var errTxDone = errors.New("localstore: transaction used after its Apply function returned")

// Tx is the write side of one Apply: reads see the committed state plus this
// Tx's own earlier writes. A Tx is valid only during the Apply function and
// only on its goroutine.
type Tx struct {
	b      *pebble.Batch
	puts   int
	events int // history events written
}

// Flow returns the flow ID's latest run as this batch has it, decoded
// afresh (the caller owns it). A flow ID without a run is ErrNotFound.
func (tx *Tx) Flow(flowID string) (*engine.FlowState, error) {
	if tx.b == nil {
		return nil, errTxDone
	}
	return readFlow(tx.b, flowID)
}

// PutFlow stores st as its flow ID's latest run and keeps the indexes
// current. st is encoded at once; the caller may change it afterwards.
//
// The run's history is stored apart, one key per event, each written once:
// PutFlow writes the events the store does not hold yet (all of them for a
// new run, or for a run stored before history keys) and a flow value that
// counts them, so its cost does not grow with the history. st.History must
// hold the stored events and may add more: event i (from 0) has ID i+1, a
// history shorter than the stored one is an error (history never shrinks),
// and so is a nil or misnumbered new event. The stored events are not
// compared: events never change once appended.
//
// When st's run ID differs from the stored latest run's, that run moves to
// its run key (Store.Run still finds it) and keeps its ListFlows entry and
// its history keys; it must be closed by then: a batch that terminates a
// run and starts the next one (TERMINATE_IF_RUNNING) puts the closed state
// before the new one, else ErrRunConflict. Putting a run that is already
// kept as an older run is ErrRunConflict too. An error leaves the batch as
// it was.
func (tx *Tx) PutFlow(st *engine.FlowState) error {
	if tx.b == nil {
		return errTxDone
	}
	if st == nil || st.FlowID == "" || st.RunID == "" {
		return errors.New("localstore: put flow: state without flow ID or run ID")
	}
	if len(st.History) > maxHistoryEvents {
		return fmt.Errorf("localstore: put flow %s run %s: history of %d events, at most %d",
			st.FlowID, st.RunID, len(st.History), maxHistoryEvents)
	}
	sum := st.Summary()
	indexed := runIndexed(st)
	var section []byte // the index section; nil without indexed values
	if indexed != nil {
		if err := checkIndexed(st, indexed); err != nil {
			return err
		}
		section = appendIndexed(nil, indexed)
	}
	bare := *st
	bare.History = nil
	state, err := engine.MarshalState(&bare)
	if err != nil {
		return fmt.Errorf("put flow %s: %w", st.FlowID, err)
	}
	fk := flowKey(st.FlowID)
	prev, err := readHeader(tx.b, fk)
	if err != nil {
		return fmt.Errorf("put flow %s: latest run: %w", st.FlowID, err)
	}

	if prev == nil || prev.sum.RunID != sum.RunID {
		// A new latest run: it must not be one kept as older.
		_, err := getCopy(tx.b, runKey(sum.FlowID, sum.RunID))
		switch {
		case err == nil:
			return fmt.Errorf("put flow %s run %s: %w: it is an older run", sum.FlowID, sum.RunID, ErrRunConflict)
		case !errors.Is(err, pebble.ErrNotFound):
			return fmt.Errorf("put flow %s: read run %s: %w", sum.FlowID, sum.RunID, err)
		}
	}
	moving := prev != nil && prev.sum.RunID != sum.RunID
	if moving && prev.sum.Status == engine.StatusRunning {
		return fmt.Errorf("put flow %s run %s: %w: the latest run %s is still %s",
			sum.FlowID, sum.RunID, ErrRunConflict, prev.sum.RunID, prev.sum.Status)
	}

	// The events to write: those after the stored ones. A run stored as a
	// version 1 value holds none under history keys: all are written.
	var stored, from int
	if prev != nil && !moving {
		stored, from = int(prev.events), int(prev.events)
		if prev.version == flowValueInline {
			if stored, err = inlineHistoryLen(tx.b, fk); err != nil {
				return fmt.Errorf("put flow %s: latest run: %w", st.FlowID, err)
			}
			from = 0
		}
	}
	if len(st.History) < stored {
		return fmt.Errorf("localstore: put flow %s run %s: history of %d events, the store holds %d: history never shrinks",
			sum.FlowID, sum.RunID, len(st.History), stored)
	}
	events, err := encodeEvents(st, from)
	if err != nil {
		return err
	}

	prevBig := prev != nil && prev.version == flowValueBig // bigKey(fk) holds its state
	var prevSection []byte                                 // the index section of the same run
	var prevIndexed []IndexedValue
	if prev != nil && !moving && prev.indexed != nil {
		prevSection = prev.indexed
		if prevIndexed, err = decodeIndexed(prevSection); err != nil {
			return fmt.Errorf("put flow %s: latest run's indexed values: %w: %w", st.FlowID, ErrCorrupt, err)
		}
	}
	if moving {
		// Keep the previous run readable by run ID; its list entry and
		// its history keys stay.
		prevRaw, err := getCopy(tx.b, fk)
		if err != nil {
			return fmt.Errorf("put flow %s: latest run: %w", st.FlowID, err)
		}
		rk := runKey(prev.sum.FlowID, prev.sum.RunID)
		if prevBig {
			state, err := getCopy(tx.b, bigKey(fk))
			if err != nil {
				return fmt.Errorf("put flow %s: latest run's state: %w", st.FlowID, err)
			}
			if err := tx.b.Set(bigKey(rk), state, nil); err != nil {
				return err
			}
		}
		if err := tx.b.Set(rk, prevRaw, nil); err != nil {
			return err
		}
		prev = nil
	}
	hp := historyPrefix(sum.FlowID, sum.RunID)
	for i, ev := range events {
		hk := historyKey(hp, uint32(from+i+1))
		if len(ev) > bigValueBytes {
			if err := tx.b.Set(bigKey(hk), ev, nil); err != nil {
				return err
			}
			ev = []byte{eventOutOfLine}
		}
		if err := tx.b.Set(hk, ev, nil); err != nil {
			return err
		}
	}
	tx.events += len(events)
	// The whole flow value counts, header included: the keys other flows
	// read stay within bigValueBytes whatever the IDs' lengths.
	// The out-of-line value is the inline one without the state, so its
	// length tells the inline one's without copying a large state.
	value := encodeFlowValue(&sum, uint64(len(st.History)), section, state, true)
	big := len(value)+len(state) > bigValueBytes
	if !big {
		value = encodeFlowValue(&sum, uint64(len(st.History)), section, state, false)
	}
	if err := tx.b.Set(fk, value, nil); err != nil {
		return err
	}
	switch {
	case big:
		if err := tx.b.Set(bigKey(fk), state, nil); err != nil {
			return err
		}
	case prevBig:
		if err := tx.b.Delete(bigKey(fk), nil); err != nil {
			return err
		}
	}
	tx.puts++
	if (section != nil || prevSection != nil) && !bytes.Equal(section, prevSection) {
		if err := tx.putIndexes(sum.FlowID, sum.RunID, prevIndexed, indexed); err != nil {
			return err
		}
	}
	if prev == nil || !sameSummary(&prev.sum, &sum) {
		lk := listKey(&sum)
		if prev != nil {
			if old := listKey(&prev.sum); !bytes.Equal(old, lk) {
				if err := tx.b.Delete(old, nil); err != nil {
					return err
				}
			}
		}
		if err := tx.b.Set(lk, appendSummary(nil, &sum), nil); err != nil {
			return err
		}
	}
	wasRunning := prev != nil && prev.sum.Status == engine.StatusRunning
	isRunning := sum.Status == engine.StatusRunning
	switch {
	case isRunning && !wasRunning:
		return tx.b.Set(runningKey(sum.FlowID), nil, nil)
	case wasRunning && !isRunning:
		return tx.b.Delete(runningKey(sum.FlowID), nil)
	}
	return nil
}

// encodeEvents checks and encodes st.History[from:]: event i has ID i+1.
func encodeEvents(st *engine.FlowState, from int) ([][]byte, error) {
	if from >= len(st.History) {
		return nil, nil
	}
	out := make([][]byte, 0, len(st.History)-from)
	for i, ev := range st.History[from:] {
		want := from + i + 1
		if ev == nil {
			return nil, fmt.Errorf("localstore: put flow %s run %s: history event %d is nil", st.FlowID, st.RunID, want)
		}
		if ev.ID != want {
			return nil, fmt.Errorf("localstore: put flow %s run %s: history event %d has ID %d",
				st.FlowID, st.RunID, want, ev.ID)
		}
		b, err := engine.MarshalHistoryEvent(ev)
		if err != nil {
			return nil, fmt.Errorf("put flow %s: history event %d: %w", st.FlowID, want, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// inlineHistoryLen decodes the version 1 value at key and returns the
// length of its inline history (once per run, when it is first rewritten
// as version 2).
func inlineHistoryLen(r reader, key []byte) (int, error) {
	v, err := getCopy(r, key)
	if err != nil {
		return 0, err
	}
	st, _, err := decodeFlowValue(v, nil)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return len(st.History), nil
}

// readHeader returns the header of the flow value at key, nil when there
// is none, without copying the value (its state is not kept).
func readHeader(r reader, key []byte) (*flowHeader, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	h, err := decodeFlowHeader(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	h.state = nil
	h.indexed = bytes.Clone(h.indexed) // the value's memory is released
	return &h, nil
}

// readFlow reads and decodes the latest run of flowID, its history
// included.
func readFlow(r reader, flowID string) (*engine.FlowState, error) {
	v, err := getCopy(r, flowKey(flowID))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("flow %q: %w", flowID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read flow %q: %w", flowID, err)
	}
	st, err := loadFlow(r, flowKey(flowID), v)
	if err != nil {
		return nil, fmt.Errorf("read flow %q: %w", flowID, err)
	}
	return st, nil
}

// PutFlowType records that run runID of flowID holds the latest declaration
// (definition and defaults) of flowType; the last call in log order wins.
// Store.FlowTypes reads it back, so that a process that restarts knows
// every declared type before any worker of it reconnects.
func (tx *Tx) PutFlowType(flowType, flowID, runID string) error {
	if tx.b == nil {
		return errTxDone
	}
	if flowType == "" || flowID == "" || runID == "" {
		return errors.New("localstore: put flow type: empty flow type, flow ID or run ID")
	}
	v := binary.AppendUvarint(nil, uint64(len(flowID)))
	v = append(v, flowID...)
	v = binary.AppendUvarint(v, uint64(len(runID)))
	v = append(v, runID...)
	return tx.b.Set(typeKey(flowType), v, nil)
}
