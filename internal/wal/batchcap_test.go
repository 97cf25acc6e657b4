package wal_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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
