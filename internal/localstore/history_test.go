package localstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"

	"github.com/dexzd/dexzd/internal/engine"
)

// encodeFlowValueV1 is the flow value encoding of store format 1, written
// out by hand: version byte 1, the uvarint summary length, the summary,
// then engine.MarshalState's bytes of the whole state, history included.
func encodeFlowValueV1(s *engine.Summary, state []byte) []byte {
	sum := appendSummary(nil, s)
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(len(sum)))
	b = append(b, sum...)
	return append(b, state...)
}

// flowValueV1 is st's whole state as a format 1 flow value.
func flowValueV1(t testing.TB, st *engine.FlowState) []byte {
	t.Helper()
	b, err := engine.MarshalState(st)
	if err != nil {
		t.Fatal(err)
	}
	sum := st.Summary()
	return encodeFlowValueV1(&sum, b)
}

// bareFlow is a running flow without history.
func bareFlow(flowID, runID string) *engine.FlowState {
	return &engine.FlowState{FlowID: flowID, RunID: runID, FlowType: "order",
		Status: engine.StatusRunning, StartedAt: base}
}

// batchWrites returns the keys the batch being built sets or deletes, in
// order, as "set KEY" / "del KEY" (%q).
func batchWrites(t testing.TB, tx *Tx) []string {
	t.Helper()
	var out []string
	r := batchrepr.Read(tx.b.Repr())
	for {
		kind, k, _, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		op := "set"
		if kind == pebble.InternalKeyKindDelete {
			op = "del"
		}
		out = append(out, fmt.Sprintf("%s %q", op, k))
	}
}

// historyKeys returns the history keys of a run in the store, with their
// values.
func historyKeys(t testing.TB, s *Store, flowID, runID string) map[string]string {
	t.Helper()
	hp := historyPrefix(flowID, runID)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: hp, UpperBound: prefixEnd(hp)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	return out
}

