package serving

import (
	"errors"
	"fmt"
	"time"

	"github.com/dexzd/dexzd/internal/server"
)

// AdmissionLimits bound the work a core accepts from clients (doc.go:
// Bounded load). Zero fields take the defaults below.
type AdmissionLimits struct {
	// MaxPendingRequests is limits.maxPendingRequests: client calls that
	// ask for new work, admitted and not answered yet; also the most
	// functions the sequencer's queue may hold when new work is admitted.
	MaxPendingRequests int
	// MaxPendingBytes is limits.maxPendingBytes: the request bytes of
	// those calls, and the most bytes the log writer's queue may hold when
	// new work is admitted.
	MaxPendingBytes int64
	// MaxQueuedTasks is limits.maxQueuedTasks: a StartFlow is refused
	// while its flow type's queue holds this many tasks waiting for a
	// worker.
	MaxQueuedTasks int
	// MaxFlowWaiters is limits.maxFlowWaiters: the WaitForFlow calls that
	// wait at once (0: maxFlowWaiters).
	MaxFlowWaiters int
}

// Admission defaults (README: Bounded load has the measurements).
const (
	// defaultMaxPendingRequests: at the measured ~1,000 flows/s (4 log
	// records each) and up to 32,000 records/s on MinIO, 1024 calls in
	// progress are a few batch writes of work, far more than the callers
	// group commit needs to fill its batches (256 submitters fill batches
	// of 128 records), and far fewer than the tens of thousands at which
	// an unbounded server stopped answering its health checks.
	defaultMaxPendingRequests = 1024
	// defaultMaxPendingBytes: eight requests of the default 8 MiB request
	// limit, or eight full log batches queued (DefaultMaxBatchBytes).
	defaultMaxPendingBytes = 64 << 20
	// defaultMaxQueuedTasks: about 0.3 s of work at the ~3,200 steps/s of
	// the chain workload on the local disk (README), 1.4 s at the ~700
	// steps/s measured on a loaded machine; a flow that starts behind a
	// full queue waits that long for each of its steps. With 5000, the
	// accepted flows of an overload run waited 17-20 s (README: Bounded
	// load).
	defaultMaxQueuedTasks = 1000
)

func (l AdmissionLimits) withDefaults() AdmissionLimits {
	if l.MaxPendingRequests <= 0 {
		l.MaxPendingRequests = defaultMaxPendingRequests
	}
	if l.MaxPendingBytes <= 0 {
		l.MaxPendingBytes = defaultMaxPendingBytes
	}
	if l.MaxQueuedTasks <= 0 {
		l.MaxQueuedTasks = defaultMaxQueuedTasks
	}
	return l
}

var _ server.Admitter = (*Core)(nil)

// Admit implements server.Admitter: it admits a client call that asks for
// new work, or refuses it with an *server.OverloadError before anything is
// decided. The sequencer bounds the calls in progress and the queues
// behind them (sequencer.admit); a StartFlow is also refused while its
// flow type has MaxQueuedTasks tasks waiting for a worker, because every
// flow it would add waits behind them.
func (c *Core) Admit(w server.Work) (release func(), err error) {
	lim := c.cfg.Admission.withDefaults()
	defer func() {
		if err != nil {
			c.refused(err)
		}
	}()
	if w.Op == "InvokeRPC" {
		// RPCs waiting for a worker hold no slot of the calls in progress
		// (rpc.go), so they have a bound of their own, as large.
		if n := c.rpcWaiting.Load(); n >= int64(lim.MaxPendingRequests) {
			return nil, &server.OverloadError{Limit: "limits.maxPendingRequests", RetryAfter: retryTasks,
				Message: fmt.Sprintf("%d RPCs wait for a worker", n)}
		}
	}
	if w.Op == "StartFlow" {
		if n := c.disp.queuedOf(w.FlowType); n >= lim.MaxQueuedTasks {
			return nil, &server.OverloadError{Limit: "limits.maxQueuedTasks", RetryAfter: retryTasks,
				Message: fmt.Sprintf("%d tasks of flow type %q wait for a worker", n, w.FlowType)}
		}
	}
	return c.seq.admit(int64(w.Bytes), lim)
}

// refusedLogEvery spaces the log lines about refused work.
const refusedLogEvery = 10 * time.Second

// refused counts a refusal and logs one line per refusedLogEvery.
func (c *Core) refused(err error) {
	var oe *server.OverloadError
	if c.cfg.Metrics != nil && errors.As(err, &oe) {
		c.cfg.Metrics.CountRefused(oe.Limit)
	}
	n := c.seq.refusals.Add(1)
	now := time.Now().UnixNano()
	last := c.seq.lastLog.Load()
	if now-last < int64(refusedLogEvery) || !c.seq.lastLog.CompareAndSwap(last, now) {
		return
	}
	c.log.Warn("refusing new work", "refusedSoFar", n, "err", err)
}

// queuedOf returns the number of flowType's tasks waiting for a worker,
// retries waiting out their backoff included, closed runs' not.
func (d *dispatcher) queuedOf(flowType string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waitingLocked(flowType)
}
