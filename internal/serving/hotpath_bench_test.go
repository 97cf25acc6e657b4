package serving

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
// limits.valueObjectBytes) on the memory store and the node's default
// value cache, as the node does; objects=false keeps every value in the
// log; objects=uncached (ChainLarge) has value objects without the cache.
// The worker hands a large value on as a copy of its bytes, as a value
// that crossed the wire is.
func BenchmarkHotPath_Chain(b *testing.B) {
	for _, objects := range []objectsMode{objectsOff, objectsOn} {
		for _, callers := range []int{1, 32} {
			b.Run(fmt.Sprintf("objects=%s/callers=%d", objects, callers), func(b *testing.B) { benchChain(b, callers, smallInput, objects) })
		}
	}
}

// BenchmarkHotPath_ChainLarge is BenchmarkHotPath_Chain with an input of
// just under the 4 MiB value limit carried through every step: what one
// large flow costs the serving core (issue 11).
func BenchmarkHotPath_ChainLarge(b *testing.B) {
	pad := bytes.Repeat([]byte("L"), 4<<20-1<<10)
	input := engine.Value{Type: "json:bench.ChainInput", Data: append(append([]byte(`{"pad":"`), pad...), `"}`...)}
	for _, objects := range []objectsMode{objectsOff, objectsUncached, objectsOn} {
		b.Run(fmt.Sprintf("objects=%s", objects), func(b *testing.B) { benchChain(b, 1, input, objects) })
	}
}

// objectsMode is how a benchmark's core keeps large values.
type objectsMode int

const (
	objectsOff      objectsMode = iota // in the log
	objectsOn                          // value objects and the default value cache
	objectsUncached                    // value objects without a cache
)

func (m objectsMode) String() string { return [...]string{"false", "true", "uncached"}[m] }

// benchValueCacheBytes is config.DefaultValueCacheBytes.
const benchValueCacheBytes = 32 << 20

// benchMaxRecord is the record limit the node sets for the default limits
// (node/leaseperiod.go): twice the 9 MiB gRPC message, plus 1 MiB.
const benchMaxRecord = 19 << 20

var smallInput = engine.Value{Type: "json:number", Data: []byte("1")}

var chainDef = &engine.FlowDefinition{Type: "chain", Steps: map[string]engine.StepDef{"S1": {}, "S2": {}, "S3": {}}}

// chainCore starts a serving core on a fresh local store and the memory
// log with a worker of slots slots that runs the chain flow (S1 -> S2 ->
// S3 -> complete, each passing its input on); stop ends them.
func chainCore(tb testing.TB, ctx context.Context, slots int, objects objectsMode) (c *Core, blobs *mem.Store, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	store, err := flowstore.OpenLocal(tb.TempDir(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	blobs = mem.New()
	next, err := wal.Fence(ctx, blobs, testLayout, 1, 0, ReplayApply(store))
	if err != nil {
		tb.Fatal(err)
	}
	cfg := CoreConfig{NodeID: "n1", ProcessID: "p", Epoch: 1, Store: store, MaxRecordBytes: benchMaxRecord - 8}
	if objects != objectsOff {
		values := &wal.Values{Store: blobs, Layout: testLayout}
		if objects == objectsOn {
			values.Cache = wal.NewValueCache(benchValueCacheBytes)
		}
		cfg.Values, cfg.ValueObjectBytes = values, benchValueObjectBytes
	}
	c = NewCore(cfg)
	w, err := wal.NewWriter(wal.WriterConfig{Store: blobs, Layout: testLayout, Epoch: 1, NextSeq: next, OnDurable: c.OnDurable,
		MaxRecordBytes: benchMaxRecord})
	if err != nil {
		tb.Fatal(err)
	}
	c.SetWriter(w)
	w.Start(ctx)
	c.Start(ctx)
	if err := c.Recover(ctx); err != nil {
		tb.Fatal(err)
	}
	s, err := c.OpenSession(ctx, server.WorkerHello{WorkerID: "w", MaxConcurrent: slots,
		FlowTypes: []server.FlowTypeDecl{{Definition: chainDef}}})
	if err != nil {
		tb.Fatal(err)
	}
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
					in := t.Input
					if len(in.Data) >= benchValueObjectBytes {
						in.Data = bytes.Clone(in.Data) // as it comes back over the wire
					}
					d := engine.Decision{Kind: engine.DecideGracefulComplete, Output: in}
					if nextStep := map[string]string{"S1": "S2", "S2": "S3"}[t.StepType]; nextStep != "" {
						d = engine.Decision{Kind: engine.DecideMovements, Movements: []engine.Movement{{StepType: nextStep, Input: in}}}
					}
					if _, err := s.Result(ctx, t.Token, engine.ExecuteResult{Token: t.Token, Decision: d}); err != nil && ctx.Err() == nil {
						tb.Errorf("result: %v", err)
					}
				}(m.Task)
			}
		}
	}()
	return c, blobs, func() {
		cancel()
		workers.Wait()
		s.Close()
		c.Stop()
		_ = w.Stop()
		store.Close()
	}
}

