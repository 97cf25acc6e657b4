package serving

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/wal"
)

// Unit tests of the sequencer, dispatcher and timer rules: a core on the
// memory store with a real log writer, run under testing/synctest so that
// timers, retries and attempt timeouts take no real time.

var testLayout = wal.MustLayout("", "n1")

type harness struct {
	t            *testing.T
	blobs        *mem.Store
	core         *Core
	w            *wal.Writer
	cancelWriter context.CancelFunc
}

// newHarness fences the log with epoch, replays it into a fresh memory
// store and starts a core. The test must call stop (or crash) before its
// synctest bubble ends.
func newHarness(t *testing.T, blobs *mem.Store, epoch uint64) *harness {
	t.Helper()
	return newHarnessWith(t, blobs, epoch, AdmissionLimits{})
}

// newHarnessWith is newHarness with admission limits.
func newHarnessWith(t *testing.T, blobs *mem.Store, epoch uint64, lim AdmissionLimits) *harness {
	t.Helper()
	return newHarnessConfig(t, blobs, epoch, func(c *CoreConfig) { c.Admission = lim })
}

// newHarnessConfig is newHarness with the core's configuration changed by
// edit.
func newHarnessConfig(t *testing.T, blobs *mem.Store, epoch uint64, edit func(*CoreConfig)) *harness {
	t.Helper()
	ctx := context.Background()
	store := flowstore.NewMemStore()
	next, err := wal.Fence(ctx, blobs, testLayout, epoch, 0, ReplayApply(store))
	if err != nil {
		t.Fatal(err)
	}
	cfg := CoreConfig{NodeID: "n1", ProcessID: "p", Epoch: epoch, Store: store}
	edit(&cfg)
	c := NewCore(cfg)
	w, err := wal.NewWriter(wal.WriterConfig{Store: blobs, Layout: testLayout, Epoch: epoch, NextSeq: next, OnDurable: c.OnDurable})
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

func (h *harness) stop() {
	h.core.Stop()
	if err := h.w.Stop(); err != nil {
		h.t.Fatal(err)
	}
	h.cancelWriter()
}

// crash stops without flushing: a batch in flight is abandoned and records
// not yet written are lost.
func (h *harness) crash() {
	h.cancelWriter()
	<-h.w.Done()
	h.core.Stop()
}

var flowDef = &engine.FlowDefinition{Type: "a", Steps: map[string]engine.StepDef{
	"S": {}, "W": {HasWaitFor: true},
	"Async": {Options: &engine.StepOptions{Execute: &engine.MethodOptions{Durability: engine.ASYNC}}},
	"Sync":  {Options: &engine.StepOptions{Execute: &engine.MethodOptions{Durability: engine.SYNC}}},
}, Channels: []string{"c"}}

func (h *harness) session(id string, maxTasks int, types ...string) server.Session {
	h.t.Helper()
	hello := server.WorkerHello{WorkerID: id, MaxConcurrent: maxTasks}
	for _, typ := range types {
		def := *flowDef
		def.Type = typ
		hello.FlowTypes = append(hello.FlowTypes, server.FlowTypeDecl{Definition: &def})
	}
	s, err := h.core.OpenSession(context.Background(), hello)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h *harness) start(id, typ, step string) {
	h.t.Helper()
	if _, err := h.core.StartFlow(context.Background(), engine.StartFlow{FlowID: id, FlowType: typ, StartStep: step}); err != nil {
		h.t.Fatal(err)
	}
}

// tasks returns the tasks queued for s now.
func tasks(s server.Session) []*engine.Task {
	var out []*engine.Task
	for _, m := range s.Take() {
		if m.Task != nil {
			out = append(out, m.Task)
		}
	}
	return out
}

func (h *harness) complete(s server.Session, task *engine.Task) server.Ack {
	h.t.Helper()
	a, err := s.Result(context.Background(), task.Token, engine.ExecuteResult{Token: task.Token,
		Decision: engine.Decision{Kind: engine.DecideGracefulComplete}})
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// Covers: W1, W3, W5
func TestDispatch_CapacityReservationAndFlowTypes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, mem.New(), 1)
		defer h.stop()
		other := h.session("other", 5, "b")
		s1 := h.session("w1", 1, "a")
		s2 := h.session("w2", 1, "a")
		for _, id := range []string{"f1", "f2", "f3"} {
			h.start(id, "a", "S")
		}
		synctest.Wait()
		t1, t2 := tasks(s1), tasks(s2)
		if len(t1) != 1 || len(t2) != 1 || t1[0].FlowID == t2[0].FlowID {
			t.Fatalf("with one slot each: w1 got %d, w2 got %d tasks", len(t1), len(t2))
		}
		if n := len(tasks(other)); n != 0 {
			t.Fatalf("a worker of another flow type got %d tasks", n)
		}
		third := map[string]bool{"f1": true, "f2": true, "f3": true}
		delete(third, t1[0].FlowID)
		delete(third, t2[0].FlowID)
		for id := range third {
			if st, _ := h.core.cfg.Store.Flow(id); len(st.PendingTasks()) != 1 {
				t.Fatalf("%s has no pending task", id)
			}
		}
		if a := h.complete(s1, t1[0]); a.Status != server.AckAccepted {
			t.Fatalf("ack = %+v", a)
		}
		synctest.Wait()
		t3 := tasks(s1)
		if len(t3) != 1 || t3[0].FlowID == t1[0].FlowID || t3[0].FlowID == t2[0].FlowID {
			t.Fatalf("after the slot was freed w1 got %v", t3)
		}
		if n := len(tasks(s2)); n != 0 {
			t.Fatalf("a task went to two workers: w2 got %d more", n)
		}
		// W5: a type nobody serves waits until a worker for it connects.
		h.start("g1", "c", "S")
		synctest.Wait()
		if len(tasks(other))+len(tasks(s1))+len(tasks(s2)) != 0 {
			t.Fatal("a task of type c went to a worker that does not serve it")
		}
		sc := h.session("wc", 1, "c")
		synctest.Wait()
		if got := tasks(sc); len(got) != 1 || got[0].FlowID != "g1" {
			t.Fatalf("the c worker got %v", got)
		}
	})
}

