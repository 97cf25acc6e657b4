package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/wal"
	"github.com/dexzd/dexzd/internal/wal/waltest"
)

// Takeovers whose recovery (a snapshot restore, a long replay) outlasts the
// lease, run under testing/synctest on the memory store: a cold standby
// process (lifecycle.standby, then lifecycle.run, as RunServe runs them) takes
// the lease of an active process that crashed, with the default 10 s
// lease.

const takeoverLease = config.DefaultLeaseDuration

// crashedActive writes the log of an active process of epoch 1 that
// started flows (one batch each) and crashed: its lease, held by process
// "other", is never renewed again. It returns the sequence number after
// the last batch.
func crashedActive(t *testing.T, blobs *mem.Store, flows int) uint64 {
	t.Helper()
	holdLease(t, blobs, testLayout, takeoverLease)
	h := newHarness(t, blobs, 1)
	for i := range flows {
		h.start(fmt.Sprintf("f-%d", i), "a", "")
	}
	next := h.w.NextSeq()
	h.crash()
	return next
}

// slowStore is a local store whose Apply of each batch below until takes
// per: a long replay.
type slowStore struct {
	*flowstore.MemStore
	until uint64
	per   time.Duration
}

func (s *slowStore) Apply(seq uint64, fn func(tx flowstore.Tx) error) error {
	if seq < s.until {
		time.Sleep(s.per)
	}
	return s.MemStore.Apply(seq, fn)
}

// pipeListener is an API listener inside the synctest bubble: dial hands
// it one end of a net.Pipe.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// takeoverProc is the standby process that takes over.
type takeoverProc struct {
	t      *testing.T
	blobs  *mem.Store
	cancel context.CancelFunc
	// done is closed when the process returned err.
	done   chan struct{}
	err    error
	conn   *grpc.ClientConn
	health grpc_health_v1.HealthClient

	// acquired is closed once the process holds the lease: holder and
	// acquiredAt are set then.
	acquired   chan struct{}
	holder     *lease.Holder
	acquiredAt time.Time
	// ready is closed when the process reports ready: readyAt, and
	// whether its lease was valid then, are set then.
	ready      chan struct{}
	readyAt    time.Time
	readyValid bool
}

