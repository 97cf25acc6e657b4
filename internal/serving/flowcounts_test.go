package serving

import (
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/wal"
)

// The counting applyBatch does per record, against what applying a record
// costs: a decision's records (start a flow, create and schedule a step).
func BenchmarkFlowCounts(b *testing.B) {
	now := time.Unix(1e9, 0).UTC()
	recs := []engine.Record{
		{FlowID: "f", RunID: "r", At: now, Body: engine.FlowStarted{FlowType: "a"}},
		{FlowID: "f", RunID: "r", At: now, Body: engine.StepCreated{StepExecID: "S-1", StepType: "S", N: 1}},
		{FlowID: "f", RunID: "r", At: now, Body: engine.AttemptScheduled{StepExecID: "S-1", Method: engine.MethodExecute, Attempt: 1}},
		{FlowID: "f", RunID: "r", At: now, Body: engine.ExecuteCompleted{StepExecID: "S-1", Attempt: 1, Kind: engine.DecideGracefulComplete}},
		{FlowID: "f", RunID: "r", At: now, Body: engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: engine.StatusCompleted}}},
	}
	env, err := encodeEnvelope(recs)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("count", func(b *testing.B) {
		var c FlowCounts
		for b.Loop() {
			for _, r := range recs {
				c.Count(r.Body)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
	})
	b.Run("applyBatch", func(b *testing.B) {
		store := flowstore.NewMemStore()
		seq := uint64(0)
		for b.Loop() {
			seq++
			if _, err := applyBatch(store, wal.Batch{Seq: seq, Records: [][]byte{env}}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
	})
}

// A continue-as-new (E37) goes on with the same flow: its new run's start
// is not counted as a flow started, nor the old run as one closed.
//
// Covers: E37
func TestFlowCounts_ContinuationIsNotANewFlow(t *testing.T) {
	t.Parallel()
	var c FlowCounts
	for _, b := range []engine.RecordBody{
		engine.FlowStarted{FlowType: "a"},
		engine.FlowContinuedAsNew{NewRunID: "r.continued-1", Trigger: engine.ContinueHistoryLimit},
		engine.FlowStarted{FlowType: "a", PreviousRunID: "r", ContinuedFrom: "r"},
		engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: engine.StatusCompleted}},
	} {
		c.Count(b)
	}
	if c.Started != 1 || c.Closed[CloseCompleted] != 1 || c.Closed[CloseOther] != 0 {
		t.Fatalf("started %d, closed %v; want 1 started and 1 completed", c.Started, c.Closed)
	}
}