// A worker that disconnects loses its running task: the attempt times out
// and the retry goes to another worker, after the backoff.
//
// Covers: W3, E9, E14
func TestDispatch_DisconnectedWorkerTaskTimesOutAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, mem.New(), 1)
		defer h.stop()
		s1 := h.session("w1", 1, "a")
		h.start("f1", "a", "S")
		synctest.Wait()
		got := tasks(s1)
		if len(got) != 1 {
			t.Fatalf("got %d tasks", len(got))
		}
		s1.Close()
		s2 := h.session("w2", 1, "a")
		began := time.Now()
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if n := len(tasks(s2)); n != 0 {
			t.Fatalf("the running task was handed out again before its timeout (%d)", n)
		}
		time.Sleep(3 * time.Second) // 30 s timeout + 1 s backoff
		synctest.Wait()
		retry := tasks(s2)
		if len(retry) != 1 || retry[0].Attempt != 2 {
			t.Fatalf("retry = %v", retry)
		}
		st, _ := h.core.cfg.Store.Flow("f1")
		if f := st.Steps[0].LastFailure; f == nil || f.Type != engine.FailureTimeout || f.At.Sub(began) < 30*time.Second {
			t.Fatalf("last failure = %+v", f)
		}
		// The late result of attempt 1 is refused (W2).
		a, err := s2.Result(context.Background(), got[0].Token, engine.ExecuteResult{Token: got[0].Token,
			Decision: engine.Decision{Kind: engine.DecideDeadEnd}})
		if err != nil || a.Status != server.AckSuperseded {
			t.Fatalf("late result: %+v, %v", a, err)
		}
	})
}

// A retry is handed out no earlier than its backoff (a worker's
// retry-after here) allows.
//
// Covers: E9, E10
func TestDispatch_RetryWaitsForNotBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, mem.New(), 1)
		defer h.stop()
		s := h.session("w1", 1, "a")
		h.start("f1", "a", "S")
		synctest.Wait()
		task := tasks(s)[0]
		after := 10 * time.Second
		if a, err := s.Result(context.Background(), task.Token, engine.TaskFailed{Token: task.Token,
			Failure: engine.Failure{Type: "Boom", Message: "x"}, RetryAfter: &after}); err != nil || a.Status != server.AckAccepted {
			t.Fatalf("failure ack = %+v, %v", a, err)
		}
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if n := len(tasks(s)); n != 0 {
			t.Fatal("the retry came before its retry-after")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := tasks(s); len(got) != 1 || got[0].Attempt != 2 {
			t.Fatalf("retry = %v", got)
		}
	})
}

