package node

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/wal"
)

// storeWaitRig runs storeWait on a memory store whose open and requests
// fail while down is set.
type storeWaitRig struct {
	mu      sync.Mutex
	down    error // the error every open and request returns, nil when up
	opens   []time.Time
	reasons []string
	store   *mem.Store
}

func newStoreWaitRig(down error) *storeWaitRig {
	r := &storeWaitRig{down: down, store: mem.New()}
	r.store.SetFaults(func(string, string) mem.Fault {
		r.mu.Lock()
		defer r.mu.Unlock()
		return mem.Fault{Err: r.down}
	})
	return r
}

func (r *storeWaitRig) setDown(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = err
}

func (r *storeWaitRig) wait(ctx context.Context, openFails bool) (blob.Store, error) {
	return storeWait{layout: wal.MustLayout("", "n1"), log: slog.New(slog.DiscardHandler), backend: "storage.backend mem",
		waiting: func(reason string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.reasons = append(r.reasons, reason)
		},
		open: func(context.Context) (blob.Store, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.opens = append(r.opens, time.Now())
			if openFails && r.down != nil {
				return nil, blob.Transient("open", "t", r.down)
			}
			return r.store, nil
		}}.run(ctx)
}

// A store that cannot be opened or reached at startup is waited for
// (issue 10, item 5): attempts 1 s, 2 s, 4 s ... apart, capped at 30 s,
// each reported as the reason the process does not serve; the first
// attempt that reaches it and whose probe (G6) passes returns the store.
// An open store is kept across attempts.
func TestStoreWait_WaitsWithBackoffUntilReachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newStoreWaitRig(errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := r.wait(t.Context(), true)
			done <- err
		}()
		time.Sleep(63*time.Second + time.Millisecond) // attempts at 0, 1, 3, 7, 15, 31, 61 s
		synctest.Wait()
		r.setDown(nil)
		if err := <-done; err != nil {
			t.Fatalf("wait = %v, want the store", err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		var at []time.Duration
		for _, o := range r.opens {
			at = append(at, o.Sub(start))
		}
		want := []time.Duration{0, 1, 3, 7, 15, 31, 61, 91}
		if len(at) != len(want) {
			t.Fatalf("opens at %v, want at %v s", at, want)
		}
		for i := range want {
			if at[i] != want[i]*time.Second {
				t.Fatalf("opens at %v, want at %v s", at, want)
			}
		}
		if len(r.reasons) != 7 || !strings.Contains(r.reasons[6], "waiting for the durable store (storage.backend mem): attempt 7 failed") ||
			!strings.Contains(r.reasons[6], "connection refused") {
			t.Fatalf("reasons = %q", r.reasons)
		}
	})
}

// Once opened, a store that does not answer is retried on the same store:
// the lease read fails fast, and the probe runs once it answers.
func TestStoreWait_KeepsTheOpenStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newStoreWaitRig(mem.ErrServer)
		done := make(chan error, 1)
		go func() {
			_, err := r.wait(t.Context(), false)
			done <- err
		}()
		time.Sleep(3*time.Second + time.Millisecond)
		synctest.Wait()
		r.setDown(nil)
		if err := <-done; err != nil {
			t.Fatalf("wait = %v, want the store", err)
		}
		if len(r.opens) != 1 || r.store.Count(blob.OpGet) < 3 || len(r.store.Keys()) != 0 {
			t.Fatalf("opens %d, gets %d, keys %v; want one open, a lease read per attempt, the probe key gone",
				len(r.opens), r.store.Count(blob.OpGet), r.store.Keys())
		}
	})
}

// A permanent answer (access denied, a missing bucket or database, bad
// credentials) or a store that ignores conditional writes stops startup at
// once, and a cancelled context ends the wait.
func TestStoreWait_StopsOnPermanentErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newStoreWaitRig(blob.Permanent(blob.OpGet, "k", mem.ErrDenied))
		if _, err := r.wait(t.Context(), false); !errors.Is(err, blob.ErrPermanent) ||
			!strings.Contains(err.Error(), "does not wait") || len(r.reasons) != 0 {
			t.Fatalf("permanent: wait = %v after %d waits, want the permanent error at once", err, len(r.reasons))
		}

		r = newStoreWaitRig(nil)
		r.store.SetIgnoreConditions(true)
		if _, err := r.wait(t.Context(), false); !errors.Is(err, wal.ErrConditionalWritesIgnored) || len(r.reasons) != 0 {
			t.Fatalf("conditions ignored: wait = %v after %d waits, want ErrConditionalWritesIgnored at once", err, len(r.reasons))
		}

		r = newStoreWaitRig(mem.ErrServer)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(5*time.Second, cancel)
		if _, err := r.wait(ctx, true); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: wait = %v, want context.Canceled", err)
		}
	})
}

// A configuration that cannot work is a configuration error before the
// store is reached, so that it is never waited out as an outage.
func TestCheckServeConfig_RefusesBadStorageSettings(t *testing.T) {
	for name, set := range map[string]func(*config.Config){
		"postgres dsn":   func(c *config.Config) { c.Storage.Postgres.DSN = "postgres://u@127.0.0.1:notaport/db" },
		"postgres table": func(c *config.Config) { c.Storage.Postgres.Table = "Bad-Name" },
	} {
		cfg := config.Defaults()
		cfg.Storage.Backend = config.BackendPostgres
		cfg.Storage.Postgres.DSN = "postgres://u@127.0.0.1:5432/db"
		set(&cfg)
		if err := CheckServeConfig(&cfg); err == nil || !strings.Contains(err.Error(), "storage.postgres") {
			t.Errorf("%s: CheckServeConfig = %v, want an error naming storage.postgres", name, err)
		}
	}
	cfg := config.Defaults()
	cfg.Storage.Backend = config.BackendPostgres
	cfg.Storage.Postgres.DSN = "postgres://u@127.0.0.1:5432/db"
	if err := CheckServeConfig(&cfg); err != nil {
		t.Errorf("a good postgres configuration: %v", err)
	}
}
