package node_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/node"
	"github.com/dexzd/dexzd/internal/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var layout = wal.MustLayout("", "n1")

// start acquires the lease and fences the log on s, the way a process
// becomes active, renews the lease from the acquisition on until the test
// ends (as a lease period does), and returns a writer that is not started
// yet.
func start(t *testing.T, s *mem.Store) (*lease.Holder, *wal.Writer) {
	t.Helper()
	h, err := lease.Acquire(t.Context(), lease.Config{
		Store: s, Key: layout.LeaseKey(), NodeID: "n1", ProcessID: "p1", Duration: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	renewed := make(chan struct{})
	go func() { defer close(renewed); _ = h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-renewed })
	next, err := wal.Fence(t.Context(), s, layout, h.Epoch(), 0, func(wal.Batch) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	w, err := wal.NewWriter(wal.WriterConfig{
		Store: s, Layout: layout, Epoch: h.Epoch(), NextSeq: next,
		OnDurable: func(wal.Batch) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, w
}

// Covers: L11, L7
func TestSupervise_RenewalTimeoutExits1AndAcknowledgesNothingMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		h, w := start(t, s)
		// From now on the store hangs: no renewal and no batch gets through.
		s.SetFaults(func(op, key string) mem.Fault { return mem.Fault{Latency: time.Hour} })
		done := make(chan error, 1)
		go func() { done <- node.Supervise(t.Context(), h, w) }()
		submitted := make(chan error, 1)
		go func() { _, err := w.Submit(t.Context(), []byte("r")); submitted <- err }()

		err := <-done
		if !errors.Is(err, lease.ErrRenewalTimeout) {
			t.Fatalf("Supervise = %v, want the renewal timeout", err)
		}
		if code := node.ExitCode(err); code != 1 {
			t.Fatalf("ExitCode = %d, want 1", code)
		}
		if err := <-submitted; err == nil {
			t.Fatal("a record submitted while the lease was failing was acknowledged")
		}
		s.SetFaults(nil)
	})
}

// Covers: L11, L9
func TestSupervise_LeaseLostExits1(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		h, w := start(t, s)
		done := make(chan error, 1)
		go func() { done <- node.Supervise(t.Context(), h, w) }()
		// Another process takes the lease over (as a dev node would, D3).
		if _, err := lease.Acquire(t.Context(), lease.Config{
			Store: s, Key: layout.LeaseKey(), NodeID: "n1", ProcessID: "p2",
			Duration: 10 * time.Second, TakeOverHeld: true,
		}); err != nil {
			t.Fatal(err)
		}
		err := <-done
		if !errors.Is(err, lease.ErrLost) || node.ExitCode(err) != 1 {
			t.Fatalf("Supervise = %v (exit %d), want the lease lost and exit 1", err, node.ExitCode(err))
		}
	})
}

// Covers: L11, L10
func TestSupervise_LogWriteTimeoutExits1(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		h, w := start(t, s)
		// Batches are throttled for good; lease renewals still get through.
		s.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent {
				return mem.Fault{Err: mem.ErrThrottled}
			}
			return mem.Fault{}
		})
		done := make(chan error, 1)
		go func() { done <- node.Supervise(t.Context(), h, w) }()
		t0 := time.Now()
		if _, err := w.Submit(t.Context(), []byte("r")); !errors.Is(err, wal.ErrLogWriteTimeout) {
			t.Fatalf("Submit = %v, want the log write timeout", err)
		}
		err := <-done
		if !errors.Is(err, wal.ErrLogWriteTimeout) || node.ExitCode(err) != 1 {
			t.Fatalf("Supervise = %v (exit %d), want the log write timeout and exit 1", err, node.ExitCode(err))
		}
		if d := time.Since(t0); d < wal.LogWriteLimit || d > wal.LogWriteLimit+time.Second {
			t.Fatalf("stopped after %v, want about %v", d, wal.LogWriteLimit)
		}
		s.SetFaults(nil)
	})
}

// Covers: L11
func TestSupervise_CancelIsACleanStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		h, w := start(t, s)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- node.Supervise(ctx, h, w) }()
		if _, err := w.Submit(t.Context(), []byte("r")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second) // several renewals
		cancel()
		err := <-done
		if node.ExitCode(err) != 0 {
			t.Fatalf("Supervise after cancel = %v (exit %d), want exit 0", err, node.ExitCode(err))
		}
		if !h.Valid() {
			t.Fatal("the lease stopped being valid during 30 s of healthy renewals")
		}
	})
}
