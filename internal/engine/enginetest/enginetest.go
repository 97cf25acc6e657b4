// Package enginetest holds the engine's invariants as checks that any test
// can run over the records it saw committed: the golden scripts check them
// inline, and the node tests and the simulator call these so that they all
// check the same rules the same way.
//
//   - Replay equals live: the state rebuilt by applying a flow's committed
//     records (each after a MarshalRecord/UnmarshalRecord round trip, as a
//     recovery reads them) equals the live state, in its encoding and in
//     memory, and survives MarshalState/UnmarshalState.
//   - An RPC call commits at most once: no two RPCCompleted records of one
//     run carry the same call ID, whatever a worker resends.
package enginetest

import (
	"bytes"
	"fmt"
	"reflect"

	"github.com/dexzd/dexzd/internal/engine"
)

// Replay rebuilds each flow's state from recs, in order, as a recovery
// does. The map is keyed by flow ID.
func Replay(recs []engine.Record) (map[string]*engine.FlowState, error) {
	out := map[string]*engine.FlowState{}
	for i, r := range recs {
		b, err := engine.MarshalRecord(r)
		if err != nil {
			return nil, fmt.Errorf("record %d (%s): marshal: %w", i, r.Type(), err)
		}
		back, err := engine.UnmarshalRecord(b)
		if err != nil {
			return nil, fmt.Errorf("record %d (%s): unmarshal: %w", i, r.Type(), err)
		}
		out[r.FlowID], _ = engine.Apply(out[r.FlowID], back)
	}
	return out, nil
}

// CheckReplayEqualsLive returns an error unless every flow's state rebuilt
// from recs equals its live state in live (keyed by flow ID), and every
// flow that recs name has a live state.
func CheckReplayEqualsLive(live map[string]*engine.FlowState, recs []engine.Record) error {
	replayed, err := Replay(recs)
	if err != nil {
		return err
	}
	for id, rst := range replayed {
		st, ok := live[id]
		if !ok {
			return fmt.Errorf("flow %q has records but no live state", id)
		}
		if err := equalStates(id, st, rst); err != nil {
			return err
		}
	}
	for id := range live {
		if _, ok := replayed[id]; !ok {
			return fmt.Errorf("flow %q has a live state but no records", id)
		}
	}
	return nil
}

func equalStates(id string, live, replayed *engine.FlowState) error {
	lb, err := marshal(live)
	if err != nil {
		return fmt.Errorf("flow %q: live state: %w", id, err)
	}
	rb, err := marshal(replayed)
	if err != nil {
		return fmt.Errorf("flow %q: replayed state: %w", id, err)
	}
	if !bytes.Equal(lb, rb) {
		return fmt.Errorf("flow %q: replayed state differs from live state:\nlive:     %s\nreplayed: %s", id, lb, rb)
	}
	// The encoding hides some differences (JSON turns invalid UTF-8 into
	// U+FFFD): the values themselves must be equal too.
	if !reflect.DeepEqual(live, replayed) {
		return fmt.Errorf("flow %q: replayed state differs from live state in memory, though both encode to:\n%s", id, lb)
	}
	if live == nil {
		return nil
	}
	round, err := engine.UnmarshalState(lb)
	if err != nil {
		return fmt.Errorf("flow %q: decode its state: %w", id, err)
	}
	if again, _ := marshal(round); !bytes.Equal(again, lb) {
		return fmt.Errorf("flow %q: state does not survive MarshalState/UnmarshalState", id)
	}
	return nil
}

func marshal(st *engine.FlowState) ([]byte, error) {
	if st == nil {
		return nil, nil
	}
	return engine.MarshalState(st)
}

// CheckRPCAtMostOnce returns an error if two RPCCompleted records of one
// run carry the same call ID.
func CheckRPCAtMostOnce(recs []engine.Record) error {
	type call struct{ flow, run, id string }
	seen := map[call]int{}
	for i, r := range recs {
		c, ok := r.Body.(engine.RPCCompleted)
		if !ok {
			if p, isPtr := r.Body.(*engine.RPCCompleted); isPtr {
				c, ok = *p, true
			}
		}
		if !ok {
			continue
		}
		k := call{r.FlowID, r.RunID, c.CallID}
		if j, dup := seen[k]; dup {
			return fmt.Errorf("RPC call %q of flow %q run %q committed twice: records %d and %d", c.CallID, r.FlowID, r.RunID, j, i)
		}
		seen[k] = i
	}
	return nil
}