// startTakeover starts a cold standby process (ProcessID "new") on blobs
// whose local store is store; restore, when set, restores a snapshot.
func startTakeover(t *testing.T, blobs *mem.Store, store flowstore.Store, restore restorer) *takeoverProc {
	t.Helper()
	cfg := config.Defaults()
	cfg.NodeID = "n1"
	cfg.Lifecycle.AttemptDrainTimeout = time.Second
	log := slog.New(slog.DiscardHandler)
	lis := newPipeListener()
	api, err := startAPI(&cfg, config.ModeServe, log, lis, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	l := &lifecycle{cfg: &cfg, log: log, blobs: blobs, layout: testLayout, api: api, metrics: m,
		leaseCfg: lease.Config{Store: m.MeterLease(blobs, testLayout.LeaseKey()), Key: testLayout.LeaseKey(),
			NodeID: cfg.NodeID, ProcessID: "new", Duration: cfg.Lease.Duration,
			PollInterval: cfg.Standby.HeldLeasePollInterval, Logger: log},
		stateDir: "state", open: func(string) (flowstore.Store, error) { return store, nil }, stuckBound: DefaultStuckStoreBound}
	if restore != nil {
		l.boot = &bootstrapper{blobs: blobs, layout: testLayout, dir: "state", restore: restore, log: log}
	}
	conn, err := grpc.NewClient("passthrough:///takeover", grpc.WithContextDialer(lis.dial),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &takeoverProc{t: t, blobs: blobs, cancel: cancel, done: make(chan struct{}), conn: conn,
		health: grpc_health_v1.NewHealthClient(conn), acquired: make(chan struct{}), ready: make(chan struct{})}
	l.ready = func(net.Addr) {
		p.readyAt, p.readyValid = time.Now(), p.holder.Valid()
		close(p.ready)
	}
	go func() {
		defer close(p.done)
		defer api.stop()
		h, st, err := l.standby(ctx, nil)
		if err != nil {
			p.err = err
			return
		}
		p.holder, p.acquiredAt = h, time.Now()
		close(p.acquired)
		p.err = l.run(ctx, h, st)
	}()
	t.Cleanup(func() {
		_ = p.stop()
		_ = conn.Close()
	})
	return p
}

// readiness asks the process's health service for the empty name.
func (p *takeoverProc) readiness() grpc_health_v1.HealthCheckResponse_ServingStatus {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := p.health.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		return grpc_health_v1.HealthCheckResponse_UNKNOWN
	}
	return r.GetStatus()
}

func (p *takeoverProc) isReady() bool {
	select {
	case <-p.ready:
		return true
	default:
		return false
	}
}

// stop stops the process gracefully and returns what it returned.
func (p *takeoverProc) stop() error {
	p.cancel()
	<-p.done
	return p.err
}

// leaseRecord reads the lease object as it is now.
func (p *takeoverProc) leaseRecord() lease.Record {
	p.t.Helper()
	rec, _, err := lease.Read(context.Background(), p.blobs, testLayout.LeaseKey())
	if err != nil {
		p.t.Fatal(err)
	}
	return rec
}

// rival is another standby of the node, waiting for the lease the way a
// cold standby does (lease.Acquire): it takes the lease once it is
// released or expired.
func rival(blobs *mem.Store) (got <-chan *lease.Holder, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan *lease.Holder, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h, err := lease.Acquire(ctx, lease.Config{Store: blobs, Key: testLayout.LeaseKey(), NodeID: "n1",
			ProcessID: "rival", Duration: takeoverLease, PollInterval: 250 * time.Millisecond})
		if err == nil {
			out <- h
		}
	}()
	return out, func() { cancel(); <-done }
}