// A wait timer fires when due; a timer that is no longer pending (an
// answered attempt's timeout) fires and is dropped without a batch; a
// closed run's timers are dropped.
//
// Covers: E15, E19, E20
func TestTimers_FireWhenDueAndStaleOnesAreDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, mem.New(), 1)
		defer h.stop()
		s := h.session("w1", 5, "a")
		wait := func(id string) {
			h.start(id, "a", "W")
			synctest.Wait()
			task := tasks(s)[0]
			hour := time.Hour
			if a, err := s.Result(context.Background(), task.Token, engine.WaitForResult{Token: task.Token,
				Wait: &engine.Wait{Mode: engine.Until, Conditions: []engine.Condition{{Timer: &hour}}}}); err != nil || a.Status != server.AckAccepted {
				t.Fatalf("wait ack = %+v, %v", a, err)
			}
		}
		wait("f1")
		wait("f2")
		if _, err := h.core.Command(context.Background(), "f2", engine.SkipTimer{FlowID: "f2", StepExecID: "W-1"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got := tasks(s)
		if len(got) != 1 || got[0].FlowID != "f2" || !got[0].Results.Conditions[0].Skipped {
			t.Fatalf("after the skip: %v", got)
		}
		h.complete(s, got[0])
		synctest.Wait()
		// Left: f1's answered WaitFor attempt timeout (due at 30 s, stale) and
		// its wait timer. f2 closed: its timers are gone.
		if n := h.core.timers.len(); n != 2 {
			t.Fatalf("%d timers armed, want 2", n)
		}
		seq := h.w.NextSeq()
		time.Sleep(time.Hour)
		synctest.Wait()
		got = tasks(s)
		if len(got) != 1 || got[0].FlowID != "f1" || got[0].Method != engine.MethodExecute || !got[0].Results.Conditions[0].Satisfied {
			t.Fatalf("after an hour: %v", got)
		}
		// The wait timer's fire and the Execute's start (ASYNC: held, and
		// logged on its own after holdLimit without a result) were logged;
		// the stale attempt timeout was not.
		time.Sleep(holdLimit)
		synctest.Wait()
		if n := h.w.NextSeq() - seq; n != 2 {
			t.Fatalf("%d batches after the hour, want 2", n)
		}
		if n := h.core.timers.len(); n != 1 {
			t.Fatalf("%d timers armed after the hour, want f1's Execute attempt timeout", n)
		}
	})
}

// Commands of one flow are decided against its head state while earlier
// ones are in flight; each is answered only once durable, and reads see
// committed state only. Heads are dropped once committed.
//
// Covers: G3
func TestSequencer_HeadStateAndDurableAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newHarness(t, blobs, 1)
		defer h.stop()
		blobs.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent {
				return mem.Fault{Latency: time.Second}
			}
			return mem.Fault{}
		})
		ctx := context.Background()
		began := time.Now()
		started := make(chan time.Duration, 1)
		go func() {
			h.start("f1", "a", "")
			started <- time.Since(began)
		}()
		synctest.Wait()
		if st, _ := h.core.Flow(ctx, "f1", ""); st != nil {
			t.Fatal("a read saw a start that is not durable")
		}
		res, err := h.core.Command(ctx, "f1", engine.PublishToChannel{FlowID: "f1",
			Messages: []engine.Publish{{Channel: "c", Value: engine.Value{Type: ":", Data: []byte("m")}}}})
		if err != nil {
			t.Fatalf("a publish decided on the in-flight start: %v", err)
		}
		if took := <-started; took != time.Second {
			t.Fatalf("start answered after %v, want 1s (its batch)", took)
		}
		if took := time.Since(began); took != 2*time.Second || res.Status != engine.StatusRunning {
			t.Fatalf("publish answered after %v (%+v), want 2s", took, res)
		}
		st, _ := h.core.Flow(ctx, "f1", "")
		if len(st.Channels["c"]) != 1 {
			t.Fatalf("committed state = %+v", st)
		}
		synctest.Wait()
		heads, _ := call(ctx, h.core.seq, func() int { return len(h.core.seq.heads) })
		if heads != 0 {
			t.Fatalf("%d heads left after everything committed", heads)
		}
		blobs.SetFaults(nil)
	})
}

