package localstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dexzd/dexzd/internal/engine"
)

func TestApply_RoundTrip(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	if _, ok := s.Applied(); ok {
		t.Fatal("a new store has an applied position")
	}
	st := richFlow(t, "o-1", base)
	if len(st.Steps) < 2 || len(st.Timers()) == 0 {
		t.Fatalf("richFlow is not rich: %d steps", len(st.Steps))
	}
	err := s.Apply(0, func(tx *Tx) error {
		if _, err := tx.Flow("o-1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Tx.Flow before the put: %v", err)
		}
		if err := tx.PutFlow(st); err != nil {
			return err
		}
		got, err := tx.Flow("o-1")
		if err != nil {
			return err
		}
		sameState(t, got, st) // reads through the batch
		// Nothing is committed yet.
		if _, err := s.Flow("o-1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("committed read during Apply: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mustAppliedAt(t, s, 0)

	got, err := s.Flow("o-1")
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, got, st)
	if got, err = s.Run("o-1", st.RunID); err != nil {
		t.Fatal(err)
	}
	sameState(t, got, st)
	sum, err := s.Summary("o-1", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := st.Summary(); !sameSummary(&sum, &want) || sum.StartedAt.Location() != time.UTC {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
	// Unknown flow IDs and runs.
	_, err = s.Flow("nope")
	wantErr(t, err, ErrNotFound)
	_, err = s.Run("o-1", "nope")
	wantErr(t, err, ErrNotFound)
	_, err = s.Summary("nope", "")
	wantErr(t, err, ErrNotFound)

	// The caller owns what it reads, and may change what it put.
	got.Status = engine.StatusFailed
	st.FlowType = "changed"
	again, _ := s.Flow("o-1")
	if again.Status != engine.StatusRunning || again.FlowType != "order" {
		t.Fatalf("stored state changed through a caller's copy: %+v", again.Summary())
	}

	stats, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if stats.BatchesApplied != 1 || stats.FlowsPut != 1 || stats.BytesApplied == 0 || !stats.HasApplied {
		t.Fatalf("stats %+v", stats)
	}
}

// A failing (or panicking) Apply function writes nothing and leaves the
// applied position alone.
func TestApply_FnErrorWritesNothing(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	putAll(t, s, 1, start(t, nil, "a", "order", "r1", base))
	boom := errors.New("boom")
	err := s.Apply(2, func(tx *Tx) error {
		if err := tx.PutFlow(start(t, nil, "b", "order", "r1", base)); err != nil {
			return err
		}
		a, err := tx.Flow("a")
		if err != nil {
			return err
		}
		if err := tx.PutFlow(stop(t, a, engine.StopCancel, base.Add(time.Second))); err != nil {
			return err
		}
		return boom
	})
	wantErr(t, err, boom)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("no panic")
			}
		}()
		_ = s.Apply(2, func(tx *Tx) error {
			_ = tx.PutFlow(start(t, nil, "c", "order", "r1", base))
			panic("in fn")
		})
	}()
	mustAppliedAt(t, s, 1)
	for _, id := range []string{"b", "c"} {
		if _, err := s.Flow(id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("flow %s after a failed Apply: %v", id, err)
		}
	}
	a, err := s.Flow("a")
	if err != nil || a.Status != engine.StatusRunning {
		t.Fatalf("flow a: %v %v", a, err)
	}
	list, _, err := s.ListFlows(ListQuery{})
	if err != nil || len(list) != 1 || list[0].Status != engine.StatusRunning {
		t.Fatalf("list %v %v", list, err)
	}
	// The same sequence number applies now.
	putAll(t, s, 2, start(t, nil, "b", "order", "r1", base))
	mustAppliedAt(t, s, 2)
}