// A cold standby takes over from a crashed active, and its recovery (a
// replay of 30 batches, or a snapshot restore, then the fence) takes three
// times the lease. It renews the lease every third of the lease from the
// acquisition on, through the recovery, so it serves with the epoch it
// acquired (2); another standby waiting meanwhile never gets the lease (no
// second acquisition, no crash loop). Readiness is NOT_SERVING until the
// recovery is done, the process reports ready only with a valid lease, and
// then serves with the lease kept for another three lease periods.
//
// Covers: L2, T1, S2, H2
func TestTakeover_RecoveryLongerThanTheLeaseKeepsRenewing(t *testing.T) {
	const batches = 30
	recovery := 3 * takeoverLease
	for _, tc := range []struct {
		name string
		// setup prepares the durable store after the crashed active's log
		// ends at next, and returns the standby's local store and restorer.
		setup func(t *testing.T, blobs *mem.Store, next uint64) (flowstore.Store, restorer)
	}{
		{"replay", func(t *testing.T, blobs *mem.Store, next uint64) (flowstore.Store, restorer) {
			return &slowStore{MemStore: flowstore.NewMemStore(), until: next, per: recovery / batches}, nil
		}},
		{"snapshot restore", func(t *testing.T, blobs *mem.Store, next uint64) (flowstore.Store, restorer) {
			ok := func(context.Context) error { return nil }
			if err := waltest.WriteSnapshot(t.Context(), blobs, testLayout, next, []byte("snapshot"), ok, 1); err != nil {
				t.Fatal(err)
			}
			return flowstore.NewMemStore(), func(_ string, r io.Reader) (flowstore.Store, error) {
				if _, err := io.ReadAll(r); err != nil {
					return nil, err
				}
				time.Sleep(recovery) // a large snapshot from object storage
				st := flowstore.NewMemStore()
				return st, st.Apply(next-1, func(flowstore.Tx) error { return nil })
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				blobs := mem.New()
				next := crashedActive(t, blobs, batches)
				store, restore := tc.setup(t, blobs, next)
				p := startTakeover(t, blobs, store, restore)
				<-p.acquired
				if e := p.holder.Epoch(); e != 2 {
					t.Fatalf("acquired epoch %d, want 2", e)
				}
				rivalGot, stopRival := rival(blobs)
				defer stopRival()

				// Recovery: readiness stays NOT_SERVING, the lease is renewed.
				for !p.isReady() {
					time.Sleep(500 * time.Millisecond)
					if p.isReady() {
						break
					}
					if st := p.readiness(); st == grpc_health_v1.HealthCheckResponse_SERVING {
						// Only in the moment between opening the gate and
						// reporting ready: recovered, with a valid lease.
						if _, _, err := wal.ReadBatch(t.Context(), blobs, testLayout, next); err != nil || !p.holder.Valid() {
							t.Fatalf("readiness SERVING %v after the acquisition, before the fence (%v) or with a lease not valid (valid: %v)",
								time.Since(p.acquiredAt), err, p.holder.Valid())
						}
					}
					select {
					case h := <-rivalGot:
						t.Errorf("another standby acquired the lease (epoch %d) %v after our acquisition, during our recovery",
							h.Epoch(), time.Since(p.acquiredAt))
					case <-p.done:
						if p.isReady() {
							t.Errorf("reported ready %v after the acquisition (lease valid: %v)",
								p.readyAt.Sub(p.acquiredAt), p.readyValid)
						}
						t.Fatalf("the takeover stopped %v after the acquisition: %v", time.Since(p.acquiredAt), p.err)
					default:
					}
				}
				took := p.readyAt.Sub(p.acquiredAt)
				if took < recovery {
					t.Fatalf("ready %v after the acquisition, want the recovery to take at least %v", took, recovery)
				}
				if !p.readyValid {
					t.Errorf("reported ready %v after the acquisition with a lease that was not valid", took)
				}
				synctest.Wait()
				select {
				case <-p.done:
					t.Fatalf("the takeover stopped right after reporting ready: %v", p.err)
				default:
				}
				rec := p.leaseRecord()
				if rec.Epoch != 2 || rec.Holder != "new" || rec.Released {
					t.Fatalf("lease at ready = %+v, want held by this process with epoch 2", rec)
				}
				// One write per d/3 since the acquisition (write 1).
				if renewals, want := rec.Write-1, uint64(took/lease.RenewalInterval(takeoverLease))-1; renewals < want {
					t.Fatalf("%d lease renewals during a recovery of %v, want at least %d", renewals, took, want)
				}
				if b, _, err := wal.ReadBatch(t.Context(), blobs, testLayout, next); err != nil ||
					b.Kind != wal.KindFence || b.Epoch != 2 {
					t.Fatalf("batch %d = %+v, %v; want the fence of epoch 2 (T1)", next, b, err)
				}

				// Serving: readiness SERVING (on a new connection: the
				// standby's connections are closed after 3 s), for three
				// more lease periods, the lease renewed.
				deadline := time.Now().Add(5 * time.Second)
				for p.readiness() != grpc_health_v1.HealthCheckResponse_SERVING {
					if time.Now().After(deadline) {
						t.Fatal("readiness not SERVING 5 s after the process reported ready")
					}
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(recovery)
				if st := p.readiness(); st != grpc_health_v1.HealthCheckResponse_SERVING || !p.holder.Valid() {
					t.Fatalf("readiness %v (lease valid %v) after serving for %v", st, p.holder.Valid(), recovery)
				}
				select {
				case h := <-rivalGot:
					t.Fatalf("another standby acquired the lease (epoch %d)", h.Epoch())
				default:
				}
				if err := p.stop(); err != nil {
					t.Fatalf("graceful stop = %v", err)
				}
				if rec := p.leaseRecord(); rec.Epoch != 2 || !rec.Released {
					t.Fatalf("lease after the graceful stop = %+v, want epoch 2 released", rec)
				}
			})
		})
	}
}

