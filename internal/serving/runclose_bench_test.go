package serving

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/wal"
)

// BenchmarkRunClose is the per-completion cost of a run while unrelated
// work waits: `other` armed timers, `other` queued tasks of a flow type no
// worker serves (they wait, W5) and `other` retries of the benchmark's own
// flow type waiting for their backoff, all of other runs. One op
// is one flow of one step with a flow timeout, started, completed by the
// worker, closed (which drops the run's timers and queued tasks) and
// waited for, one at a time; the in-process hot path, without gRPC and
// without fsync, like BenchmarkHotPath_Chain. The cost must not depend on
// `other`:
//
//	go test -run '^$' -bench RunClose -benchtime 2000x ./internal/node/
//
// Figures are in the README ("Per-run costs").
func BenchmarkRunClose(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("other=%d", n), func(b *testing.B) { benchRunClose(b, n) })
	}
}

var closeDef = &engine.FlowDefinition{Type: "close", Steps: map[string]engine.StepDef{"S": {}}}

func benchRunClose(b *testing.B, other int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := flowstore.OpenLocal(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	blobs := mem.New()
	next, err := wal.Fence(ctx, blobs, testLayout, 1, 0, ReplayApply(store))
	if err != nil {
		b.Fatal(err)
	}
	c := NewCore(CoreConfig{NodeID: "n1", ProcessID: "p", Epoch: 1, Store: store})
	w, err := wal.NewWriter(wal.WriterConfig{Store: blobs, Layout: testLayout, Epoch: 1, NextSeq: next, OnDurable: c.OnDurable})
	if err != nil {
		b.Fatal(err)
	}
	c.SetWriter(w)
	w.Start(ctx)
	c.Start(ctx)
	defer func() {
		c.Stop()
		_ = w.Stop()
	}()
	if err := c.Recover(ctx); err != nil {
		b.Fatal(err)
	}

	// The unrelated work: timers a day away, tasks nobody takes and
	// retries a day away. They go straight into the timer wheel and the
	// dispatcher (building them through the engine would take minutes at
	// a million).
	far := time.Now().Add(24 * time.Hour)
	for i := range other {
		flowID := fmt.Sprintf("other-%d", i)
		c.timers.arm(engine.ArmTimer{FlowID: flowID, RunID: "r", Timer: engine.Timer{Kind: engine.TimerFlowTimeout},
			At: far.Add(time.Duration(i) * time.Millisecond)})
		c.disp.enqueue(engine.TaskRef{FlowID: flowID, RunID: "r", FlowType: "idle", StepExecID: "S-1", StepType: "S",
			Method: engine.MethodExecute, Attempt: 1})
		c.disp.enqueue(engine.TaskRef{FlowID: flowID, RunID: "r", FlowType: "close", StepExecID: "S-1", StepType: "S",
			Method: engine.MethodExecute, Attempt: 2, NotBefore: far})
	}

	s, err := c.OpenSession(ctx, server.WorkerHello{WorkerID: "w", MaxConcurrent: 4,
		FlowTypes: []server.FlowTypeDecl{{Definition: closeDef}}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var worker sync.WaitGroup
	worker.Go(func() { // completes every task at once
		for {
			select {
			case <-s.Notify():
			case <-ctx.Done():
				return
			}
			for _, m := range s.Take() {
				if t := m.Task; t != nil {
					d := engine.Decision{Kind: engine.DecideGracefulComplete, Output: t.Input}
					if _, err := s.Result(ctx, t.Token, engine.ExecuteResult{Token: t.Token, Decision: d}); err != nil && ctx.Err() == nil {
						b.Errorf("result: %v", err)
					}
				}
			}
		}
	})

	input := engine.Value{Type: "json:number", Data: []byte("1")}
	i := 0
	// Collect the setup's garbage now: a collection of the million-entry
	// heap still marking in the timed loop would be charged to the first
	// completions (it made the 1M figure vary from 0.3 to 1.9 ms).
	runtime.GC()
	b.ReportAllocs()
	for b.Loop() {
		i++
		id := fmt.Sprintf("f-%d", i)
		if _, err := c.StartFlow(ctx, engine.StartFlow{FlowID: id, FlowType: "close", StartStep: "S", Input: input, Timeout: time.Hour}); err != nil {
			b.Fatalf("start: %v", err)
		}
		st, err := c.WaitForFlow(ctx, id, "")
		if err != nil {
			b.Fatalf("wait %s: %v", id, err)
		}
		if st.Status != engine.StatusCompleted {
			b.Fatalf("flow %s: %v", id, st.Status)
		}
	}
	b.StopTimer()
	// Every closed run dropped its own timer, none of the others' (the
	// last close is performed just after its state is readable).
	for deadline := time.Now().Add(5 * time.Second); c.timers.len() != other && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := c.timers.len(); n != other {
		b.Fatalf("%d timers armed after %d closed runs, want the %d others", n, i, other)
	}
	cancel()
	worker.Wait()
}
