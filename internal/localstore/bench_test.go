package localstore

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
)

// BenchmarkApply measures Apply throughput with 1 and 100 flow states of
// realistic size (richFlow: three steps, a Wait, attributes, history) per
// batch. The states cycle over a pool of flow IDs: the first pass inserts
// (index writes), later passes update in place.
func BenchmarkApply(b *testing.B) {
	const pool = 2000
	states := make([]*engine.FlowState, pool)
	for i := range states {
		states[i] = richFlow(b, fmt.Sprintf("flow-%06d", i), base)
	}
	enc, err := engine.MarshalState(states[0])
	if err != nil {
		b.Fatal(err)
	}
	for _, perBatch := range []int{1, 100} {
		b.Run(fmt.Sprintf("states=%d", perBatch), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			next := 0
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				err := s.Apply(uint64(i), func(tx *Tx) error {
					for range perBatch {
						if err := tx.PutFlow(states[next]); err != nil {
							return err
						}
						next = (next + 1) % pool
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N)/sec, "batches/s")
			b.ReportMetric(float64(b.N*perBatch)/sec, "states/s")
			b.ReportMetric(float64(len(enc)), "B/state")
		})
	}
}

// appendEvents appends n events of realistic size (an Execute's decision
// with a 256-byte movement input) to st's history, numbered on from its
// last event.
func appendEvents(st *engine.FlowState, n int, at time.Time) {
	payload := engine.Value{Type: "json:main.Order", Data: bytes.Repeat([]byte("y"), 256)}
	for range n {
		id := len(st.History) + 1
		st.History = append(st.History, &engine.HistoryEvent{ID: id, At: at.Add(time.Duration(id) * time.Millisecond),
			Type: engine.EventExecuteCompleted, StepExecID: fmt.Sprintf("Charge-%d", id), StepType: "Charge",
			Attempt: 1, Duration: time.Millisecond, Movements: []engine.Movement{{StepType: "Charge", Input: payload}}})
	}
}

// BenchmarkPutFlow_History measures one step of a flow whose history
// holds about `events` events: one more event, one PutFlow, one Apply. The
// flow is replaced by a fresh one (outside the timer) once it has grown by
// a tenth, so the history stays within 10 % of its nominal size. With the
// history kept under its own keys the cost does not depend on its length.
func BenchmarkPutFlow_History(b *testing.B) {
	for _, events := range []int{10, 1000} {
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var seq uint64
			put := func(st *engine.FlowState) {
				seq++
				if err := s.Apply(seq, func(tx *Tx) error { return tx.PutFlow(st) }); err != nil {
					b.Fatal(err)
				}
			}
			window := max(events/10, 1)
			var st *engine.FlowState
			fresh := func(gen int) {
				st = richFlow(b, fmt.Sprintf("flow-%06d", gen), base)
				appendEvents(st, events-len(st.History), base)
				put(st)
			}
			gen := 0
			fresh(gen)
			for b.Loop() {
				if len(st.History) >= events+window {
					b.StopTimer()
					gen++
					fresh(gen)
					b.StartTimer()
				}
				appendEvents(st, 1, base)
				put(st)
			}
		})
	}
}

// BenchmarkApply_LargeStates runs flows whose state carries a 1 MiB value
// (a step input kept in the state, as issue 11's large flows do) one step
// per batch, rewriting the state each step, beside 20 small flows' steps
// per large one, with large values in blob
// files (Pebble's value separation) and inline in sstables. It reports
// the bytes Pebble wrote (flushes and compactions) per byte applied: with
// separation a large value is written once to a blob file and compactions
// move only references to it.
func BenchmarkApply_LargeStates(b *testing.B) {
	const pool = 16
	for _, inline := range []bool{false, true} {
		b.Run(fmt.Sprintf("inline=%v", inline), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{inlineBigValues: inline})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			// Incompressible, like real documents after Snappy: hex of
			// pseudo-random bytes in a JSON string.
			raw := make([]byte, 1<<19)
			if _, err := rand.NewChaCha8([32]byte{1}).Read(raw); err != nil {
				b.Fatal(err)
			}
			big := engine.Value{Type: "json:main.Doc", Data: []byte(`"` + hex.EncodeToString(raw) + `"`)}
			states := make([]*engine.FlowState, pool)
			for i := range states {
				st := bigFlow(b, fmt.Sprintf("flow-%03d", i), base)
				st.Attributes["status"] = big
				states[i] = st
			}
			small := make([]*engine.FlowState, 2000)
			for i := range small {
				small[i] = richFlow(b, fmt.Sprintf("small-%06d", i), base)
			}
			var applied int64
			var seq uint64
			for i := 0; b.Loop(); i++ {
				for j := range 20 {
					sm := small[(i*20+j)%len(small)]
					seq++
					if err := s.Apply(seq, func(tx *Tx) error { return tx.PutFlow(sm) }); err != nil {
						b.Fatal(err)
					}
				}
				st := states[i%pool]
				appendEvents(st, 1, base)
				enc, err := engine.MarshalState(st)
				if err != nil {
					b.Fatal(err)
				}
				applied += int64(len(enc))
				seq++
				if err := s.Apply(seq, func(tx *Tx) error { return tx.PutFlow(st) }); err != nil {
					b.Fatal(err)
				}
				if len(st.History) > 200 {
					st.History = st.History[:len(st.History)-100]
				}
			}
			if err := s.db.Flush(); err != nil {
				b.Fatal(err)
			}
			m := s.db.Metrics()
			tot := m.Total()
			written := int64(tot.TableBytesFlushed + tot.TableBytesCompacted + tot.BlobBytesFlushed + tot.BlobBytesCompacted)
			b.ReportMetric(float64(written)/float64(applied), "written/applied")
			b.ReportMetric(float64(applied)/b.Elapsed().Seconds()/(1<<20), "MiB/s")
		})
	}
}