// A takeover whose lease is lost during its recovery (another process
// takes it over, or the store stops accepting its renewals until the
// renewal cutoff) stops within moments, during the replay, without
// serving: it never reports ready, readiness never says SERVING, it writes
// no fence and releases nothing; the error is the lease's, and the process
// exits 1.
//
// Covers: L7, L9, L11, H2
func TestTakeover_LeaseLostDuringRecoveryStopsWithoutServing(t *testing.T) {
	const batches = 30
	recovery := 3 * takeoverLease
	for _, tc := range []struct {
		name string
		// lose makes the process lose its lease during the recovery.
		lose func(t *testing.T, blobs *mem.Store)
		want error
		// by is when the process must have stopped, after the acquisition.
		by       time.Duration
		wantRec  func(lease.Record) bool
		describe string
	}{
		{
			name: "taken over",
			lose: func(t *testing.T, blobs *mem.Store) {
				if _, err := lease.Acquire(t.Context(), lease.Config{Store: blobs, Key: testLayout.LeaseKey(), NodeID: "n1",
					ProcessID: "thief", Duration: takeoverLease, TakeOverHeld: true}); err != nil {
					t.Fatal(err)
				}
			},
			want: lease.ErrLost,
			// The loss is found at the next renewal (2 × d/3), and the
			// replay stops at the next batch.
			by:       2*lease.RenewalInterval(takeoverLease) + recovery/batches,
			wantRec:  func(r lease.Record) bool { return r.Holder == "thief" && r.Epoch == 3 && !r.Released },
			describe: "the thief's epoch 3, untouched",
		},
		{
			name: "renewals not accepted",
			lose: func(t *testing.T, blobs *mem.Store) {
				blobs.SetFaults(func(op, key string) mem.Fault {
					if op == blob.OpPutIfMatch && key == testLayout.LeaseKey() {
						return mem.Fault{Latency: time.Hour}
					}
					return mem.Fault{}
				})
			},
			want: lease.ErrRenewalTimeout,
			// The renewal cutoff after the renewal at d/3 (d/3 + d -
			// 100 ms), and the replay stops at the next batch; a release
			// attempt would take up to 10 s more.
			by:       lease.RenewalInterval(takeoverLease) + takeoverLease - lease.CutoffMargin + recovery/batches,
			wantRec:  func(r lease.Record) bool { return r.Holder == "new" && r.Epoch == 2 && !r.Released },
			describe: "this process's epoch 2, not released",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				blobs := mem.New()
				next := crashedActive(t, blobs, batches)
				store := &slowStore{MemStore: flowstore.NewMemStore(), until: next, per: recovery / batches}
				p := startTakeover(t, blobs, store, nil)
				<-p.acquired
				time.Sleep(lease.RenewalInterval(takeoverLease) + time.Second) // one renewal, then the loss
				tc.lose(t, blobs)

			wait:
				for {
					select {
					case <-p.done:
						break wait
					case <-time.After(100 * time.Millisecond):
					}
					if st := p.readiness(); st == grpc_health_v1.HealthCheckResponse_SERVING {
						t.Fatalf("readiness SERVING %v after the acquisition, with the lease lost", time.Since(p.acquiredAt))
					}
				}
				stopped, err := time.Since(p.acquiredAt), p.err
				blobs.SetFaults(nil)
				if !errors.Is(err, tc.want) || ExitCode(err) != 1 {
					t.Fatalf("the takeover returned %v (exit %d) %v after the acquisition, want %v and exit 1",
						err, ExitCode(err), stopped, tc.want)
				}
				if stopped > tc.by {
					t.Fatalf("stopped %v after the acquisition, want by %v (during the recovery of %v)", stopped, tc.by, recovery)
				}
				if p.isReady() {
					t.Fatalf("reported ready %v after the acquisition, with the lease lost", p.readyAt.Sub(p.acquiredAt))
				}
				if _, _, err := wal.ReadBatch(t.Context(), blobs, testLayout, next); !errors.Is(err, blob.ErrNotFound) {
					t.Fatalf("batch %d after the stop: %v; want none (no fence written)", next, err)
				}
				if rec := p.leaseRecord(); !tc.wantRec(rec) {
					t.Fatalf("lease after the stop = %+v, want %s", rec, tc.describe)
				}
			})
		})
	}
}
