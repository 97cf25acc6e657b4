package wal_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/wal"
)

// Group commit stops a batch at MaxBatchBytes; a record larger than that,
// up to MaxRecordBytes, is written in a batch of its own; QueuedBytes
// counts what waits for a batch.
//
// Covers: G1
func TestWriter_BatchCapAndLargeRecordAlone(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		rec.setFault(latency(time.Second))
		w, a := newWriter(t, s, func(c *wal.WriterConfig) {
			c.MaxBatchBytes = 40
			c.MaxRecordBytes = 100
		})
		if _, err := w.Submit(t.Context(), make([]byte, 97)); !errors.Is(err, wal.ErrRecordTooLarge) {
			t.Fatalf("a record above MaxRecordBytes: got %v, want ErrRecordTooLarge", err)
		}
		first := w.SubmitAsync([]byte("x"))
		synctest.Wait() // x is in flight; the rest queue
		if q := w.QueuedBytes(); q != 0 {
			t.Fatalf("QueuedBytes %d with only the batch in flight, want 0", q)
		}
		futs := []wal.Future{first}
		recs := []string{"a", strings.Repeat("b", 90), "c", strings.Repeat("d", 30), "e"}
		want := 0
		for _, r := range recs {
			futs = append(futs, w.SubmitAsync([]byte(r)))
			want += 4 + len(r)
		}
		if q := w.QueuedBytes(); q != int64(want) {
			t.Fatalf("QueuedBytes %d, want %d", q, want)
		}
		for _, f := range futs {
			if _, err := f.Result(); err != nil {
				t.Fatal(err)
			}
		}
		if q := w.QueuedBytes(); q != 0 {
			t.Fatalf("QueuedBytes %d after the writes, want 0", q)
		}
		var sizes []int
		for _, b := range a.get() {
			sizes = append(sizes, len(b.Records))
		}
		// [x], [a], [bbb…] alone (94 > 40), [c ddd…] (5+34 <= 40), [e].
		if want := []int{1, 1, 1, 2, 1}; !slices.Equal(sizes, want) {
			t.Fatalf("batch sizes %v, want %v", sizes, want)
		}
	})
}

// A record above MaxBatchBytes, written alone, gets an attempt cut-off
// stretched in proportion: on a store that takes capped batches within
// AttemptTimeout, the largest legal record is written too. Before, every
// attempt of a 3x record on such a store was cut off until LogWriteLimit
// passed and the write failed (the process would exit, L10).
//
// Covers: L10, G1
func TestWriter_LargeRecordGetsAProportionalAttemptTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		// The store uploads 1000 bytes per 100 ms: a capped batch (1000
		// bytes) takes just under AttemptTimeout.
		w, _ := newWriter(t, s, func(c *wal.WriterConfig) {
			c.MaxBatchBytes = 1000
			c.MaxRecordBytes = 3000
			c.AttemptTimeout = 110 * time.Millisecond
		})
		rec.setFault(func(op, key string) mem.Fault {
			if op != blob.OpPutIfAbsent {
				return mem.Fault{}
			}
			return mem.Fault{Latency: 300 * time.Millisecond} // the 2996-byte record at 1000 bytes per 100 ms
		})
		if _, err := w.Submit(t.Context(), make([]byte, 2996)); err != nil {
			t.Fatalf("a record of 3x MaxBatchBytes on a store that takes capped batches in time: %v", err)
		}
	})
}

// OnDurable receives the very slices that were submitted (the contract in
// WriterConfig.OnDurable that the node's sequencer relies on), in order,
// also for a record written alone above MaxBatchBytes.
//
// Covers: G1
func TestWriter_OnDurableGetsTheSubmittedSlices(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		w, a := newWriter(t, s, func(c *wal.WriterConfig) {
			c.MaxBatchBytes = 40
			c.MaxRecordBytes = 100
		})
		recs := [][]byte{[]byte("a"), make([]byte, 90), []byte("bc"), []byte("d")}
		var futs []wal.Future
		for _, r := range recs {
			futs = append(futs, w.SubmitAsync(r))
		}
		for _, f := range futs {
			if _, err := f.Result(); err != nil {
				t.Fatal(err)
			}
		}
		var got [][]byte
		for _, b := range a.get() {
			got = append(got, b.Records...)
		}
		if len(got) != len(recs) {
			t.Fatalf("OnDurable saw %d records, want %d", len(got), len(recs))
		}
		for i := range recs {
			if unsafe.SliceData(got[i]) != unsafe.SliceData(recs[i]) || len(got[i]) != len(recs[i]) {
				t.Errorf("record %d reached OnDurable as a copy, not the submitted slice", i)
			}
		}
	})
}
