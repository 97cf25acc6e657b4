package localstore

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dexzd/dexzd/internal/engine"
)

// bigFlow is a running flow whose state and history events carry values
// above bigValueBytes: step inputs and an attribute of 64 KiB.
func bigFlow(t testing.TB, flowID string, at time.Time) *engine.FlowState {
	t.Helper()
	big := engine.Value{Type: "json:main.Doc", Data: bytes.Repeat([]byte("L"), 64<<10)}
	st := start(t, nil, flowID, "order", "run-"+flowID, at)
	st = do(t, st, engine.TaskStarted{Token: tok(st, "Reserve-1", 1)}, at)
	st = do(t, st, engine.ExecuteResult{Token: tok(st, "Reserve-1", 1), Decision: engine.Decision{
		Kind: engine.DecideMovements, Movements: []engine.Movement{{StepType: "Charge", Input: big}}}}, at)
	return do(t, st, engine.SetAttributes{FlowID: flowID, Attributes: []engine.AttributeWrite{{Name: "status", Value: big}}}, at)
}

// inlineRanges are the key kinds that neighbouring flows read: none of
// their values may be large (issue 11: a read decompresses a value's whole
// data block).
var inlineRanges = []byte{prefixFlow, prefixRun, prefixHistory, prefixList, prefixRunning, prefixType}

func checkNoLargeInline(t testing.TB, s *Store) {
	t.Helper()
	for _, p := range inlineRanges {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{p}, UpperBound: []byte{p + 1}})
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			if n := len(it.Value()); n > bigValueBytes {
				t.Errorf("key %q holds %d bytes, above the %d kept inline", it.Key(), n, bigValueBytes)
			}
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func hasKey(t testing.TB, s *Store, key []byte) bool {
	t.Helper()
	_, err := getCopy(s.db, key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// A state and events above bigValueBytes are stored out of line and read
// back whole through every read; the keys neighbours read stay small.
func TestPutFlow_LargeValuesOutOfLine(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	st := bigFlow(t, "big", base)
	putAll(t, s, 1, st)
	readsAll(t, s, st)
	checkNoLargeInline(t, s)
	fk := flowKey("big")
	h, err := readHeader(s.db, fk)
	if err != nil || h.version != flowValueBig || !hasKey(t, s, bigKey(fk)) {
		t.Fatalf("flow value version %v, out-of-line state %v, %v", h, hasKey(t, s, bigKey(fk)), err)
	}
	if sum, err := s.Summary("big", ""); err != nil || sum.RunID != st.RunID {
		t.Fatalf("summary %+v %v", sum, err)
	}

	// One more small step: the state stays out of line, rewritten.
	st2 := do(t, st, engine.TaskStarted{Token: tok(st, "Charge-1", 1)}, base.Add(time.Second))
	putAll(t, s, nextSeq(s), st2)
	readsAll(t, s, st2)

	// The large values leave the state: it goes back inline and its
	// out-of-line copy is deleted; the events keep theirs.
	small := engine.Value{Type: "json:main.Doc", Data: []byte(`"x"`)}
	st3 := do(t, st2, engine.SetAttributes{FlowID: "big", Attributes: []engine.AttributeWrite{{Name: "status", Value: small}}}, base.Add(2*time.Second))
	st3 = do(t, st3, engine.ExecuteResult{Token: tok(st3, "Charge-1", 1), Decision: engine.Decision{
		Kind: engine.DecideGracefulComplete, Output: small}}, base.Add(3*time.Second))
	putAll(t, s, nextSeq(s), st3)
	readsAll(t, s, st3)
	if h, err := readHeader(s.db, fk); err != nil || h.version != flowValueHistory || hasKey(t, s, bigKey(fk)) {
		t.Fatalf("after shrinking: header %+v, out-of-line state left: %v (%v)", h, hasKey(t, s, bigKey(fk)), err)
	}
	checkNoLargeInline(t, s)
}

// A large closed run replaced by a new run keeps its out-of-line state
// under its run key; the new run's small state leaves none at the latest
// key. A checkpoint carries the out-of-line values.
func TestPutFlow_LargeRunMovesToItsRunKey(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	old := stop(t, bigFlow(t, "big", base), engine.StopCancel, base.Add(time.Second))
	putAll(t, s, 1, old)
	next := start(t, old, "big", "order", "run-2", base.Add(2*time.Second))
	putAll(t, s, 2, next)
	readsAll(t, s, next)
	got, err := s.Run("big", old.RunID)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, got, old)
	if hasKey(t, s, bigKey(flowKey("big"))) || !hasKey(t, s, bigKey(runKey("big", old.RunID))) {
		t.Fatal("the out-of-line state did not move with its run")
	}
	checkNoLargeInline(t, s)

	var buf bytes.Buffer
	if _, err := s.Checkpoint(&buf); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(filepath.Join(t.TempDir(), "r"), bytes.NewReader(buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	readsAll(t, r, next)
	if got, err = r.Run("big", old.RunID); err != nil {
		t.Fatal(err)
	}
	sameState(t, got, old)
}

// A flow value that says its state is out of line, without it, is corrupt.
func TestFlow_MissingOutOfLineStateIsCorrupt(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	putAll(t, s, 1, bigFlow(t, "big", base))
	if err := s.db.Delete(bigKey(flowKey("big")), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flow("big"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
}
