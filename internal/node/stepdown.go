package node

// Step down (A3-A8): the serving instance drains, flushes and releases the
// lease, the process holds off for standby.stepDownHoldOff (following the
// log when hot) and then either finds that another process took over, or
// takes the lease back with a new epoch. The StepDown call that started it
// answers with the outcome. The rules are stated once, in doc.go (the
// "stepping down" and "hold-off" phases of serve's lifecycle).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// DefaultStuckStoreBound is how long after a step down's release the
// process waits for the old lease period's local store to close (A7):
// a task stuck on it keeps the process from serving again, so if it is not
// closed by then (and nobody took over) the step down answers INTERNAL and
// the process exits 1 without taking the lease.
const DefaultStuckStoreBound = 64 * time.Second

// ErrStuckStore: a step down left the local store open (A7).
var ErrStuckStore = errors.New("the local store of the stepped-down serving period is still open")

// stepDownRequest is one StepDown call waiting for its outcome.
type stepDownRequest struct {
	once   sync.Once
	answer chan stepDownAnswer
}

type stepDownAnswer struct {
	out server.StepDownOutcome
	err error
}

// reply answers the call; only the first reply counts.
func (r *stepDownRequest) reply(out server.StepDownOutcome, err error) {
	r.once.Do(func() { r.answer <- stepDownAnswer{out: out, err: err} })
}

// stepDownFunc is the serving instance's server.StepDownFunc: it hands
// the first request to the lease period through requests and waits for
// its answer; later requests fail with server.ErrStepDownInProgress.
func stepDownFunc(requests chan<- *stepDownRequest) server.StepDownFunc {
	var taken atomic.Bool
	return func(ctx context.Context) (server.StepDownOutcome, error) {
		if !taken.CompareAndSwap(false, true) {
			return server.StepDownOutcome{}, server.ErrStepDownInProgress
		}
		req := &stepDownRequest{answer: make(chan stepDownAnswer, 1)}
		requests <- req // buffered: the first request always fits
		select {
		case a := <-req.answer:
			return a.out, a.err
		case <-ctx.Done():
			return server.StepDownOutcome{}, ctx.Err()
		}
	}
}

// steppedDown is what a lease period that stepped down hands to the
// hold-off.
type steppedDown struct {
	req *stepDownRequest
	// epoch is the released lease's epoch; releasedAt when the release
	// was written.
	epoch      uint64
	releasedAt time.Time
	// message is the UNAVAILABLE answer of public calls until the
	// outcome is known.
	message string
	// storeClosed is closed once the period's local store is closed.
	storeClosed <-chan struct{}
}

// stepDown is the period's part of a step down (A3, A4): refuse public
// calls with "stepped down", tell workers to drain and stop handing out
// tasks, wait up to lifecycle.attemptDrainTimeout for running attempts'
// results (the lease is renewed and results are accepted meanwhile), end
// the instance's streams, flush the writer and release the lease. Calls
// that finish before the release keep their answers; the ones still open
// at the release answer UNAVAILABLE. A failure answers the request with
// the error and returns it (the process exits 1).
func (p *leasePeriod) stepDown(log *slog.Logger, req *stepDownRequest, core *serving.Core, w *wal.Writer,
	supDone <-chan error) (*steppedDown, error) {
	epoch := p.holder.Epoch()
	msg := fmt.Sprintf("this process stepped down as the active process of node %q (epoch %d); retry on the active process",
		p.cfg.NodeID, epoch)
	srv := p.inst.srv
	srv.SetSteppingDown(msg)
	p.metrics.SetNotServingReason(msg)
	drain := p.cfg.Lifecycle.AttemptDrainTimeout
	log.Info("stepping down: draining", "attemptDrainTimeout", drain)
	core.BeginDrain(server.DrainStepDown, drain, "the server is stepping down")
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	idle := make(chan error, 1)
	go func() { idle <- core.WaitIdle(dctx) }()
	var supErr error
	select {
	case err := <-idle:
		if err != nil {
			log.Warn("step down: drain timed out; the next active process fails the attempts still running with NOT_COMPLETED",
				"err", err)
		}
	case supErr = <-supDone:
		supDone = nil
	}
	cancel()
	p.inst.retire(p.stopping)
	core.Stop()
	werr := w.Stop()
	if supDone != nil {
		supErr = <-supDone
	}
	if err := errors.Join(werr, supErr); err != nil {
		req.reply(server.StepDownOutcome{}, fmt.Errorf("the step down failed before the lease was released: %w", err))
		return nil, err
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := p.holder.Release(rctx); err != nil {
		req.reply(server.StepDownOutcome{}, fmt.Errorf("the step down failed to release the lease: %w", err))
		return nil, fmt.Errorf("release lease: %w", err)
	}
	log.Info("stepped down: lease released")
	return &steppedDown{req: req, epoch: epoch, releasedAt: time.Now(), message: msg}, nil
}