// readsAll checks every read that returns a state against want.
func readsAll(t testing.TB, s *Store, want *engine.FlowState) {
	t.Helper()
	got, err := s.Flow(want.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, got, want)
	for _, runID := range []string{"", want.RunID} {
		got, err := s.Run(want.FlowID, runID)
		if err != nil {
			t.Fatal(err)
		}
		sameState(t, got, want)
	}
	if err := s.Apply(nextSeq(s), func(tx *Tx) error {
		got, err := tx.Flow(want.FlowID)
		if err != nil {
			return err
		}
		sameState(t, got, want)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want.Running() {
		found := false
		if err := s.RunningFlows(func(st *engine.FlowState) error {
			if st.FlowID == want.FlowID {
				sameState(t, st, want)
				found = true
			}
			return nil
		}); err != nil || !found {
			t.Fatalf("RunningFlows: found %v, %v", found, err)
		}
	}
}

func nextSeq(s *Store) uint64 {
	seq, ok := s.Applied()
	if !ok {
		return 1
	}
	return seq + 1
}

// Covers: E26 (a run's history reads back whole from the store)
func TestPutFlow_HistoryRoundTrip(t *testing.T) {
	t.Parallel()
	one := start(t, nil, "one", "order", "r", base)
	if len(one.History) != 1 {
		t.Fatalf("a started flow has %d events, want 1", len(one.History))
	}
	many := richFlow(t, "many", base)
	appendEvents(many, 300, base)
	for _, st := range []*engine.FlowState{bareFlow("none", "r"), one, many} {
		t.Run(st.FlowID, func(t *testing.T) {
			t.Parallel()
			s := openStore(t, t.TempDir())
			putAll(t, s, 1, st)
			readsAll(t, s, st)
			if n := len(historyKeys(t, s, st.FlowID, st.RunID)); n != len(st.History) {
				t.Fatalf("%d history keys, want %d", n, len(st.History))
			}
			// The flow value counts the events and holds no history.
			v, err := getCopy(s.db, flowKey(st.FlowID))
			if err != nil {
				t.Fatal(err)
			}
			bare, h, err := decodeFlowValue(v, nil)
			if err != nil || h.version != flowValueHistory || h.events != uint64(len(st.History)) || bare.History != nil {
				t.Fatalf("flow value: version %d, %d events, %d inline, %v", h.version, h.events, len(bare.History), err)
			}
			sum, err := s.Summary(st.FlowID, "")
			if err != nil || !sameSummary(&sum, new(st.Summary())) {
				t.Fatalf("summary %+v %v", sum, err)
			}
			// More events later, in two puts of one batch.
			next := st.Clone()
			appendEvents(next, 2, base)
			later := next.Clone()
			appendEvents(later, 3, base)
			putAll(t, s, nextSeq(s), next, later)
			readsAll(t, s, later)
		})
	}
}

// The state a run had when it was replaced stays readable, history
// included, and its history keys are left as they were.
func TestPutFlow_OlderRunKeepsItsHistory(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	r1 := richFlow(t, "o", base)
	appendEvents(r1, 50, base)
	putAll(t, s, 1, r1)
	r1 = stop(t, r1, engine.StopCancel, base.Add(time.Minute))
	putAll(t, s, 2, r1)
	keys1 := historyKeys(t, s, "o", r1.RunID)
	r2 := start(t, r1, "o", "order", "r2", base.Add(time.Hour))
	appendEvents(r2, 5, base)
	putAll(t, s, 3, r2)

	old, err := s.Run("o", r1.RunID)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, old, r1)
	readsAll(t, s, r2)
	if got := historyKeys(t, s, "o", r1.RunID); fmt.Sprint(got) != fmt.Sprint(keys1) {
		t.Fatalf("the older run's history keys changed: %d keys, had %d", len(got), len(keys1))
	}
	if n := len(historyKeys(t, s, "o", "r2")); n != len(r2.History) {
		t.Fatalf("new run: %d history keys, want %d", n, len(r2.History))
	}
}

// TERMINATE_IF_RUNNING: one batch appends the old run's last events and
// starts the new run; the batch reads the new run, the store both.
func TestPutFlow_TerminateAndStartInOneBatchKeepBothHistories(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	r1 := richFlow(t, "o", base)
	putAll(t, s, 1, r1)
	recs, err := eng.Decide(r1, engine.StartFlow{FlowID: "o", FlowType: "order", RunID: "r2",
		StartStep: "Reserve", Definition: orderDef(), IDReusePolicy: engine.ReuseTerminateIfRunning}, base.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	st := r1.Clone()
	var closed *engine.FlowState
	for _, r := range recs {
		if _, ok := r.Body.(engine.FlowStarted); ok {
			closed = st.Clone()
		}
		st, _ = engine.Apply(st, r)
	}
	if closed == nil || len(closed.History) <= len(r1.History) {
		t.Fatalf("closed run %+v", closed)
	}
	err = s.Apply(2, func(tx *Tx) error {
		for _, x := range []*engine.FlowState{closed, st} {
			if err := tx.PutFlow(x); err != nil {
				return err
			}
		}
		got, err := tx.Flow("o")
		if err != nil {
			return err
		}
		sameState(t, got, st)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.Run("o", r1.RunID)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, old, closed)
	readsAll(t, s, st)
}

// Putting the same state again writes no event; one more event writes
// that event and nothing else of the history.
func TestPutFlow_WritesEachEventOnce(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	st := richFlow(t, "o", base)
	appendEvents(st, 20, base)
	n := len(st.History)
	hp := historyPrefix("o", st.RunID)
	historyWrites := func(ws []string) []string {
		var out []string
		for _, w := range ws {
			if strings.HasPrefix(w, `set "h`) { // the only flow in the store
				out = append(out, w)
			}
		}
		return out
	}
	var first []string
	if err := s.Apply(1, func(tx *Tx) error {
		err := tx.PutFlow(st)
		first = historyWrites(batchWrites(t, tx))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(first) != n {
		t.Fatalf("a new run wrote %d history keys, want %d", len(first), n)
	}
	before := historyKeys(t, s, "o", st.RunID)
	// The same state twice, in one batch and in another.
	if err := s.Apply(2, func(tx *Tx) error {
		for range 2 {
			if err := tx.PutFlow(st); err != nil {
				return err
			}
		}
		if hw := historyWrites(batchWrites(t, tx)); len(hw) != 0 {
			t.Fatalf("putting the same state again wrote %v", hw)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	appendEvents(st, 1, base)
	if err := s.Apply(3, func(tx *Tx) error {
		err := tx.PutFlow(st)
		want := []string{fmt.Sprintf("set %q", historyKey(hp, uint32(n+1)))}
		if hw := historyWrites(batchWrites(t, tx)); fmt.Sprint(hw) != fmt.Sprint(want) {
			t.Fatalf("one more event wrote %v, want %v", hw, want)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	after := historyKeys(t, s, "o", st.RunID)
	if len(after) != n+1 {
		t.Fatalf("%d history keys, want %d", len(after), n+1)
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("event key %q changed", k)
		}
	}
	stats, err := s.Stats()
	if err != nil || stats.EventsPut != uint64(n+1) {
		t.Fatalf("EventsPut = %d, want %d (%v)", stats.EventsPut, n+1, err)
	}
	readsAll(t, s, st)
}

// The bytes one step adds to a batch do not grow with the history: a
// PutFlow that rewrote the history would write about 1,000 events more
// for the long flow than for the short one.
func TestPutFlow_CostDoesNotGrowWithHistory(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	stepBytes := func(seq uint64, flowID string, events int) int {
		st := richFlow(t, flowID, base)
		appendEvents(st, events-len(st.History), base)
		putAll(t, s, seq, st)
		appendEvents(st, 1, base)
		var size int
		if err := s.Apply(seq+1, func(tx *Tx) error {
			before := tx.b.Len()
			err := tx.PutFlow(st)
			size = tx.b.Len() - before
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return size
	}
	short, long := stepBytes(1, "short", 10), stepBytes(3, "long0", 1000)
	// The event IDs and the event count take a few more digits and bytes.
	if long-short > 32 || short-long > 32 {
		t.Fatalf("one step writes %d bytes at 10 events and %d at 1,000", short, long)
	}
}

// A history shorter than the stored one, or a new event that is nil or
// misnumbered, is refused, naming the event, and changes nothing.
func TestPutFlow_RejectsBadHistory(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	st := richFlow(t, "o", base)
	appendEvents(st, 5, base)
	putAll(t, s, 1, st)
	n := len(st.History)
	shorter := st.Clone()
	shorter.History = shorter.History[:n-1]
	gap := st.Clone()
	appendEvents(gap, 2, base)
	gap.History = append(gap.History[:n], gap.History[n+1])
	withNil := st.Clone()
	withNil.History = append(withNil.History, nil)
	badFirst := bareFlow("new", "r")
	appendEvents(badFirst, 2, base)
	badFirst.History = badFirst.History[1:]
	for name, tc := range map[string]struct {
		st   *engine.FlowState
		want string
	}{
		"shorter": {shorter, fmt.Sprintf("history of %d events, the store holds %d", n-1, n)},
		"gap":     {gap, fmt.Sprintf("history event %d has ID %d", n+1, n+2)},
		"nil":     {withNil, fmt.Sprintf("history event %d is nil", n+1)},
		"new run": {badFirst, "history event 1 has ID 2"},
	} {
		err := s.Apply(2, func(tx *Tx) error { return tx.PutFlow(tc.st) })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
	mustAppliedAt(t, s, 1)
	readsAll(t, s, st)
}

// A missing or foreign history key is ErrCorrupt on read.
func TestFlow_MissingEventIsCorrupt(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	st := richFlow(t, "o", base)
	appendEvents(st, 3, base)
	putAll(t, s, 1, st)
	hp := historyPrefix("o", st.RunID)
	if err := s.Apply(2, func(tx *Tx) error { return tx.b.Delete(historyKey(hp, 2), nil) }); err != nil {
		t.Fatal(err)
	}
	_, err := s.Flow("o")
	wantErr(t, err, ErrCorrupt)
	_, err = s.Run("o", st.RunID)
	wantErr(t, err, ErrCorrupt)
	wantErr(t, s.RunningFlows(func(*engine.FlowState) error { return nil }), ErrCorrupt)
	// The summary does not read the history.
	if _, err := s.Summary("o", ""); err != nil {
		t.Fatal(err)
	}
}

// writeFormat1Store writes, with raw Pebble, a directory as a format 1
// build left it: format 1, applied 7, the latest run of flow "o" (v1 value,
// history inline) with its list and running entries, and an older run.
func writeFormat1Store(t testing.TB, dir string, latest, older *engine.FlowState) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: &pebbleLogger{l: discard}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range format1Entries(t, latest, older) {
		if err := db.Set(kv[0], kv[1], nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Set(keyFormat, binary.BigEndian.AppendUint32(nil, 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Set(keyApplied, binary.BigEndian.AppendUint64(nil, 7), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// format1Entries are the data keys of a format 1 store, in key order.
func format1Entries(t testing.TB, latest, older *engine.FlowState) [][2][]byte {
	ls, os := latest.Summary(), older.Summary()
	kvs := [][2][]byte{
		{flowKey(latest.FlowID), flowValueV1(t, latest)},
		{listKey(&ls), appendSummary(nil, &ls)},
		{listKey(&os), appendSummary(nil, &os)},
		{runKey(older.FlowID, older.RunID), flowValueV1(t, older)},
	}
	if latest.Running() {
		kvs = append(kvs, [2][]byte{runningKey(latest.FlowID), nil})
	}
	// Sort: the order above is by prefix 'f' < 'l' < 'r' < 'x', and the two
	// list keys by start time, newest first.
	if bytes.Compare(kvs[1][0], kvs[2][0]) > 0 {
		kvs[1], kvs[2] = kvs[2], kvs[1]
	}
	return kvs
}

// twoRuns returns a closed run r1 and the running run r2 after it.
func twoRuns(t testing.TB) (older, latest *engine.FlowState) {
	older = richFlow(t, "o", base)
	appendEvents(older, 10, base)
	older = stop(t, older, engine.StopCancel, base.Add(time.Minute))
	latest = start(t, older, "o", "order", "r2", base.Add(time.Hour))
	appendEvents(latest, 4, base)
	return older, latest
}

func storedFormat(t testing.TB, s *Store) uint32 {
	t.Helper()
	v, err := getCopy(s.db, keyFormat)
	if err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.Uint32(v)
}

// A store written by a format 1 build opens, is restamped format 3, reads
// its version 1 values, and moves a run's history to history keys the
// first time it writes the run.
func TestOpen_UpgradesFormat1Store(t *testing.T) {
	t.Parallel()
	older, latest := twoRuns(t)
	dir := t.TempDir()
	writeFormat1Store(t, dir, latest, older)

	s := openStore(t, dir)
	if f := storedFormat(t, s); f != storeFormat {
		t.Fatalf("format %d after open, want %d", f, storeFormat)
	}
	mustAppliedAt(t, s, 7)
	readsAll(t, s, latest)
	old, err := s.Run("o", older.RunID)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, old, older)
	if sum, err := s.Summary("o", older.RunID); err != nil || sum.Status != engine.StatusCanceled {
		t.Fatalf("older summary %+v %v", sum, err)
	}

	// The first put of the v1 run writes every event, then the v2 value.
	next := latest.Clone()
	appendEvents(next, 1, base)
	if err := s.Apply(nextSeq(s), func(tx *Tx) error {
		if err := tx.PutFlow(next); err != nil {
			return err
		}
		var hw int
		for _, w := range batchWrites(t, tx) {
			if strings.HasPrefix(w, `set "h`) {
				hw++
			}
		}
		if hw != len(next.History) {
			t.Fatalf("first put of a v1 run wrote %d events, want %d", hw, len(next.History))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	v, _ := getCopy(s.db, flowKey("o"))
	if v[0] != flowValueHistory {
		t.Fatalf("flow value version %d after the put", v[0])
	}
	readsAll(t, s, next)
	// A v1 run is refused a shorter history too.
	short := latest.Clone()
	short.History = short.History[:1]
	if err := s.Apply(nextSeq(s), func(tx *Tx) error { return tx.PutFlow(short) }); err == nil {
		t.Fatal("a shorter history was accepted")
	}

	// A new run replacing a v1 run keeps it readable (its value moves as is).
	dir2 := t.TempDir()
	writeFormat1Store(t, dir2, latest, older)
	s2 := openStore(t, dir2)
	closed := stop(t, latest, engine.StopCancel, base.Add(2*time.Hour))
	r3 := start(t, closed, "o", "order", "r3", base.Add(3*time.Hour))
	putAll(t, s2, 8, closed, r3)
	for _, want := range []*engine.FlowState{older, closed} {
		got, err := s2.Run("o", want.RunID)
		if err != nil {
			t.Fatal(err)
		}
		sameState(t, got, want)
	}
	readsAll(t, s2, r3)
	// Reopened: stays format 3.
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	s3 := openStore(t, dir2)
	if f := storedFormat(t, s3); f != storeFormat {
		t.Fatalf("format %d after reopen", f)
	}
}

// encodeStream writes a snapshot stream by hand: stream version 1, the
// given store format, applied position and entries (in key order).
func encodeStream(format uint32, seq uint64, kvs [][2][]byte) []byte {
	b := []byte("DXLS\x01")
	b = binary.BigEndian.AppendUint32(b, format)
	b = binary.BigEndian.AppendUint64(b, seq)
	for _, kv := range kvs {
		b = binary.AppendUvarint(b, uint64(len(kv[0])))
		b = append(b, kv[0]...)
		b = binary.AppendUvarint(b, uint64(len(kv[1])))
		b = append(b, kv[1]...)
	}
	b = binary.AppendUvarint(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(len(kvs)))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// Restore reads streams of store format 1 (version 1 values) and 2, and
// refuses others; the restored store is format 3.
func TestRestore_AcceptsFormat1Streams(t *testing.T) {
	t.Parallel()
	older, latest := twoRuns(t)
	kvs := format1Entries(t, latest, older)
	dir := filepath.Join(t.TempDir(), "s")
	s, err := Restore(dir, bytes.NewReader(encodeStream(1, 7, kvs)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if f := storedFormat(t, s); f != storeFormat {
		t.Fatalf("restored format %d", f)
	}
	mustAppliedAt(t, s, 7)
	readsAll(t, s, latest)
	old, err := s.Run("o", older.RunID)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, old, older)

	// The golden stream a format 1 build wrote.
	golden, err := os.ReadFile(filepath.Join("testdata", "checkpoint-format1.golden"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Restore(filepath.Join(t.TempDir(), "g"), bytes.NewReader(golden), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	mustAppliedAt(t, g, 41)

	// Format 2 (unreleased builds: JSON states, large values inline) and
	// any later format are refused.
	for _, f := range []uint32{2, storeFormat + 1} {
		_, err = Restore(filepath.Join(t.TempDir(), fmt.Sprint("f", f)), bytes.NewReader(encodeStream(f, 7, kvs)), Options{})
		wantErr(t, err, ErrIncompatible)
	}
}

// A checkpoint carries the history keys; the restored store reads every
// run with its history, and goes on writing each event once.
func TestCheckpoint_RestoreKeepsHistory(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	older, latest := twoRuns(t)
	putAll(t, s, 1, older)
	putAll(t, s, 2, latest)
	var buf bytes.Buffer
	if _, err := s.Checkpoint(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), historyKey(historyPrefix("o", older.RunID), uint32(len(older.History)))) {
		t.Fatal("the checkpoint holds no history key")
	}
	r, err := Restore(filepath.Join(t.TempDir(), "r"), bytes.NewReader(buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	if dump(t, r) != dump(t, s) {
		t.Fatal("restored store differs")
	}
	readsAll(t, r, latest)
	got, err := r.Run("o", older.RunID)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, got, older)
	appendEvents(latest, 1, base)
	if err := r.Apply(nextSeq(r), func(tx *Tx) error {
		if err := tx.PutFlow(latest); err != nil {
			return err
		}
		if n := strings.Count(strings.Join(batchWrites(t, tx), "\n"), `set "h`); n != 1 {
			return errors.New(fmt.Sprint("wrote ", n, " events after restore, want 1"))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	readsAll(t, r, latest)
}
