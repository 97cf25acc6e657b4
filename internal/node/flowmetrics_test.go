package node

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// Each record kind lands in its counter; records that end no attempt and
// close no run count nothing.
func TestFlowCounts_CountsRecordKinds(t *testing.T) {
	t.Parallel()
	var c serving.FlowCounts
	for _, b := range []engine.RecordBody{
		engine.FlowStarted{}, engine.FlowStarted{},
		engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: engine.StatusCompleted}},
		engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: engine.StatusFailed}},
		engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: engine.StatusCanceled}},
		engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: engine.StatusTerminated}},
		engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: "SOMETHING_NEW"}},
		engine.WaitForCompleted{}, engine.ExecuteCompleted{}, engine.ExecuteCompleted{},
		engine.AttemptFailed{Failure: engine.Failure{Type: "MyError"}},
		engine.AttemptFailed{Failure: engine.Failure{Type: engine.FailureTimeout}},
		engine.AttemptFailed{Failure: engine.Failure{Type: engine.FailureNotCompleted}},
		engine.AttemptFailed{Failure: engine.Failure{Type: engine.FailureNotCompleted}},
		engine.StepCreated{}, engine.AttemptScheduled{}, engine.AttemptStarted{}, engine.RPCCompleted{},
		engine.StepEnded{}, engine.ChannelPublished{}, engine.AttributesSet{}, engine.DefinitionSet{},
		engine.ConditionSatisfied{}, engine.WaitTimerFired{},
	} {
		c.Count(b)
	}
	want := serving.FlowCounts{
		Started:  2,
		Closed:   [serving.NumCloseStatuses]uint32{serving.CloseCompleted: 1, serving.CloseFailed: 1, serving.CloseCanceled: 1, serving.CloseTerminated: 1, serving.CloseOther: 1},
		Attempts: [serving.NumAttemptOutcomes]uint32{serving.AttemptSucceeded: 3, serving.AttemptFailed: 1, serving.AttemptTimedOut: 1, serving.AttemptNotCompleted: 2},
	}
	if c != want {
		t.Fatalf("counts = %+v, want %+v", c, want)
	}
	m := NewMetrics()
	m.CountFlows(&c)
	m.CountFlows(&c)
	var nilMetrics *Metrics
	nilMetrics.CountFlows(&c) // a nil *Metrics records nothing
	text := metricsText(t, m)
	for _, line := range []string{
		"dexzd_flows_started_total 4\n",
		`dexzd_flows_completed_total{status="completed"} 2` + "\n",
		`dexzd_flows_completed_total{status="terminated"} 2` + "\n",
		`dexzd_flows_completed_total{status="other"} 2` + "\n",
		`dexzd_step_attempts_total{outcome="succeeded"} 6` + "\n",
		`dexzd_step_attempts_total{outcome="not_completed"} 4` + "\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("metrics lack %q", line)
		}
	}
}

// newMetricsHarness is newHarness with metrics: the core counts flows, the
// writer reports batches and the log goes through a metered store.
func newMetricsHarness(t *testing.T, blobs *mem.Store, epoch uint64, m *Metrics) *harness {
	t.Helper()
	ctx := context.Background()
	store := flowstore.NewMemStore()
	metered := m.MeterStore(blobs)
	next, err := wal.Fence(ctx, metered, testLayout, epoch, 0, serving.ReplayApply(store))
	if err != nil {
		t.Fatal(err)
	}
	c := serving.NewCore(serving.CoreConfig{NodeID: "n1", ProcessID: "p", Epoch: epoch, Store: store, Metrics: m})
	w, err := wal.NewWriter(wal.WriterConfig{Store: metered, Layout: testLayout, Epoch: epoch, NextSeq: next,
		OnDurable: c.OnDurable, OnBatch: m.WriterHook()})
	if err != nil {
		t.Fatal(err)
	}
	c.SetWriter(w)
	wctx, cancel := context.WithCancel(ctx)
	w.Start(wctx)
	c.Start(ctx)
	if err := c.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, blobs: blobs, core: c, w: w, cancelWriter: cancel}
}

