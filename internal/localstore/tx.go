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
	b    *pebble.Batch
	puts int
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
// When st's run ID differs from the stored latest run's, that run moves to
// its run key (Store.Run still finds it) and keeps its ListFlows entry; it
// must be closed by then: a batch that terminates a run and starts the next
// one (TERMINATE_IF_RUNNING) puts the closed state before the new one, else
// ErrRunConflict. Putting a run that is already kept as an older run is
// ErrRunConflict too.
func (tx *Tx) PutFlow(st *engine.FlowState) error {
	if tx.b == nil {
		return errTxDone
	}
	if st == nil || st.FlowID == "" || st.RunID == "" {
		return errors.New("localstore: put flow: state without flow ID or run ID")
	}
	sum := st.Summary()
	state, err := engine.MarshalState(st)
	if err != nil {
		return fmt.Errorf("put flow %s: %w", st.FlowID, err)
	}
	fk := flowKey(st.FlowID)
	prev, err := readHeader(tx.b, fk)
	if err != nil {
		return fmt.Errorf("put flow %s: latest run: %w", st.FlowID, err)
	}

	if prev == nil || prev.RunID != sum.RunID {
		// A new latest run: it must not be one kept as older.
		_, err := getCopy(tx.b, runKey(sum.FlowID, sum.RunID))
		switch {
		case err == nil:
			return fmt.Errorf("put flow %s run %s: %w: it is an older run", sum.FlowID, sum.RunID, ErrRunConflict)
		case !errors.Is(err, pebble.ErrNotFound):
			return fmt.Errorf("put flow %s: read run %s: %w", sum.FlowID, sum.RunID, err)
		}
	}
	if prev != nil && prev.RunID != sum.RunID {
		if prev.Status == engine.StatusRunning {
			return fmt.Errorf("put flow %s run %s: %w: the latest run %s is still %s",
				sum.FlowID, sum.RunID, ErrRunConflict, prev.RunID, prev.Status)
		}
		// Keep the previous run readable by run ID; its list entry stays.
		prevRaw, err := getCopy(tx.b, fk)
		if err != nil {
			return fmt.Errorf("put flow %s: latest run: %w", st.FlowID, err)
		}
		if err := tx.b.Set(runKey(prev.FlowID, prev.RunID), prevRaw, nil); err != nil {
			return err
		}
		prev = nil
	}

	if err := tx.b.Set(fk, encodeFlowValue(&sum, state), nil); err != nil {
		return err
	}
	tx.puts++
	if prev == nil || !sameSummary(prev, &sum) {
		lk := listKey(&sum)
		if prev != nil {
			if old := listKey(prev); !bytes.Equal(old, lk) {
				if err := tx.b.Delete(old, nil); err != nil {
					return err
				}
			}
		}
		if err := tx.b.Set(lk, appendSummary(nil, &sum), nil); err != nil {
			return err
		}
	}
	wasRunning := prev != nil && prev.Status == engine.StatusRunning
	isRunning := sum.Status == engine.StatusRunning
	switch {
	case isRunning && !wasRunning:
		return tx.b.Set(runningKey(sum.FlowID), nil, nil)
	case wasRunning && !isRunning:
		return tx.b.Delete(runningKey(sum.FlowID), nil)
	}
	return nil
}

// readHeader returns the summary of the flow value at key, nil when there
// is none, without copying the value.
func readHeader(r reader, key []byte) (*engine.Summary, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	sum, _, err := decodeFlowHeader(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return &sum, nil
}

// readFlow reads and decodes the latest run of flowID.
func readFlow(r reader, flowID string) (*engine.FlowState, error) {
	v, err := getCopy(r, flowKey(flowID))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("flow %q: %w", flowID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read flow %q: %w", flowID, err)
	}
	st, err := decodeFlowValue(v)
	if err != nil {
		return nil, fmt.Errorf("read flow %q: %w: %w", flowID, ErrCorrupt, err)
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