// ASYNC: the task is sent before its start is durable (W4); after a crash
// before that, the same attempt runs again and consumes no retry (T3). A
// SYNC attempt is sent only once its start is durable, and after a crash it
// fails with NOT_COMPLETED (T2).
//
// Covers: W4, T2, T3
func TestDispatch_AsyncSendsFirstAndRerunsAfterCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newHarness(t, blobs, 1)
		s := h.session("w1", 5, "a")
		// Every batch takes 1 s to write.
		blobs.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent {
				return mem.Fault{Latency: time.Second}
			}
			return mem.Fault{}
		})
		startAsync := func(id, step string) {
			go func() {
				if _, err := h.core.StartFlow(context.Background(), engine.StartFlow{FlowID: id, FlowType: "a", StartStep: step}); err != nil {
					t.Errorf("start %s: %v", id, err)
				}
			}()
		}
		// 0 s: f1's start is written until 1 s; then its task is sent at
		// once and its start, held for holdLimit without a result, is
		// written until about 2 s.
		startAsync("f1", "Async")
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := tasks(s); len(got) != 1 || got[0].FlowID != "f1" {
			t.Fatalf("at 1.5 s: %v, want f1's ASYNC task", got)
		}
		// 1.5 s: f2's start is written 2-3 s, its TaskStarted 3-4 s; the task
		// is sent at 4 s.
		startAsync("f2", "Sync")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := tasks(s); len(got) != 0 {
			t.Fatalf("at 3.5 s: %v, want none (SYNC: its start is not durable)", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := tasks(s); len(got) != 1 || got[0].FlowID != "f2" {
			t.Fatalf("at 4.5 s: %v, want f2's SYNC task", got)
		}
		// 4.5 s: f3's start is written until 5.5 s, its task sent then, its
		// TaskStarted written from 5.5 s + holdLimit until 6.5 s + holdLimit.
		// Crash at 6 s.
		startAsync("f3", "Async")
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := tasks(s); len(got) != 1 || got[0].FlowID != "f3" {
			t.Fatalf("at 6 s: %v, want f3's ASYNC task", got)
		}
		h.crash()
		blobs.SetFaults(nil)

		h2 := newHarness(t, blobs, 2)
		defer h2.stop()
		s2 := h2.session("w2", 5, "a")
		synctest.Wait() // NOT_COMPLETED retries wait no backoff

		byFlow := map[string]*engine.Task{}
		for _, task := range tasks(s2) {
			byFlow[task.FlowID] = task
		}
		if task := byFlow["f3"]; task == nil || task.Attempt != 1 {
			t.Fatalf("f3 after the crash: %+v, want attempt 1 again (T3)", task)
		}
		st, _ := h2.core.cfg.Store.Flow("f3")
		if st.Steps[0].LastFailure != nil {
			t.Fatalf("f3 consumed a retry: %+v", st.Steps[0].LastFailure)
		}
		for _, id := range []string{"f1", "f2"} {
			st, _ := h2.core.cfg.Store.Flow(id)
			if f := st.Steps[0].LastFailure; f == nil || f.Type != engine.FailureNotCompleted || byFlow[id].Attempt != 2 {
				t.Fatalf("%s after the crash: failure %+v, task %+v; want NOT_COMPLETED and attempt 2 (T2)", id, f, byFlow[id])
			}
		}
	})
}