// The flow counters move by exactly what the flows did, across a takeover:
// the new lease period's replay of the old one's batches counts nothing,
// the attempts it fails on takeover count as not_completed (T2).
func TestFlowMetrics_CountWhatTheCoreCommits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		m := NewMetrics()
		h := newMetricsHarness(t, blobs, 1, m)
		ctx := context.Background()
		s := h.session("w1", 5, "a")

		// f1: attempt 1 fails, attempt 2 completes the flow.
		h.start("f1", "a", "S")
		synctest.Wait()
		task := tasks(s)[0]
		if a, err := s.Result(ctx, task.Token, engine.TaskFailed{Token: task.Token, Failure: engine.Failure{Type: "Boom"}}); err != nil || a.Status != server.AckAccepted {
			t.Fatalf("failure ack = %+v, %v", a, err)
		}
		time.Sleep(2 * time.Second) // the retry's backoff
		synctest.Wait()
		task = tasks(s)[0]
		if task.Attempt != 2 {
			t.Fatalf("retry = %+v", task)
		}
		if a := h.complete(s, task); a.Status != server.AckAccepted {
			t.Fatalf("ack = %+v", a)
		}
		// f2: its worker goes away, attempt 1 times out, attempt 2 is
		// running when the process crashes.
		h.start("f2", "a", "S")
		synctest.Wait()
		if got := tasks(s); len(got) != 1 || got[0].FlowID != "f2" {
			t.Fatalf("tasks = %+v", got)
		}
		s.Close()
		s2 := h.session("w2", 5, "a")
		time.Sleep(35 * time.Second) // the 30 s attempt timeout and the backoff
		synctest.Wait()
		if got := tasks(s2); len(got) != 1 || got[0].Attempt != 2 {
			t.Fatalf("after the timeout: %+v", got)
		}
		// f3: cancelled by its client.
		h.start("f3", "a", "W")
		if _, err := h.core.Command(ctx, "f3", engine.StopFlow{FlowID: "f3"}); err != nil {
			t.Fatal(err)
		}
		h.crash()

		h2 := newMetricsHarness(t, blobs, 2, m)
		defer h2.stop()
		s3 := h2.session("w3", 5, "a")
		synctest.Wait() // a NOT_COMPLETED retry waits no backoff
		got := tasks(s3)
		if len(got) != 1 || got[0].FlowID != "f2" || got[0].Attempt != 3 {
			t.Fatalf("after the takeover: %+v", got)
		}
		if a := h2.complete(s3, got[0]); a.Status != server.AckAccepted {
			t.Fatalf("ack = %+v", a)
		}

		want := serving.FlowCounts{
			Started:  3,
			Closed:   [serving.NumCloseStatuses]uint32{serving.CloseCompleted: 2, serving.CloseCanceled: 1},
			Attempts: [serving.NumAttemptOutcomes]uint32{serving.AttemptSucceeded: 2, serving.AttemptFailed: 1, serving.AttemptTimedOut: 1, serving.AttemptNotCompleted: 1},
		}
		if got := flowMetricsOf(m); got != want {
			t.Fatalf("flow metrics = %+v, want %+v", got, want)
		}
		// Every batch either writer made durable is in the histograms, and
		// the log's writes in the store counters.
		batches := h.w.Stats().Batches + h2.w.Stats().Batches
		text := metricsText(t, m)
		for _, line := range []string{
			"dexzd_log_batch_records_count " + u64(batches) + "\n",
			"dexzd_log_batch_write_seconds_count " + u64(batches) + "\n",
			"dexzd_log_batch_bytes_sum " + u64(h.w.Stats().Bytes+h2.w.Stats().Bytes) + "\n",
		} {
			if !strings.Contains(text, line) {
				t.Errorf("metrics lack %q:\n%s", line, text)
			}
		}
		// + the two fence batches, and the manifest the first fence
		// created to record its position (the second one replaced it).
		if n := m.store.requests[storePutIfAbsent][storeOK].Load(); n != batches+3 {
			t.Errorf("put_if_absent ok = %d, want %d batches, 2 fences and the manifest", n, batches)
		}
	})
}

// flowMetricsOf reads m's flow counters back as serving.FlowCounts.
func flowMetricsOf(m *Metrics) serving.FlowCounts {
	var c serving.FlowCounts
	c.Started = uint32(m.flows.started.Load())
	for i := range c.Closed {
		c.Closed[i] = uint32(m.flows.closed[i].Load())
	}
	for i := range c.Attempts {
		c.Attempts[i] = uint32(m.flows.attempts[i].Load())
	}
	return c
}
