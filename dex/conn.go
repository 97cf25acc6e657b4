package dex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// Dialer opens a connection to one server address. The Client and the
// Worker call it at most once per address, lazily, and close what it
// returns if it implements io.Closer. A test helper that runs an in-process
// server can return a connection to it (over bufconn or a loopback
// listener).
type Dialer func(ctx context.Context, address string) (grpc.ClientConnInterface, error)

// DefaultAddress is the server address a Client or Worker uses when
// given none: the API's default listen address, as for dexcli and
// `dex-server-zd dev`.
const DefaultAddress = "127.0.0.1:8801"

// DefaultUnresponsiveTimeout is the default of ClientOptions and
// WorkerOptions.UnresponsiveTimeout: a server that answers nothing for this
// long is left for the next address. It is well below the default
// lease.duration + 1 s (11 s), the earliest a standby may take over from a
// frozen or unreachable active.
const DefaultUnresponsiveTimeout = 5 * time.Second

// KeepaliveTime is how long a connection the default Dialer opened may stay
// silent before the SDK sends an HTTP/2 PING on it (the least gRPC allows).
// A PING not acknowledged within the UnresponsiveTimeout closes the
// connection. The server's keepalive enforcement policy must allow pings
// this often (its MinTime must not be longer), or it answers them with
// GOAWAY ENHANCE_YOUR_CALM.
const KeepaliveTime = 10 * time.Second

// The default Dialer's connect backoff: a server that restarts in a few
// hundred milliseconds is reconnected within about 0.5 s (gRPC's default
// waits 1 s before the first retry), and a server down for longer is
// retried every 0.5 s at most.
var connectBackoff = backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond}

// defaultDialOptions are the default Dialer's options: no TLS, keepalive
// with the detection bound as its timeout, the short connect backoff, a
// connect attempt cut off after the detection bound (a frozen server
// accepts TCP connections in its kernel but never answers the HTTP/2
// handshake), and no message size limit of the SDK's own: an answer
// carries values up to the server's payload limit (a flow's output, its
// attributes), so gRPC's default receive limit of 4 MiB would refuse legal
// answers, and a request is bounded by the server's limit, which refuses a
// larger one with RESOURCE_EXHAUSTED. The worker stream sets its own
// receive limit (WorkerOptions.MaxTaskBytes).
func defaultDialOptions(unresponsive time.Duration) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: unresponsive, PermitWithoutStream: true}),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: connectBackoff, MinConnectTimeout: unresponsive}),
	}
}

// Backoff is an exponential backoff with jitter: the first delay is Initial,
// each next one doubles, up to Max.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
}

func (b Backoff) withDefaults(initial, maximum time.Duration) Backoff {
	if b.Initial <= 0 {
		b.Initial = initial
	}
	if b.Max <= 0 {
		b.Max = maximum
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	return b
}

// backoffState is a running Backoff.
type backoffState struct {
	cfg Backoff
	cur time.Duration
}

func (b *backoffState) reset() { b.cur = 0 }

// next returns the next delay, ±20% jitter.
func (b *backoffState) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.cfg.Initial
	} else {
		b.cur = min(2*b.cur, b.cfg.Max)
	}
	j := 0.8 + 0.4*rand.Float64() //nolint:gosec // jitter needs no secure randomness
	return time.Duration(float64(b.cur) * j)
}

// pause waits d before a retry on address i, or less: when i's connection
// is down now (connecting, or waiting out its connect backoff), the retry
// goes as soon as it is up again, so that a server that restarts is
// answering again as soon as gRPC has reconnected, not a retry backoff
// later. It reports whether ctx is still live.
func (s *connSet) pause(ctx context.Context, d time.Duration, i int) bool {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if !s.reconnected(wctx, i) {
		<-wctx.Done()
	}
	return ctx.Err() == nil
}