func TestApply_RefusesOldSeq(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	if err := s.Apply(0, nil); err != nil { // the first batch of a node is 0
		t.Fatal(err)
	}
	mustAppliedAt(t, s, 0)
	wantErr(t, s.Apply(0, nil), ErrAlreadyApplied)
	if err := s.Apply(5, nil); err != nil { // gaps are the caller's business
		t.Fatal(err)
	}
	called := false
	for _, seq := range []uint64{0, 4, 5} {
		err := s.Apply(seq, func(*Tx) error { called = true; return nil })
		wantErr(t, err, ErrAlreadyApplied)
	}
	if called {
		t.Fatal("fn ran for a refused batch")
	}
	mustAppliedAt(t, s, 5)
}

// Covers: the applied position survives a restart; replay is idempotent.
func TestOpen_KeepsAppliedAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := richFlow(t, "o-1", base)
	putAll(t, s, 7, st)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = s.Flow("o-1")
	wantErr(t, err, ErrClosed)
	wantErr(t, s.Apply(8, nil), ErrClosed)

	s = openStore(t, dir)
	mustAppliedAt(t, s, 7)
	got, err := s.Flow("o-1")
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, got, st)
	wantErr(t, s.Apply(7, nil), ErrAlreadyApplied)
	putAll(t, s, 8, stop(t, st, engine.StopTerminate, base.Add(time.Minute)))
	mustAppliedAt(t, s, 8)
}

func TestOpen_RefusesIncompatibleDirectory(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(db *pebble.DB) error{
		"other format": func(db *pebble.DB) error {
			return db.Set(keyFormat, binary.BigEndian.AppendUint32(nil, storeFormat+1), pebble.Sync)
		},
		"no format": func(db *pebble.DB) error { return db.Set([]byte("fsomething"), []byte("x"), pebble.Sync) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db, err := pebble.Open(dir, &pebble.Options{Logger: &pebbleLogger{l: discard}})
			if err != nil {
				t.Fatal(err)
			}
			if err := setup(db); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			_, err = Open(dir, Options{})
			wantErr(t, err, ErrIncompatible)
			if !strings.Contains(err.Error(), dir) {
				t.Fatalf("error does not name the directory: %v", err)
			}
		})
	}
}

// A new run moves the old one to its run key: still readable by run ID,
// still listed, no longer running.
func TestPutFlow_NewRunKeepsOlderRun(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	r1 := start(t, nil, "o-1", "order", "r1", base)
	putAll(t, s, 1, r1)
	r1 = stop(t, r1, engine.StopFail, base.Add(time.Minute))
	putAll(t, s, 2, r1)
	r2 := start(t, r1, "o-1", "order", "r2", base.Add(time.Hour))
	if r2.PreviousRunID != "r1" {
		t.Fatalf("previous run %q", r2.PreviousRunID)
	}
	putAll(t, s, 3, r2)
	r2 = stop(t, r2, engine.StopCancel, base.Add(2*time.Hour))
	r3 := start(t, r2, "o-1", "order", "r3", base.Add(3*time.Hour))
	putAll(t, s, 4, r2, r3) // close and start in one batch

	latest, err := s.Flow("o-1")
	if err != nil || latest.RunID != "r3" {
		t.Fatalf("latest %v %v", latest, err)
	}
	old, err := s.Run("o-1", "r1")
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, old, r1)
	sum, err := s.Summary("o-1", "r2")
	if err != nil || sum.Status != engine.StatusCanceled {
		t.Fatalf("r2 summary %+v %v", sum, err)
	}
	list, _, err := s.ListFlows(ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range list {
		got = append(got, l.RunID+":"+string(l.Status))
	}
	if strings.Join(got, " ") != "r3:RUNNING r2:CANCELED r1:FAILED" {
		t.Fatalf("list %v", got)
	}
	var running []string
	_ = s.RunningFlows(func(st *engine.FlowState) error {
		running = append(running, st.RunID)
		return nil
	})
	if strings.Join(running, " ") != "r3" {
		t.Fatalf("running %v", running)
	}
}

