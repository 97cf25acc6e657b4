package serving

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/wal"
)

// TestApplyBatch_ContinuationWithoutCarryIsCorrupt: a continuation's
// flow_started takes the live state its flow_continued_as_new moved aside
// in memory, so both are in one envelope. Applied so, the new run is the
// flow's latest. A log where the start meets no carry (the two records in
// separate batches) is corrupt: the apply, live or in a replay, fails
// naming the batch's sequence number and applies nothing of it, where
// engine.Apply alone would start an empty run.
// Covers: E37
func TestApplyBatch_ContinuationWithoutCarryIsCorrupt(t *testing.T) {
	t.Parallel()
	now := time.Unix(1e9, 0).UTC()
	start := engine.Record{FlowID: "f", RunID: "r", At: now, Body: engine.FlowStarted{FlowType: "a"}}
	step := engine.Record{FlowID: "f", RunID: "r", At: now, Body: engine.StepCreated{StepExecID: "S-1", StepType: "S", N: 1}}
	cont := engine.Record{FlowID: "f", RunID: "r", At: now,
		Body: engine.FlowContinuedAsNew{NewRunID: "r.continued-1", Trigger: engine.ContinueClient}}
	next := engine.Record{FlowID: "f", RunID: "r.continued-1", At: now,
		Body: engine.FlowStarted{FlowType: "a", PreviousRunID: "r", ContinuedFrom: "r"}}
	env := func(recs ...engine.Record) []byte {
		t.Helper()
		b, err := encodeEnvelope(recs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	apply := func(store flowstore.Store, seq uint64, envs ...[]byte) error {
		_, err := applyBatch(store, wal.Batch{Seq: seq, Records: envs})
		return err
	}

	t.Run("one envelope", func(t *testing.T) {
		t.Parallel()
		store := flowstore.NewMemStore()
		if err := apply(store, 1, env(start, step)); err != nil {
			t.Fatal(err)
		}
		if err := apply(store, 2, env(cont, next)); err != nil {
			t.Fatal(err)
		}
		st, err := store.Flow("f")
		if err != nil {
			t.Fatal(err)
		}
		if st.RunID != "r.continued-1" || st.Step("S-1") == nil {
			t.Fatalf("latest run %s with steps %v, want r.continued-1 with S-1 carried", st.RunID, st.Steps)
		}
	})
	t.Run("separate batches", func(t *testing.T) {
		t.Parallel()
		store := flowstore.NewMemStore()
		for seq, e := range [][]byte{env(start, step), env(cont)} {
			if err := apply(store, uint64(seq+1), e); err != nil {
				t.Fatal(err)
			}
		}
		err := ReplayApply(store)(wal.Batch{Seq: 3, Records: [][]byte{env(next)}})
		if !errors.Is(err, engine.ErrNoCarry) || !strings.Contains(err.Error(), "batch 3 record 0: corrupt log") {
			t.Fatalf("apply of the lone continuation start: %v; want a corrupt log error naming batch 3 (engine.ErrNoCarry)", err)
		}
		st, err := store.Flow("f")
		if err != nil {
			t.Fatal(err)
		}
		if st.RunID != "r" || st.Status != engine.StatusContinuedAsNew {
			t.Fatalf("latest run %s %s after the refused batch, want r CONTINUED_AS_NEW", st.RunID, st.Status)
		}
	})
}