// reconnected waits, while ctx lasts, for address i's connection to come
// up again if it is down now. It reports false at once when the
// connection is up, not dialed yet or not a *grpc.ClientConn, and when ctx
// ends first.
func (s *connSet) reconnected(ctx context.Context, i int) bool {
	s.mu.Lock()
	e := s.eps[i]
	s.mu.Unlock()
	var cc *grpc.ClientConn
	if e != nil {
		cc, _ = e.cc.(*grpc.ClientConn)
	}
	if cc == nil || cc.GetState() == connectivity.Ready {
		return false
	}
	for {
		st := cc.GetState()
		switch st {
		case connectivity.Ready:
			return true
		case connectivity.Idle:
			cc.Connect()
		case connectivity.Shutdown:
			return false
		}
		if !cc.WaitForStateChange(ctx, st) {
			return false
		}
	}
}

// connSet holds one connection per server address and what the SDK
// knows of each server's liveness.
type connSet struct {
	addrs        []string
	dial         Dialer
	unresponsive time.Duration
	// base ends when the set is closed; background health checks run
	// under it.
	base   context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	eps     []*endpoint
	closers []io.Closer
	closed  bool
}

// endpoint is one address and its connection, once dialed.
type endpoint struct {
	addr string
	cc   grpc.ClientConnInterface
	// last is when the server last answered on cc (Unix nanoseconds): a
	// reply or a status of its own to a call, a message on a stream, an
	// answer to a health check.
	last atomic.Int64
	// suspect is set while the server is known to have stopped answering
	// (an attempt or a health check got nothing within the bound), until
	// it answers again.
	suspect atomic.Bool

	mu      sync.Mutex
	probing *check // the health check in flight, shared
}

// check is one health check of an endpoint; ok is set before done closes.
type check struct {
	done chan struct{}
	ok   bool
}

func newConnSet(addrs []string, conn grpc.ClientConnInterface, dial Dialer, opts []grpc.DialOption, unresponsive time.Duration,
	tlsCfg *TLSConfig, token TokenSource) (*connSet, error) {
	sec, err := DialOptions(tlsCfg, token)
	if err != nil {
		return nil, err
	}
	opts = append(sec, opts...)
	base, cancel := context.WithCancel(context.Background())
	s := &connSet{unresponsive: unresponsive, base: base, cancel: cancel}
	if conn != nil {
		s.addrs = []string{"conn"}
		s.eps = []*endpoint{newEndpoint("conn", conn)}
		return s, nil
	}
	if len(addrs) == 0 {
		cancel()
		return nil, errors.New("dex: no server addresses")
	}
	for _, a := range addrs {
		if a == "" {
			cancel()
			return nil, errors.New("dex: empty server address")
		}
	}
	if dial == nil {
		dial = func(_ context.Context, addr string) (grpc.ClientConnInterface, error) {
			// The caller's options come last so that they win.
			return grpc.NewClient(addr, append(defaultDialOptions(unresponsive), opts...)...)
		}
	}
	s.addrs = append([]string(nil), addrs...)
	s.dial = dial
	s.eps = make([]*endpoint, len(addrs))
	return s, nil
}

func newEndpoint(addr string, cc grpc.ClientConnInterface) *endpoint {
	e := &endpoint{addr: addr, cc: cc}
	e.last.Store(time.Now().UnixNano())
	return e
}

func (s *connSet) addr(i int) string { return s.addrs[i] }

// get returns the endpoint of address i, dialing it on first use.
func (s *connSet) get(ctx context.Context, i int) (*endpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("dex: connections are closed")
	}
	if e := s.eps[i]; e != nil {
		return e, nil
	}
	c, err := s.dial(ctx, s.addrs[i])
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", s.addrs[i], err)
	}
	e := newEndpoint(s.addrs[i], c)
	s.eps[i] = e
	if cl, ok := c.(io.Closer); ok {
		s.closers = append(s.closers, cl)
	}
	return e, nil
}

// next returns the address to use after address i failed: the next one
// in order whose server is not known to be unresponsive. When every other
// server is, it stays on i (if i's server answered: a standby that
// refuses, while the active is frozen, may be about to take over) and
// checks the others in the background, so that one that answers again is
// chosen next time.
func (s *connSet) next(i int) int {
	s.mu.Lock()
	eps := append([]*endpoint(nil), s.eps...)
	s.mu.Unlock()
	n := len(eps)
	for k := 1; k < n; k++ {
		j := (i + k) % n
		if e := eps[j]; e == nil || !e.suspect.Load() {
			return j
		}
	}
	for k := 1; k < n; k++ {
		s.probe(eps[(i+k)%n])
	}
	if e := eps[i]; e != nil && !e.suspect.Load() {
		return i
	}
	return (i + 1) % n
}

