package localstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dexzd/dexzd/internal/engine"
)

// loadFlow decodes the flow value v stored at key and, for a version 2 or
// 3 value, reads its history from the run's history keys through r (and a
// version 3 value's state from bigKey(key)). r must be a consistent view
// (a batch or a snapshot) when the value may be out of line: a later
// batch rewrites bigKey in place. Errors wrap ErrCorrupt when stored data
// does not decode or does not add up.
func loadFlow(r reader, key, v []byte) (*engine.FlowState, error) {
	var big []byte
	if len(v) > 0 && (v[0] == flowValueBig || v[0] == flowValueIndexedBig) {
		var err error
		if big, err = getCopy(r, bigKey(key)); err != nil {
			if errors.Is(err, pebble.ErrNotFound) {
				err = fmt.Errorf("%w: the out-of-line state is missing", ErrCorrupt)
			}
			return nil, err
		}
	}
	st, h, err := decodeFlowValue(v, big)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if h.version != flowValueInline {
		if st.History, err = readHistory(r, st.FlowID, st.RunID, h.events); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// readHistory reads events 1..n of a run with one iterator over its history
// keys. Keys past n (a later batch's events, for a read outside a snapshot)
// are not read; a missing or misnumbered event is ErrCorrupt.
func readHistory(r reader, flowID, runID string, n uint64) ([]*engine.HistoryEvent, error) {
	if n == 0 {
		return nil, nil
	}
	hp := historyPrefix(flowID, runID)
	upper := prefixEnd(hp)
	if n < maxHistoryEvents {
		upper = historyKey(hp, uint32(n+1))
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: historyKey(hp, 1), UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("history of run %s: %w", runID, err)
	}
	out := make([]*engine.HistoryEvent, 0, n)
	for ok := it.First(); ok; ok = it.Next() {
		want := uint32(len(out) + 1)
		k := it.Key()
		if len(k) != len(hp)+4 || binary.BigEndian.Uint32(k[len(hp):]) != want {
			_ = it.Close()
			return nil, fmt.Errorf("history of run %s: %w: key %x where event %d belongs", runID, ErrCorrupt, k, want)
		}
		v, err := it.ValueAndErr()
		if err == nil && len(v) == 1 && v[0] == eventOutOfLine {
			if v, err = getCopy(r, bigKey(k)); errors.Is(err, pebble.ErrNotFound) {
				err = fmt.Errorf("%w: the out-of-line event is missing", ErrCorrupt)
			}
		}
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("history of run %s: event %d: %w", runID, want, err)
		}
		ev, err := engine.UnmarshalHistoryEvent(v)
		if err == nil && ev.ID != int(want) {
			err = fmt.Errorf("event ID %d", ev.ID)
		}
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("history of run %s: event %d: %w: %w", runID, want, ErrCorrupt, err)
		}
		out = append(out, ev)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("history of run %s: %w", runID, err)
	}
	if uint64(len(out)) != n {
		return nil, fmt.Errorf("history of run %s: %w: %d of %d events stored", runID, ErrCorrupt, len(out), n)
	}
	return out, nil
}
