package node

// Waiting for the durable store at startup (serve). A process that has not
// taken the lease yet has nothing to lose by waiting: exiting while the
// store is down only hands the restart to a supervisor whose backoff grows
// (Kubernetes CrashLoopBackOff: up to 5 minutes), delaying recovery long
// after the store is back. An active process that loses its store still
// stops (L7, L9, L10: exit 1).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/wal"
)

// Backoff between startup attempts to reach the durable store: storeWaitStart
// doubling to storeWaitMax, for as long as the store stays unreachable.
const (
	storeWaitStart = time.Second
	storeWaitMax   = 30 * time.Second
)

// storeAttemptTimeout cuts off one attempt to open the store and read the
// lease key, so that a store that does not answer at all (a black-holed
// address) is retried like one that refuses.
const storeAttemptTimeout = 10 * time.Second

// StoreUnavailable reports whether err, a failure to open or check the
// durable store at startup, is one that startup waits out: an error the
// store's backend classifies as transient (blob.ErrTransient: connection
// refused or reset, DNS failures, timeouts, no answer at all, HTTP 5xx,
// throttling, MinIO still initialising, PostgreSQL starting up or out of
// connections). Everything else stops startup (exit 1): a permanent answer
// (bad credentials, access denied, a missing bucket or database, no
// permission on the table), a store that ignores conditional writes (G6),
// and errors of unknown origin.
func StoreUnavailable(err error) bool {
	return errors.Is(err, blob.ErrTransient) && !errors.Is(err, wal.ErrConditionalWritesIgnored)
}

// storeWait opens the durable store at startup and checks it, waiting
// while it is unavailable (StoreUnavailable).
type storeWait struct {
	// open opens the store (open.Store, metered).
	open   func(ctx context.Context) (blob.Store, error)
	layout wal.Layout
	log    *slog.Logger
	// backend names the store in the log and the reason
	// ("storage.backend postgres").
	backend string
	// waiting is told why the process does not serve while it waits
	// (/readyz, UNAVAILABLE answers).
	waiting func(reason string)
}

// run returns the open store once one attempt succeeded: open the store
// (once: an open store is kept across attempts), read the lease key (a
// missing lease counts as reachable; the read makes an unreachable store
// fail fast instead of through the probe's 10 s of retries), then probe
// conditional writes (G6). A failed attempt that StoreUnavailable accepts
// is logged with its error and retried after a backoff of storeWaitStart
// doubling to storeWaitMax; any other failure is returned at once. It
// returns ctx's error when ctx ends first. The store is closed unless it is
// returned.
func (w storeWait) run(ctx context.Context) (blob.Store, error) {
	var store blob.Store
	fail := func(err error) (blob.Store, error) {
		if store != nil {
			_ = store.Close()
		}
		return nil, err
	}
	start := time.Now()
	var bo time.Duration
	for attempt := 1; ; attempt++ {
		var err error
		store, err = w.attempt(ctx, store)
		switch {
		case err == nil:
			w.log.Info("durable store reachable", "backend", w.backend, "attempts", attempt,
				"waited", time.Since(start).Round(time.Millisecond))
			return store, nil
		case ctx.Err() != nil:
			return fail(ctx.Err())
		case !StoreUnavailable(err):
			return fail(fmt.Errorf("durable store (%s) at startup: %w (not an outage: startup does not wait for this)",
				w.backend, err))
		}
		bo = min(storeWaitMax, max(storeWaitStart, 2*bo))
		w.log.Warn("durable store not reachable; waiting", "backend", w.backend, "attempt", attempt, "err", err,
			"retryIn", bo)
		w.waiting(fmt.Sprintf("waiting for the durable store (%s): attempt %d failed: %v; retry on the active process",
			w.backend, attempt, err))
		if !lease.Sleep(ctx, bo) {
			return fail(ctx.Err())
		}
	}
}

// attempt makes one attempt; it returns the store it opened (or was
// given) even when a later step failed.
func (w storeWait) attempt(ctx context.Context, store blob.Store) (blob.Store, error) {
	actx, cancel := context.WithTimeout(ctx, storeAttemptTimeout)
	defer cancel()
	if store == nil {
		s, err := w.open(actx)
		if err != nil {
			return nil, err
		}
		store = s
	}
	key := w.layout.LeaseKey()
	if _, _, err := store.Get(actx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
		return store, fmt.Errorf("read %s: %w", key, err)
	}
	// The probe retries each of its requests for up to wal.LogWriteLimit.
	return store, wal.ProbeConditionalWrites(ctx, store, w.layout)
}
