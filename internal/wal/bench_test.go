package wal_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/testenv"
	"github.com/dexzd/dexzd/internal/wal"
)

// benchStores are the stores BenchmarkAppend runs against. An entry opens a
// store for one sub-benchmark (and registers its cleanup with b.Cleanup);
// BenchmarkAppend writes under a fresh random key prefix, so entries may
// share a bucket, directory or schema. The minio and postgres entries skip
// (or fail, under DEX_TEST_REQUIRE) when run without scripts/testenv.sh.
var benchStores = []struct {
	name string
	open func(b testing.TB) blob.Store
}{
	{"mem", func(b testing.TB) blob.Store { return mem.New() }},
	// An in-memory store whose writes take 5 ms, like a fast object store:
	// shows group commit turning latency into batch size.
	{"mem-5ms", func(b testing.TB) blob.Store {
		s := mem.New()
		s.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent {
				return mem.Fault{Latency: 5 * time.Millisecond}
			}
			return mem.Fault{}
		})
		return s
	}},
	{"fs-strict", func(b testing.TB) blob.Store { return openFS(b, fs.Strict) }},
	{"fs-processCrashSafe", func(b testing.TB) blob.Store { return openFS(b, fs.ProcessCrashSafe) }},
	{"minio", testenv.NewS3Store},
	{"postgres", testenv.NewPostgresStore},
}

func openFS(b testing.TB, mode fs.Mode) blob.Store {
	s, err := fs.Open(b.TempDir(), mode)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkAppend measures Submit throughput and per-record latency (submit
// to acknowledgement) with 1, 16 and 256 concurrent submitters of 128-byte
// records.
func BenchmarkAppend(b *testing.B) {
	for _, st := range benchStores {
		for _, n := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("store=%s/submitters=%d", st.name, n), func(b *testing.B) {
				s := st.open(b)
				b.Cleanup(func() { _ = s.Close() })
				benchAppend(b, s, n)
			})
		}
	}
}

func benchAppend(b *testing.B, s blob.Store, submitters int) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	l := wal.MustLayout("bench/"+hex.EncodeToString(rnd[:]), "n1")
	w, err := wal.NewWriter(wal.WriterConfig{
		Store: s, Layout: l, Epoch: 1,
		OnDurable: func(wal.Batch) error { return nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	w.Start(ctx)
	defer w.Stop()

	record := make([]byte, 128)
	var issued atomic.Int64
	lat := make([][]time.Duration, submitters)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range submitters {
		wg.Go(func() {
			for issued.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if _, err := w.Submit(ctx, record); err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()

	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(p*float64(len(all)-1))]) / float64(time.Millisecond)
	}
	st := w.Stats()
	b.ReportMetric(float64(st.Records)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(st.Batches)/elapsed.Seconds(), "batches/s")
	b.ReportMetric(pct(0.50), "p50-latency-ms")
	b.ReportMetric(pct(0.99), "p99-latency-ms")
	if st.Batches > 0 {
		b.ReportMetric(float64(st.Records)/float64(st.Batches), "records/batch")
	}
}