// A run started before any worker registered its type gives every step a
// WaitFor; once a worker declares the step without one, the definition
// moves the step to Execute before any WaitFor runs (the dispatcher
// answers "no wait" itself for one still handed out) and the worker gets
// the Execute. A step declared with a WaitFor keeps it.
//
// Covers: W5, E4
func TestDispatch_UndeclaredWaitForIsAnsweredByTheServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, mem.New(), 1)
		defer h.stop()
		h.start("f1", "a", "S")
		h.start("f2", "a", "W")
		synctest.Wait()
		st, _ := h.core.cfg.Store.Flow("f1")
		if st.Definition != nil || st.Steps[0].Attempt.Method != engine.MethodWaitFor {
			t.Fatalf("f1 before registration: %+v", st.Steps[0])
		}
		s := h.session("w1", 5, "a")
		synctest.Wait()
		byFlow := map[string]*engine.Task{}
		for _, task := range tasks(s) {
			byFlow[task.FlowID] = task
		}
		if task := byFlow["f1"]; task == nil || task.Method != engine.MethodExecute {
			t.Fatalf("f1 (S has no WaitFor) got %+v, want its Execute", task)
		}
		if task := byFlow["f2"]; task == nil || task.Method != engine.MethodWaitFor {
			t.Fatalf("f2 (W has a WaitFor) got %+v, want its WaitFor", task)
		}
		st, _ = h.core.cfg.Store.Flow("f1")
		if st.Definition == nil || len(st.History) != 1 || st.Steps[0].HasWaitFor {
			t.Fatalf("f1 after registration: definition %v, history %+v, step %+v; want no WaitFor run", st.Definition, st.History, st.Steps[0])
		}
	})
}

// An ASYNC start is held and logged in front of the task's result: one log
// batch per step. A crash while it is held loses it; the next process
// hands the attempt out again with the same number, consuming no retry,
// and refuses the old attempt's late result.
//
// Covers: W4, T3, W2
func TestDispatch_AsyncStartRidesWithTheResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newHarness(t, blobs, 1)
		s := h.session("w1", 5, "a")
		h.start("f1", "a", "S") // no durability given: ASYNC
		synctest.Wait()
		got := tasks(s)
		if len(got) != 1 {
			t.Fatalf("tasks = %v, want f1's", got)
		}
		seq := h.w.NextSeq()
		if a := h.complete(s, got[0]); a.Status != server.AckAccepted {
			t.Fatalf("ack = %+v", a)
		}
		if n := h.w.NextSeq() - seq; n != 1 {
			t.Fatalf("%d batches for the step, want 1", n)
		}
		data, _, err := blobs.Get(context.Background(), testLayout.LogKey(seq))
		if err != nil {
			t.Fatal(err)
		}
		b, err := wal.DecodeAt(testLayout.LogKey(seq), seq, data)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, raw := range b.Records {
			recs, err := decodeEnvelope(raw)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				types = append(types, r.Type())
			}
		}
		if want := "[attempt_started execute_completed flow_closed]"; fmt.Sprint(types) != want {
			t.Fatalf("records of the step's batch = %v, want %s", types, want)
		}

		// f2's start is held when the process crashes.
		h.start("f2", "a", "S")
		synctest.Wait()
		old := tasks(s)
		if len(old) != 1 || old[0].Attempt != 1 {
			t.Fatalf("tasks = %v, want f2's attempt 1", old)
		}
		h.crash()

		h2 := newHarness(t, blobs, 2)
		defer h2.stop()
		s2 := h2.session("w2", 5, "a")
		synctest.Wait()
		again := tasks(s2)
		if len(again) != 1 || again[0].FlowID != "f2" || again[0].Attempt != 1 {
			t.Fatalf("after the crash: %v, want f2's attempt 1 again (T3)", again)
		}
		if st, _ := h2.core.cfg.Store.Flow("f2"); st.Steps[0].LastFailure != nil {
			t.Fatalf("f2 consumed a retry: %+v", st.Steps[0].LastFailure)
		}
		if a, err := s2.Result(context.Background(), old[0].Token, engine.ExecuteResult{Token: old[0].Token,
			Decision: engine.Decision{Kind: engine.DecideGracefulComplete}}); err != nil || a.Status != server.AckStaleEpoch {
			t.Fatalf("late result of epoch 1 = %+v, %v; want STALE_EPOCH", a, err)
		}
		if a := h2.complete(s2, again[0]); a.Status != server.AckAccepted {
			t.Fatalf("ack = %+v", a)
		}
		if st, _ := h2.core.cfg.Store.Flow("f2"); st.Status != engine.StatusCompleted {
			t.Fatalf("f2 = %s, want COMPLETED", st.Status)
		}
	})
}
