package localstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dexzd/dexzd/internal/engine"
)

// Reads outside Apply see the committed state: everything of the batches up
// to Applied() (as of the read), nothing of a batch still being applied.

// Flow returns the latest run of flowID, decoded afresh (the caller owns
// it). A flow ID without a run is ErrNotFound.
func (s *Store) Flow(flowID string) (*engine.FlowState, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	snap := s.db.NewSnapshot() // a state out of line is rewritten in place
	defer snap.Close()
	return readFlow(snap, flowID)
}

// Run returns the run runID of flowID, the latest or an older one; an
// empty runID means the latest. An unknown flow ID or run is ErrNotFound.
func (s *Store) Run(flowID, runID string) (*engine.FlowState, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	snap := s.db.NewSnapshot() // a state out of line is rewritten in place
	defer snap.Close()
	key, v, err := runValue(snap, flowID, runID)
	if err != nil {
		return nil, err
	}
	st, err := loadFlow(snap, key, v)
	if err != nil {
		return nil, fmt.Errorf("read flow %q run %q: %w", flowID, runID, err)
	}
	return st, nil
}

// Summary returns the summary of run runID of flowID (empty: the latest)
// from the flow value's header, without decoding the state or reading the
// history. Times are in UTC. An unknown flow ID or run is ErrNotFound.
func (s *Store) Summary(flowID, runID string) (engine.Summary, error) {
	if err := s.enter(); err != nil {
		return engine.Summary{}, err
	}
	defer s.leave()
	_, v, err := runValue(s.db, flowID, runID)
	if err != nil {
		return engine.Summary{}, err
	}
	h, err := decodeFlowHeader(v)
	if err != nil {
		return engine.Summary{}, fmt.Errorf("read flow %q run %q: %w: %w", flowID, runID, ErrCorrupt, err)
	}
	return h.sum, nil
}

// runValue returns the key and the stored value of a run, reading the
// latest run first and the older runs second (a run only ever moves from
// the latest key to a run key).
func runValue(r reader, flowID, runID string) (key, v []byte, err error) {
	key = flowKey(flowID)
	v, err = getCopy(r, key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return nil, nil, fmt.Errorf("flow %q: %w", flowID, ErrNotFound)
	case err != nil:
		return nil, nil, fmt.Errorf("read flow %q: %w", flowID, err)
	}
	if runID == "" {
		return key, v, nil
	}
	h, err := decodeFlowHeader(v)
	if err != nil {
		return nil, nil, fmt.Errorf("read flow %q: %w: %w", flowID, ErrCorrupt, err)
	}
	if h.sum.RunID == runID {
		return key, v, nil
	}
	key = runKey(flowID, runID)
	v, err = getCopy(r, key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return nil, nil, fmt.Errorf("flow %q run %q: %w", flowID, runID, ErrNotFound)
	case err != nil:
		return nil, nil, fmt.Errorf("read flow %q run %q: %w", flowID, runID, err)
	}
	return key, v, nil
}

// RunningFlows calls fn with every RUNNING flow (the latest run of its flow
// ID), in flow ID order, from one consistent view of the committed state.
// fn owns the state it is given. An error from fn stops the iteration and
// is returned as is. After a restart the node uses this to re-arm timers,
// queue pending tasks and build RecoverAttempts.
func (s *Store) RunningFlows(fn func(st *engine.FlowState) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIter(&pebble.IterOptions{
		LowerBound: []byte{prefixRunning}, UpperBound: []byte{prefixRunning + 1}})
	if err != nil {
		return fmt.Errorf("running flows: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		flowID := string(it.Key()[1:])
		st, err := readFlow(snap, flowID)
		if err != nil {
			return fmt.Errorf("running flows: %w", err)
		}
		if !st.Running() {
			return fmt.Errorf("running flows: flow %q run %s is %s but indexed as running: %w",
				flowID, st.RunID, st.Status, ErrCorrupt)
		}
		if err := fn(st); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("running flows: %w", err)
	}
	return nil
}

// FlowTypes calls fn, in flow type order, with every flow type a run
// recorded a declaration for (Tx.PutFlowType) and the flow ID and run ID of
// the run that recorded the latest one. An error from fn stops the
// iteration and is returned as is.
func (s *Store) FlowTypes(fn func(flowType, flowID, runID string) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte{prefixType}, UpperBound: []byte{prefixType + 1}})
	if err != nil {
		return fmt.Errorf("flow types: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		flowType := string(it.Key()[1:])
		var ids [2]string
		b := it.Value()
		for i := range ids {
			n, w := binary.Uvarint(b)
			if w <= 0 || n > uint64(len(b)-w) {
				return fmt.Errorf("flow types: type %q: %w: %w", flowType, ErrCorrupt, errShort)
			}
			ids[i] = string(b[w : w+int(n)])
			b = b[w+int(n):]
		}
		if len(b) != 0 || ids[0] == "" || ids[1] == "" {
			return fmt.Errorf("flow types: type %q: %w: malformed value", flowType, ErrCorrupt)
		}
		if err := fn(flowType, ids[0], ids[1]); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("flow types: %w", err)
	}
	return nil
}