// benchValueObjectBytes is config.DefaultValueObjectBytes.
const benchValueObjectBytes = 256 << 10

func benchChain(b *testing.B, callers int, input engine.Value, objects objectsMode) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, blobs, stop := chainCore(b, ctx, 2*callers, objects)
	defer stop()
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
}

// TestMeasure_OpenLoopLargeInputs measures, in the serving core alone (no
// gRPC, the log in memory, the local store on disk), what 1 % of flows
// with 4 MiB inputs do to the others' latency in an open loop: 100 chain
// flows/s for 20 s, every 100th one large, with value objects off, on without the value cache and on with it,
// alternating. It prints the ordinary flows' p50 and p99 and fails only on
// a flow that did not complete. Off by default (it takes real time):
//
//	DEX_MEASURE_OPEN_LOOP=1 go test -run TestMeasure_OpenLoopLargeInputs -v ./internal/serving
func TestMeasure_OpenLoopLargeInputs(t *testing.T) {
	if os.Getenv("DEX_MEASURE_OPEN_LOOP") == "" {
		t.Skip("set DEX_MEASURE_OPEN_LOOP=1 to measure")
	}
	pad := bytes.Repeat([]byte("L"), 4<<20-1<<10)
	large := engine.Value{Type: "json:bench.ChainInput", Data: append(append([]byte(`{"pad":"`), pad...), `"}`...)}
	const rate, seconds = 100, 20
	for round := range 2 {
		for _, objects := range []objectsMode{objectsOff, objectsUncached, objectsOn} {
			c, _, stop := chainCore(t, t.Context(), 256, objects)
			var mu sync.Mutex
			var lat []time.Duration
			var wg sync.WaitGroup
			tick := time.NewTicker(time.Second / rate)
			for i := range rate * seconds {
				<-tick.C
				wg.Go(func() {
					in, big := smallInput, i%100 == 99
					if big {
						in = large
					}
					id := fmt.Sprintf("f-%d", i)
					began := time.Now()
					if _, err := c.StartFlow(t.Context(), engine.StartFlow{FlowID: id, FlowType: "chain", StartStep: "S1", Input: in}); err != nil {
						t.Errorf("start %s: %v", id, err)
						return
					}
					if st, err := c.WaitForFlow(t.Context(), id, ""); err != nil || st.Status != engine.StatusCompleted {
						t.Errorf("flow %s: %v", id, err)
						return
					}
					if !big {
						mu.Lock()
						lat = append(lat, time.Since(began))
						mu.Unlock()
					}
				})
			}
			tick.Stop()
			wg.Wait()
			stop()
			slices.Sort(lat)
			pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
			t.Logf("round %d, objects=%s: %d ordinary flows, p50 %v, p99 %v, max %v", round+1, objects, len(lat),
				pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))
		}
	}
}
