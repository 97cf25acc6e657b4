package serving

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/wal"
)

// The serving core's hot path in one process, without gRPC and without
// fsync (the log is in memory, the local store is Pebble in a temporary
// directory): flows of three sequential steps, each a worker result that
// moves to the next step, like `dexcli bench chain`. One op is one flow.
// Profile with
//
//	go test -run '^$' -bench HotPath -cpuprofile cpu.out ./internal/node/
//
// objects=true runs with value objects (from 256 KiB, the default of
// limits.valueObjectBytes) on the memory store, as the node does;
// objects=false keeps every value in the log.
func BenchmarkHotPath_Chain(b *testing.B) {
	for _, objects := range []bool{false, true} {
		for _, callers := range []int{1, 32} {
			b.Run(fmt.Sprintf("objects=%t/callers=%d", objects, callers), func(b *testing.B) { benchChain(b, callers, smallInput, objects) })
		}
	}
}

// BenchmarkHotPath_ChainLarge is BenchmarkHotPath_Chain with an input of
// just under the 4 MiB value limit carried through every step: what one
// large flow costs the serving core (issue 11).
func BenchmarkHotPath_ChainLarge(b *testing.B) {
	pad := bytes.Repeat([]byte("L"), 4<<20-1<<10)
	input := engine.Value{Type: "json:bench.ChainInput", Data: append(append([]byte(`{"pad":"`), pad...), `"}`...)}
	for _, objects := range []bool{false, true} {
		b.Run(fmt.Sprintf("objects=%t", objects), func(b *testing.B) { benchChain(b, 1, input, objects) })
	}
}

// benchMaxRecord is the record limit the node sets for the default limits
// (node/leaseperiod.go): twice the 9 MiB gRPC message, plus 1 MiB.
const benchMaxRecord = 19 << 20

var smallInput = engine.Value{Type: "json:number", Data: []byte("1")}

var chainDef = &engine.FlowDefinition{Type: "chain", Steps: map[string]engine.StepDef{"S1": {}, "S2": {}, "S3": {}}}

// benchValueObjectBytes is config.DefaultValueObjectBytes.
const benchValueObjectBytes = 256 << 10

func benchChain(b *testing.B, callers int, input engine.Value, objects bool) {
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
	cfg := CoreConfig{NodeID: "n1", ProcessID: "p", Epoch: 1, Store: store, MaxRecordBytes: benchMaxRecord - 8}
	if objects {
		cfg.Values, cfg.ValueObjectBytes = &wal.Values{Store: blobs, Layout: testLayout}, benchValueObjectBytes
	}
	c := NewCore(cfg)
	w, err := wal.NewWriter(wal.WriterConfig{Store: blobs, Layout: testLayout, Epoch: 1, NextSeq: next, OnDurable: c.OnDurable,
		MaxRecordBytes: benchMaxRecord})
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
	s, err := c.OpenSession(ctx, server.WorkerHello{WorkerID: "w", MaxConcurrent: 2 * callers,
		FlowTypes: []server.FlowTypeDecl{{Definition: chainDef}}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var workers sync.WaitGroup
	workers.Add(1)
	go func() { // the worker: S1 -> S2 -> S3 -> complete
		defer workers.Done()
		for {
			select {
			case <-s.Notify():
			case <-ctx.Done():
				return
			}
			for _, m := range s.Take() {
				if m.Task == nil {
					continue
				}
				workers.Add(1)
				go func(t *engine.Task) {
					defer workers.Done()
					d := engine.Decision{Kind: engine.DecideGracefulComplete, Output: t.Input}
					if nextStep := map[string]string{"S1": "S2", "S2": "S3"}[t.StepType]; nextStep != "" {
						d = engine.Decision{Kind: engine.DecideMovements, Movements: []engine.Movement{{StepType: nextStep, Input: t.Input}}}
					}
					if _, err := s.Result(ctx, t.Token, engine.ExecuteResult{Token: t.Token, Decision: d}); err != nil && ctx.Err() == nil {
						b.Errorf("result: %v", err)
					}
				}(m.Task)
			}
		}
	}()
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	var callersWG sync.WaitGroup
	for range callers {
		callersWG.Add(1)
		go func() {
			defer callersWG.Done()
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					return
				}
				id := fmt.Sprintf("f-%d", i)
				if _, err := c.StartFlow(ctx, engine.StartFlow{FlowID: id, FlowType: "chain", StartStep: "S1", Input: input}); err != nil {
					b.Errorf("start: %v", err)
					return
				}
				st, err := c.WaitForFlow(ctx, id, "")
				if err != nil || st.Status != engine.StatusCompleted {
					b.Errorf("flow %s: %v, %v", id, st.Status, err)
					return
				}
			}
		}()
	}
	callersWG.Wait()
	b.StopTimer()
	var logged int
	for _, k := range blobs.Keys() {
		if _, ok := testLayout.ParseLogKey(k); ok {
			data, _ := blobs.Raw(k)
			logged += len(data)
		}
	}
	b.ReportMetric(float64(logged)/float64(b.N), "log-B/op")
	cancel()
	workers.Wait()
}
