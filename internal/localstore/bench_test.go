package localstore

import (
	"fmt"
	"testing"

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
