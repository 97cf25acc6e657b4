package sim

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var (
	seedFlag  = flag.Int64("seed", -1, "run only this seed (replays a failing run's schedule)")
	seedsFlag = flag.Int("seeds", 0, "how many seeds to run, from -first (default: DEX_SIM_SEEDS, else 1000, or 50 with -race)")
	firstFlag = flag.Uint64("first", 0, "the first seed of a -seeds run")
	repeat    = flag.Int("repeat", 1, "with -seed: run it this many times (goroutines of one virtual instant may interleave differently)")
	slowSeed  = 2 * time.Second
	showIf    = flag.String("showif", "", "print the events of every run, passing or not, with an event that contains this text")
	verbose   = flag.Bool("simlog", false, "print the processes' logs and every run's events")
	parFlag   = flag.Int("par", runtime.GOMAXPROCS(0), "how many seeds run at once")
)

// The whole node in a simulation: three processes of one node ID over one
// memory store, the real lease acquisition and renewal, fence and replay,
// writer under node.Supervise and serving core, snapshots and truncation,
// clients and workers with resets and continue-as-new (E37), and a
// seeded schedule of kills, freezes and store faults (see the package
// doc). Each seed runs in its own synctest bubble, minutes of virtual
// time in milliseconds.
//
// Covers: L3, L4, L7, L9, L12, L13, L15, G1, G2, G3, G4, G5, G7, G8, S3, S7, A3, T1, T2, T3, T4, E37
func TestSim(t *testing.T) {
	first, n := *firstFlag, *seedsFlag
	if n == 0 {
		n = 1000
		if raceEnabled {
			n = 50
		}
		if v := os.Getenv("DEX_SIM_SEEDS"); v != "" {
			if _, err := fmt.Sscan(v, &n); err != nil {
				t.Fatalf("DEX_SIM_SEEDS=%q: %v", v, err)
			}
		}
	}
	seedOf := func(i int) uint64 { return first + uint64(i) }
	replay := *seedFlag >= 0
	par := max(1, *parFlag)
	if replay {
		n = max(1, *repeat)
		seedOf = func(int) uint64 { return uint64(*seedFlag) }
		// A replay runs every repeat and counts the failures: how often
		// the seed's schedule reproduces its interleaving (measured with
		// bugs reintroduced: 13 of 30 repeats of a failing seed, and the
		// same 13 of 30 with one repeat at a time on one P, so the repeats
		// still run -par at a time).
	}
	began := time.Now()
	var (
		mu           sync.Mutex
		acks, failed int
		ran          int
		ends, faults = map[string]int{}, map[string]int{}
	)
	// Each seed runs in its own bubble; -par of them at once (a bubble
	// shares nothing with another).
	seeds := make(chan uint64)
	var pool sync.WaitGroup
	if *verbose {
		par = 1 // one process log at a time
	}
	for range par {
		pool.Go(func() {
			normal := false
			defer func() {
				if !normal {
					// synctest.Test ended this goroutine (FailNow): stop
					// handing out seeds, take the ones on their way.
					mu.Lock()
					failed += 3
					mu.Unlock()
					go func() {
						for range seeds {
						}
					}()
				}
			}()
			for seed := range seeds {
				res, err := runSeed(t, seed)
				mu.Lock()
				ran++
				if res != nil {
					acks += res.Acks
					for k, v := range res.Ends {
						ends[k] += v
					}
					for k, v := range res.Faults {
						faults[k] += v
					}
				}
				if err != nil {
					failed++
				}
				mu.Unlock()
			}
			normal = true
		})
	}
	for i := range n {
		mu.Lock()
		stop := failed >= 3 && !replay // a replay counts its failures
		mu.Unlock()
		if stop {
			break
		}
		seeds <- seedOf(i)
	}
	close(seeds)
	pool.Wait()
	el := time.Since(began)
	if replay {
		t.Logf("seed %d failed %d of %d runs", *seedFlag, failed, ran)
	}
	t.Logf("%d runs in %v (%.1f runs/s), %d acknowledgements checked; lease period ends and result answers: %v; store faults: %v",
		ran, el.Round(time.Millisecond), float64(ran)/el.Seconds(), acks, ends, faults)
}

// runSeed runs one seed in a synctest bubble and reports it: its events
// when it failed (or matches -showif), its real time when slow.
func runSeed(t *testing.T, seed uint64) (*Result, error) {
	var res *Result
	var err error
	cfg := Config{Seed: seed}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	t0 := time.Now()
	synctest.Test(t, func(t *testing.T) {
		res, err = Run(cfg)
	})
	if d := time.Since(t0); d > slowSeed {
		t.Logf("seed %d took %v", seed, d.Round(time.Millisecond))
	}
	show := *verbose
	if *showIf != "" && res != nil {
		for _, e := range res.Events {
			show = show || strings.Contains(e, *showIf)
		}
	}
	if err != nil || show {
		t.Logf("seed %d: %v\nschedule: %s\nperiod ends: %v, store faults: %v, acks: %d\nevents:\n  %s",
			seed, err, res.Plan, res.Ends, res.Faults, res.Acks, strings.Join(res.Events, "\n  "))
	}
	if err != nil {
		t.Errorf("seed %d failed: %v\nreplay: go test ./internal/sim -run 'TestSim$' -seed %d   (or make sim SEED=%d)", seed, err, seed, seed)
	}
	return res, err
}