// close closes the connections the set dialed.
func (s *connSet) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.cancel()
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// probeService is the name a liveness check asks about. Any answer counts,
// whatever the status: the check asks whether the server answers at all.
const probeService = "dex.FlowService"

// probe starts a health check of e, or joins the one in flight, and
// returns it. The check gets half the detection bound; its result updates
// e's liveness.
func (s *connSet) probe(e *endpoint) *check {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.probing != nil {
		return e.probing
	}
	c := &check{done: make(chan struct{})}
	e.probing = c
	go func() {
		ctx, cancel := context.WithTimeout(s.base, s.unresponsive/2)
		_, err := grpc_health_v1.NewHealthClient(e.cc).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: probeService})
		cancel()
		c.ok = answered(err)
		switch {
		case c.ok:
			e.answered()
		case s.base.Err() == nil:
			e.suspect.Store(true)
		}
		e.mu.Lock()
		e.probing = nil
		e.mu.Unlock()
		close(c.done)
	}()
	return c
}

// answered records an answer from e's server.
func (e *endpoint) answered() {
	e.last.Store(time.Now().UnixNano())
	e.suspect.Store(false)
}

func (e *endpoint) lastAnswer() time.Time { return time.Unix(0, e.last.Load()) }

// answered reports whether err (from a call) is the server's own answer,
// not silence (a deadline or a cancellation) or a broken connection
// (UNAVAILABLE, which the server also sends to refuse a call, and then
// proves nothing about its liveness either way).
func answered(err error) bool {
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable:
		return false
	}
	return true
}

// errUnresponsive is the cause of an attempt abandoned because its server
// stopped answering.
var errUnresponsive = errors.New("server unresponsive")

// unresponsiveError is the error of an attempt abandoned because its
// server answered nothing within the detection bound. Its gRPC code is
// UNAVAILABLE: callers that check codes see a server they could not reach.
type unresponsiveError struct {
	addr  string
	bound time.Duration
}

func (e *unresponsiveError) Error() string {
	return fmt.Sprintf("server unresponsive: no answer from %s within %v, neither to the call nor to a health check", e.addr, e.bound)
}

func (e *unresponsiveError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

func isUnresponsive(err error) bool {
	var u *unresponsiveError
	return errors.As(err, &u)
}

// guard runs one attempt, fn, against e and abandons it when e's server
// stops answering: once the attempt has waited half the detection bound
// without any answer from the server on e's connection, a health check is
// sent on that connection; if it gets no answer within the other half, fn's
// context is cancelled and guard returns unresponsiveError, and e is
// marked unresponsive. A server that answers the check is alive (a slow
// write, a long poll, a worker stream with nothing to say) and the attempt
// goes on, checked again after another half bound of silence. So a frozen
// or unreachable server is left within the bound, and a legitimately long
// call is never cut off. Concurrent attempts on one connection share the
// checks, and a busy connection needs none.
func (s *connSet) guard(ctx context.Context, e *endpoint, fn func(ctx context.Context) error) error {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watch(actx, stop, e, func() { cancel(errUnresponsive) })
	}()
	err := fn(actx)
	close(stop)
	<-watched
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errUnresponsive) {
		e.suspect.Store(true)
		return &unresponsiveError{addr: e.addr, bound: s.unresponsive}
	}
	if err == nil || answered(err) {
		e.answered()
	}
	return err
}

// watch calls dead when e's server answers nothing for the detection bound
// while the attempt runs (until stop closes or ctx ends).
func (s *connSet) watch(ctx context.Context, stop <-chan struct{}, e *endpoint, dead func()) {
	half := s.unresponsive / 2
	start := time.Now()
	t := time.NewTimer(half)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
		// Silence counts from the later of the attempt's start and the
		// server's last answer.
		if d := time.Until(later(start, e.lastAnswer()).Add(half)); d > 0 {
			t.Reset(d)
			continue
		}
		c := s.probe(e)
		select {
		case <-c.done:
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
		if !c.ok {
			dead()
			return
		}
		t.Reset(half)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
