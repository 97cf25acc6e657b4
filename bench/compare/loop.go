package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dexzd/dexzd/internal/bench"
)

// loopConfig configures closedLoop.
type loopConfig struct {
	Flows, Warmup, Callers int
	// Flow runs flow number i to its end and checks its output. It is
	// called from Callers goroutines at once.
	Flow func(ctx context.Context, i int) error
	// ServerCPU reads the CPU time the engine's server processes have used
	// so far; nil when the engine has none (all of it runs in this
	// process).
	ServerCPU func() (bench.CPUTime, error)
}

// closedLoop runs cfg.Warmup unmeasured flows, then cfg.Flows measured
// ones, each phase with cfg.Callers callers that start a flow, wait for it
// and start the next. It measures what bench.RunChain measures for Dex-ZD:
// elapsed time of the measured phase, the latency of every flow from just
// before its start until its result was checked, and the CPU time of this
// process and of the server processes over the measured phase.
func closedLoop(ctx context.Context, cfg loopConfig) (m Measurement, err error) {
	if _, err := runPhase(ctx, cfg, 0, cfg.Warmup); err != nil {
		return m, fmt.Errorf("warmup: %w", err)
	}
	self0, err := bench.SelfCPU()
	if err != nil {
		return m, err
	}
	var srv0 bench.CPUTime
	if cfg.ServerCPU != nil {
		if srv0, err = cfg.ServerCPU(); err != nil {
			return m, err
		}
	}
	t0 := time.Now()
	lat, runErr := runPhase(ctx, cfg, cfg.Warmup, cfg.Flows)
	elapsed := time.Since(t0)
	self1, err := bench.SelfCPU()
	if err != nil {
		return m, err
	}
	var srv bench.CPUTime
	if cfg.ServerCPU != nil {
		srv1, err := cfg.ServerCPU()
		if err != nil {
			return m, err
		}
		srv = srv1.Sub(srv0)
	}
	m = measurement(len(lat), cfg.Flows-len(lat), elapsed, bench.Summarize(lat), self1.Sub(self0), srv)
	return m, runErr
}

// runPhase runs flows first..first+n-1 and returns the latencies of those
// that succeeded, with the first error (and the count of failures).
func runPhase(ctx context.Context, cfg loopConfig, first, n int) ([]time.Duration, error) {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		lat      = make([]time.Duration, 0, n)
		failures int
		firstErr error
		wg       sync.WaitGroup
	)
	for range min(cfg.Callers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				err := cfg.Flow(ctx, first+i)
				d := time.Since(t0)
				mu.Lock()
				if err == nil {
					lat = append(lat, d)
				} else {
					failures++
					if firstErr == nil {
						firstErr = fmt.Errorf("flow %d: %w", first+i, err)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return lat, errors.Join(err, firstErr)
	}
	if failures > 0 {
		return lat, fmt.Errorf("%d of %d flows failed, first: %w", failures, n, firstErr)
	}
	return lat, nil
}

// chainStart is the input of flow i: flows of different rounds and
// engines start at different values, and the output must be start+K.
func chainStart(i int) int64 { return int64(i) * 1000 }