// Under TERMINATE_IF_RUNNING one batch closes the old run and starts the
// next: the closed state must be put first.
func TestPutFlow_TerminateIfRunning(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	r1 := start(t, nil, "o-1", "order", "r1", base)
	putAll(t, s, 1, r1)

	recs, err := eng.Decide(r1, engine.StartFlow{FlowID: "o-1", FlowType: "order", RunID: "r2",
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
	if closed == nil || closed.Status != engine.StatusTerminated {
		t.Fatalf("closed run %+v", closed)
	}
	// Putting only the new run would leave r1 RUNNING forever: refused.
	err = s.Apply(2, func(tx *Tx) error { return tx.PutFlow(st) })
	wantErr(t, err, ErrRunConflict)
	mustAppliedAt(t, s, 1)

	putAll(t, s, 2, closed, st)
	old, err := s.Run("o-1", "r1")
	if err != nil || old.Status != engine.StatusTerminated {
		t.Fatalf("r1 %v %v", old, err)
	}
	list, _, _ := s.ListFlows(ListQuery{Statuses: []engine.Status{engine.StatusRunning}})
	if len(list) != 1 || list[0].RunID != "r2" {
		t.Fatalf("running list %v", list)
	}
	// Putting an older run again is refused.
	err = s.Apply(3, func(tx *Tx) error { return tx.PutFlow(closed) })
	wantErr(t, err, ErrRunConflict)
}

func TestPutFlow_RejectsBadState(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	for _, st := range []*engine.FlowState{nil, {RunID: "r"}, {FlowID: "f"}} {
		if err := s.Apply(1, func(tx *Tx) error { return tx.PutFlow(st) }); err == nil {
			t.Fatalf("PutFlow(%+v) accepted", st)
		}
	}
	var kept *Tx
	if err := s.Apply(1, func(tx *Tx) error { kept = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := kept.PutFlow(start(t, nil, "f", "order", "r", base)); err == nil {
		t.Fatal("a Tx works after its Apply")
	}
	if _, err := kept.Flow("f"); err == nil {
		t.Fatal("a Tx reads after its Apply")
	}
}

func TestRunningFlows(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	var states []*engine.FlowState
	for i, id := range []string{"d", "a", "c", "b", "e"} {
		st := richFlow(t, id, base.Add(time.Duration(i)*time.Minute))
		states = append(states, st)
	}
	putAll(t, s, 1, states...)
	// c completes... by cancellation; e fails.
	putAll(t, s, 2, stop(t, states[2], engine.StopCancel, base.Add(time.Hour)),
		stop(t, states[4], engine.StopFail, base.Add(time.Hour)))

	var got []string
	err := s.RunningFlows(func(st *engine.FlowState) error {
		if len(st.Timers()) == 0 || !st.Running() {
			t.Errorf("flow %s: %d timers, %s", st.FlowID, len(st.Timers()), st.Status)
		}
		got = append(got, st.FlowID)
		return nil
	})
	if err != nil || strings.Join(got, "") != "abd" {
		t.Fatalf("running flows %v %v", got, err)
	}
	stopErr := errors.New("stop")
	n := 0
	err = s.RunningFlows(func(*engine.FlowState) error { n++; return stopErr })
	if !errors.Is(err, stopErr) || n != 1 {
		t.Fatalf("fn error: %v after %d calls", err, n)
	}
}

// Reads, lists and checkpoints run concurrently with Apply (run with
// -race); Close waits for them.
func TestStore_ConcurrentUse(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, _, err := s.ListFlows(ListQuery{PageSize: 5}); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Flow("f-3"); err != nil && !errors.Is(err, ErrNotFound) {
					t.Error(err)
					return
				}
				_ = s.RunningFlows(func(*engine.FlowState) error { return nil })
			}
		}()
	}
	for i := range 50 {
		putAll(t, s, uint64(i), start(t, nil, fmt.Sprintf("f-%d", i), "order", "r", base.Add(time.Duration(i)*time.Second)))
	}
	close(done)
	wg.Wait()
}
