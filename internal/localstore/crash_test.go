package localstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// After a crash at any point (unsynced writes lost, or kept in part), the
// store holds exactly the batches up to its applied position: every batch
// is atomic with its sequence number.
func TestCrash_AppliedPositionIsAtomic(t *testing.T) {
	t.Parallel()
	const batches = 60
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 99))
			fs := vfs.NewCrashableMem()
			s, err := Open("db", Options{fs: fs})
			if err != nil {
				t.Fatal(err)
			}
			crashAt := rng.IntN(batches)
			var crashed *vfs.MemFS
			for i := range batches {
				// Two flows per batch; some batches also flush, so that the
				// crash keeps a synced prefix plus unsynced data.
				putAll(t, s, uint64(i),
					start(t, nil, fmt.Sprintf("p-%02d", i), "order", "r", base),
					start(t, nil, fmt.Sprintf("q-%02d", i), "order", "r", base))
				if rng.IntN(10) == 0 {
					if err := s.db.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				if i == crashAt {
					crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			s, err = Open("db", Options{fs: crashed})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			seq, ok := s.Applied()
			last := -1
			if ok {
				last = int(seq)
			}
			t.Logf("crash at %d, applied %d", crashAt, last)
			if last > crashAt {
				t.Fatalf("applied %d after a crash at batch %d", last, crashAt)
			}
			for i := range batches {
				for _, p := range []string{"p", "q"} {
					_, err := s.Flow(fmt.Sprintf("%s-%02d", p, i))
					switch {
					case i <= last && err != nil:
						t.Fatalf("applied %d but flow %s-%02d: %v", last, p, i, err)
					case i > last && !errors.Is(err, ErrNotFound):
						t.Fatalf("applied %d but flow %s-%02d is there: %v", last, p, i, err)
					}
				}
			}
			list, _, err := s.ListFlows(ListQuery{PageSize: MaxPageSize})
			if err != nil || len(list) != 2*(last+1) {
				t.Fatalf("list of %d after applied %d: %v", len(list), last, err)
			}
			// Replay continues after the applied position.
			if ok {
				wantErr(t, s.Apply(seq, nil), ErrAlreadyApplied)
			}
			if err := s.Apply(uint64(last+1), nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}
