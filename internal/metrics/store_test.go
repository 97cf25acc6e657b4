package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/blobtest"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/blob/mem"
)

// The metered store is the store: it passes the conformance suite.
func TestMeterStore_Conformance(t *testing.T) {
	t.Parallel()
	m := New()
	t.Cleanup(func() { // after the parallel subtests
		if m.store.requests[storeGet][storeOK].Load() == 0 || m.store.requests[storePutIfAbsent][storePrecondition].Load() == 0 {
			t.Error("the suite's requests were not counted")
		}
	})
	blobtest.Run(t, func(t *testing.T) blob.Store { return m.MeterStore(mem.New()) })
}

// Each request counts once under its kind and result; the latency
// histogram of its kind gets its duration.
func TestMeterStore_CountsByKindAndResult(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		raw := mem.New()
		m := New()
		s := m.MeterStore(raw)
		ctx := context.Background()
		check := func(what string, err, want error) {
			t.Helper()
			if !errors.Is(err, want) || (want == nil && err != nil) {
				t.Fatalf("%s = %v, want %v", what, err, want)
			}
		}
		_, _, err := s.Get(ctx, "k")
		check("get missing", err, blob.ErrNotFound)
		v, err := s.PutIfAbsent(ctx, "k", []byte("1"))
		check("put", err, nil)
		_, err = s.PutIfAbsent(ctx, "k", []byte("1"))
		check("put existing", err, blob.ErrPrecondition)
		_, err = s.PutIfMatch(ctx, "k", []byte("2"), v)
		check("put if match", err, nil)
		_, err = s.PutIfMatch(ctx, "k", []byte("3"), v)
		check("put if match stale", err, blob.ErrPrecondition)
		_, err = s.List(ctx, "", "", 0)
		check("list", err, nil)

		raw.SetFaults(func(op, key string) mem.Fault {
			switch op {
			case blob.OpGet:
				return mem.Fault{Latency: 3 * time.Millisecond}
			case blob.OpList:
				return mem.Fault{Err: mem.ErrServer}
			case blob.OpDelete:
				return mem.Fault{Err: blob.Permanent(op, key, mem.ErrDenied)}
			case blob.OpPutIfMatch:
				return mem.Fault{Latency: time.Hour}
			}
			return mem.Fault{}
		})
		_, _, err = s.Get(ctx, "k")
		check("slow get", err, nil)
		_, err = s.List(ctx, "", "", 0)
		check("list on a failing server", err, blob.ErrTransient)
		err = s.Delete(ctx, "k")
		check("denied delete", err, blob.ErrPermanent)
		// Cut off by a deadline: transient, the store is slow.
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = s.PutIfMatch(tctx, "k", []byte("4"), v)
		cancel()
		check("hung put if match", err, blob.ErrTransient)
		// Cancelled by its caller: canceled, says nothing about the store.
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		_, err = s.PutIfMatch(cctx, "k", []byte("5"), v)
		check("cancelled put if match", err, blob.ErrTransient)

		want := map[[2]int]uint64{
			{storeGet, storeNotFound}: 1, {storeGet, storeOK}: 1,
			{storePutIfAbsent, storeOK}: 1, {storePutIfAbsent, storePrecondition}: 1,
			{storePutIfMatch, storeOK}: 1, {storePutIfMatch, storePrecondition}: 1,
			{storePutIfMatch, storeTransient}: 1, {storePutIfMatch, storeCanceled}: 1,
			{storeList, storeOK}: 1, {storeList, storeTransient}: 1,
			{storeDelete, storePermanent}: 1,
		}
		for op := range numStoreOps {
			for res := range numStoreResults {
				if got := m.store.requests[op][res].Load(); got != want[[2]int{op, res}] {
					t.Errorf("%s %s = %d, want %d", storeOpLabels[op], storeResultLabels[res], got, want[[2]int{op, res}])
				}
			}
		}
		text := metricsText(t, m)
		for _, line := range []string{
			`dexzd_store_requests_total{op="put_if_match",result="canceled"} 1`,
			`dexzd_store_requests_total{op="delete",result="permanent"} 1`,
			// get: one at once, one of 3 ms.
			`dexzd_store_request_seconds_bucket{op="get",le="0.0025"} 1`,
			`dexzd_store_request_seconds_bucket{op="get",le="0.005"} 2`,
			`dexzd_store_request_seconds_sum{op="get"} 0.003`,
			// put_if_match: two at once, then 2 s and 1 s.
			`dexzd_store_request_seconds_bucket{op="put_if_match",le="1"} 3`,
			`dexzd_store_request_seconds_bucket{op="put_if_match",le="2.5"} 4`,
			`dexzd_store_request_seconds_sum{op="put_if_match"} 3`,
			`dexzd_store_request_seconds_count{op="put_if_match"} 4`,
			"dexzd_store_fsyncs_total 0",
		} {
			if !strings.Contains(text, line+"\n") {
				t.Errorf("metrics lack %q", line)
			}
		}
	})
}

// The fsyncs of a metered fs store are exported.
func TestMeterStore_FsyncsOfTheFSBackend(t *testing.T) {
	t.Parallel()
	raw, err := fs.Open(t.TempDir(), fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	s := m.MeterStore(raw)
	defer s.Close()
	for _, k := range []string{"a/1", "a/2", "a/3"} {
		if _, err := s.PutIfAbsent(t.Context(), k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	n := raw.Fsyncs()
	if n < 6 {
		t.Fatalf("the strict fs store made %d fsyncs for 3 writes", n)
	}
	if text := metricsText(t, m); !strings.Contains(text, "dexzd_store_fsyncs_total "+u64(n)+"\n") {
		t.Fatalf("metrics lack dexzd_store_fsyncs_total %d:\n%s", n, text)
	}
}

// The wrapper's cost per request, against the memory store's own (the
// cheapest backend: a real one takes from 0.1 ms to tens of ms).
func BenchmarkMeterStore(b *testing.B) {
	raw := mem.New()
	if _, err := raw.PutIfAbsent(context.Background(), "k", []byte("v")); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		s    blob.Store
	}{{"raw", raw}, {"metered", New().MeterStore(raw)}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				if _, _, err := bc.s.Get(ctx, "k"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
