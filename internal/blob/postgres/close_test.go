package postgres_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/postgres"
	"github.com/dexzd/dexzd/internal/testenv"
)

// closeBound is how long Close may take on a store no packet reaches: the
// store's grace of about a second and some slack for a loaded machine.
const closeBound = 2500 * time.Millisecond

// stallProxy forwards TCP connections to a PostgreSQL server until stall is
// called; from then on it keeps every connection open, accepts new ones and
// drops every byte in both directions (toxiproxy's timeout toxic with
// timeout 0, the chaos run's store outage).
type stallProxy struct {
	ln       net.Listener
	upstream string
	stalled  atomic.Bool
	delay    atomic.Int64 // nanoseconds each chunk waits before it is forwarded
	chunks   atomic.Int64 // chunks read from either side, forwarded or not

	mu    sync.Mutex
	open  int // client connections not yet closed by the client
	conns []net.Conn
	wg    sync.WaitGroup
}

func newStallProxy(t *testing.T, upstream string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, upstream: upstream}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) stall() { p.stalled.Store(true) }

// setDelay makes every chunk wait d before it is forwarded.
func (p *stallProxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

// openConns returns the client connections the store has not closed.
func (p *stallProxy) openConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

// wantNoConns fails the test unless every client connection is closed
// within a moment (the proxy sees a close when its read returns).
func (p *stallProxy) wantNoConns(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for p.openConns() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := p.openConns(); n != 0 {
		t.Errorf("%d connections still open after Close", n)
	}
}

// waitForTraffic waits until the proxy has read more than seen chunks:
// a statement sent after seen was read has reached it.
func (p *stallProxy) waitForTraffic(t *testing.T, seen int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.chunks.Load() <= seen {
		if time.Now().After(deadline) {
			t.Fatal("the statement did not reach the proxy within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func (p *stallProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.open++
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Go(func() {
			p.forward(server, client)
			// The client closed its end (or the test ended).
			p.mu.Lock()
			p.open--
			p.mu.Unlock()
			_ = server.Close()
		})
		p.wg.Go(func() { p.forward(client, server) })
	}
}

// forward copies src to dst until src ends, dropping what it reads while
// the proxy is stalled.
func (p *stallProxy) forward(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.chunks.Add(1)
		}
		if d := time.Duration(p.delay.Load()); n > 0 && d > 0 {
			time.Sleep(d)
		}
		if n > 0 && !p.stalled.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				// The other side is gone: keep reading src until it ends,
				// so that its end is seen.
				_, _ = io.Copy(io.Discard, src)
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// throughProxy returns cfg with its DSN pointing at the proxy.
func throughProxy(t *testing.T, cfg postgres.Config) (postgres.Config, *stallProxy) {
	t.Helper()
	u, err := url.Parse(cfg.DSN)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	p := newStallProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	cfg.DSN = u.String()
	return cfg, p
}

// openThroughProxy opens a store on a table of its own through a proxy,
// with n pooled connections that have each run a statement; direct is
// the configuration without the proxy.
func openThroughProxy(t *testing.T, n int) (s *postgres.Store, proxy *stallProxy, direct postgres.Config) {
	t.Helper()
	direct = testenv.PostgresConfig(t)
	cfg, proxy := throughProxy(t, direct)
	s, err := postgres.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	warm(t, s, n)
	return s, proxy, direct
}

// result is what a call in flight returned.
type result struct {
	v   blob.Version
	err error
}

// putInFlight sends a PutIfAbsent without a deadline and returns once it
// has reached the proxy; its result arrives on the channel.
func putInFlight(t *testing.T, s *postgres.Store, proxy *stallProxy) <-chan result {
	t.Helper()
	inFlight := make(chan result, 1)
	seen := proxy.chunks.Load()
	go func() {
		v, err := s.PutIfAbsent(context.Background(), "batch", []byte("x"))
		inFlight <- result{v, err}
	}()
	proxy.waitForTraffic(t, seen)
	return inFlight
}

// closeWithin runs s.Close and fails the test unless it returns within
// bound; it returns how long Close took.
func closeWithin(t *testing.T, s *postgres.Store, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	// Wait past the bound to report how long the old Close took, up to
	// pgx's 15 s per connection.
	select {
	case err := <-done:
		took := time.Since(start)
		if err != nil {
			t.Errorf("Close: %v", err)
		}
		if took > bound {
			t.Errorf("Close on a store no packet reaches took %s, want at most %s", took.Round(time.Millisecond), bound)
		}
		return took
	case <-time.After(20 * time.Second):
		t.Fatalf("Close on a store no packet reaches did not return within 20 s (want at most %s)", bound)
		return 0
	}
}

// warm fills the pool with n connections that have each run a statement.
func warm(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = s.List(t.Context(), "", "", 1) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// Covers: a stopping process never waits more than about a second for a
// store whose connections pass nothing. The chaos run's timeline: a store
// with pooled connections, then an outage (no packet passes, connections
// stay open); the log writer's and the lease's attempts time out on it
// (2 s attempt timeout, shortened here), then the process stops and closes
// the store. pgx's pool gave each of those connections 15 s to close (a
// cancel request and a goodbye nobody answers): Close took 14.6-16.9 s.
func TestClose_BoundedWhenNoPacketPasses(t *testing.T) {
	t.Parallel()
	s, proxy, _ := openThroughProxy(t, 4)
	proxy.stall()
	for i := range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		_, err := s.PutIfAbsent(ctx, "batch", []byte{byte(i)})
		cancel()
		if blob.Classify(err) != blob.ErrTransient {
			t.Fatalf("PutIfAbsent during the outage: got %v, want a transient error", err)
		}
	}
	took := closeWithin(t, s, closeBound)
	t.Logf("Close took %s", took.Round(time.Millisecond))
	// Close closed every connection it opened, the cancel requests'
	// included: nothing of the store lingers on.
	proxy.wantNoConns(t)
	wantAll(t, s, blob.ErrPermanent)
}

// Covers: a statement in flight when Close is called on a store no packet
// reaches (its context has no deadline) ends with a transient error by the
// time Close returns: it is never reported as done, nor as refused, since
// it may have reached the database; and Close does not wait for it longer
// than its bound.
func TestClose_EndsStatementInFlight(t *testing.T) {
	t.Parallel()
	s, proxy, _ := openThroughProxy(t, 2)
	proxy.stall()
	inFlight := putInFlight(t, s, proxy)
	select {
	case r := <-inFlight:
		t.Fatalf("PutIfAbsent returned during the outage before Close: %q, %v", r.v, r.err)
	default:
	}
	closeWithin(t, s, closeBound)
	select {
	case r := <-inFlight:
		if blob.Classify(r.err) != blob.ErrTransient {
			t.Fatalf("statement in flight at Close: got %q, %v; want a transient error", r.v, r.err)
		}
	default:
		t.Fatal("Close returned while a statement was still in flight")
	}
	proxy.wantNoConns(t)
}

// Covers: Close on a store that answers slowly waits for a statement in
// flight, which reports its real outcome: Close cuts the connections only
// after its grace.
func TestClose_LetsStatementInFlightFinish(t *testing.T) {
	t.Parallel()
	s, proxy, direct := openThroughProxy(t, 1)
	proxy.setDelay(100 * time.Millisecond) // a few round trips: well within the grace
	inFlight := putInFlight(t, s, proxy)   // on its way, held 100 ms per hop
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	var r result
	select {
	case r = <-inFlight:
	default:
		t.Fatal("Close returned while a statement was still in flight")
	}
	if r.err != nil {
		t.Fatalf("PutIfAbsent in flight at Close on a store that answers: %v", r.err)
	}
	if took > closeBound {
		t.Errorf("Close took %s", took)
	}
	check, err := postgres.New(t.Context(), direct)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	if data, v, err := check.Get(t.Context(), "batch"); err != nil || string(data) != "x" || v != r.v {
		t.Fatalf("the write reported done at %q reads back as %q at %q, %v", r.v, data, v, err)
	}
}
