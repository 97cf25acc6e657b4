package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/dex"
)

// Open-loop overload (Config.Rate): the measured phase offers Rate starts
// per second for Duration, on a schedule that does not wait for answers,
// each start in a goroutine of its own. A start the server refuses with
// RESOURCE_EXHAUSTED is counted in Result.Refused and not sent again (the
// starts go through a client whose RetryTimeout is 1 ns, so the SDK's
// back-off does not hide the refusal); every accepted start is awaited and
// must complete with the right output like any other flow. Waits and
// publishes go through a second client, on a connection of their own, so
// that long polls do not take the stream quota of the starts. At most
// MaxStartsInFlight starts are in flight: a start due while that many
// wait for their answers is not sent and counted in Result.Skipped, so
// that a driver slower than its schedule (or a server that stops
// answering) does not pile up calls in this process without bound, which
// would also hold up the SDK's health checks on the same connection.

// ratePhase runs the measured phase of an open-loop run: Rate starts per
// second for Duration, numbered from first.
func (r *runner) ratePhase(ctx context.Context, starter *dex.Client, first int) *phase {
	n := r.cfg.Offered()
	p := &phase{total: n, started: time.Now(), latencies: make([]time.Duration, 0, n)}
	r.current.Store(p)
	var starts, waiters sync.WaitGroup
	inflight := make(chan struct{}, MaxStartsInFlight)
	interval := time.Duration(float64(time.Second) / r.cfg.Rate)
	begin := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if d := time.Until(begin.Add(time.Duration(i) * interval)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		p.next.Add(1)
		select {
		case inflight <- struct{}{}:
		default:
			p.skipped.Add(1)
			p.done.Add(1)
			continue
		}
		starts.Go(func() {
			defer func() { <-inflight }()
			id := r.idPrefix + fmt.Sprint(first+i)
			pad, large := r.payload(i)
			t0 := time.Now()
			runID, err := r.wl.start(ctx, starter, r.flow, id, first+i, pad)
			p.starts.Add(1)
			if status.Code(err) == codes.ResourceExhausted {
				p.refused.Add(1)
				p.done.Add(1)
				return
			}
			if err != nil {
				r.record(ctx, p, id, 0, large, fmt.Errorf("start: %w", err))
				return
			}
			p.accepted.Add(1)
			waiters.Go(func() { r.finish(ctx, p, id, runID, first+i, pad, large, t0) })
		})
	}
	p.offerElapsed = time.Since(begin)
	starts.Wait()
	p.startElapsed = time.Since(p.started)
	waiters.Wait()
	p.elapsed = time.Since(p.started)
	return p
}

// MaxStartsInFlight bounds the starts an open-loop run has in flight.
const MaxStartsInFlight = 2048

// Offered is the number of starts an open-loop run offers: Rate × Duration
// (at least 1); 0 without Rate.
func (c Config) Offered() int {
	if c.Rate <= 0 {
		return 0
	}
	return max(int(c.Rate*c.Duration.Seconds()), 1)
}

// AcceptedPerSecond is, for an open-loop run, the accepted starts over the
// time the starts were offered.
func (r Result) AcceptedPerSecond() float64 { return rate(r.Accepted, r.OfferElapsed) }
