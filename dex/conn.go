package dex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Dialer opens a connection to one server address. The Client and the
// Worker call it at most once per address, lazily, and close what it
// returns if it implements io.Closer. A test helper that runs an in-process
// server can return a connection to it (over bufconn or a loopback
// listener).
type Dialer func(ctx context.Context, address string) (grpc.ClientConnInterface, error)

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

// backoff is a running Backoff.
type backoff struct {
	cfg Backoff
	cur time.Duration
}

func (b *backoff) reset() { b.cur = 0 }

// next returns the next delay, ±20% jitter.
func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.cfg.Initial
	} else {
		b.cur = min(2*b.cur, b.cfg.Max)
	}
	j := 0.8 + 0.4*rand.Float64() //nolint:gosec // jitter needs no secure randomness
	return time.Duration(float64(b.cur) * j)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// connSet holds one connection per server address (P5).
type connSet struct {
	addrs []string
	dial  Dialer
	fixed grpc.ClientConnInterface

	mu      sync.Mutex
	conns   []grpc.ClientConnInterface
	closers []io.Closer
	closed  bool
}

func newConnSet(addrs []string, conn grpc.ClientConnInterface, dial Dialer, opts []grpc.DialOption) (*connSet, error) {
	if conn != nil {
		return &connSet{addrs: []string{"conn"}, fixed: conn}, nil
	}
	if len(addrs) == 0 {
		return nil, errors.New("dex: no server addresses")
	}
	for _, a := range addrs {
		if a == "" {
			return nil, errors.New("dex: empty server address")
		}
	}
	if dial == nil {
		dial = func(_ context.Context, addr string) (grpc.ClientConnInterface, error) {
			all := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
			return grpc.NewClient(addr, all...)
		}
	}
	return &connSet{
		addrs: append([]string(nil), addrs...),
		dial:  dial,
		conns: make([]grpc.ClientConnInterface, len(addrs)),
	}, nil
}

func (s *connSet) len() int { return len(s.addrs) }

func (s *connSet) addr(i int) string { return s.addrs[i] }

// get returns the connection to address i, dialing it on first use.
func (s *connSet) get(ctx context.Context, i int) (grpc.ClientConnInterface, error) {
	if s.fixed != nil {
		return s.fixed, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("dex: connections are closed")
	}
	if c := s.conns[i]; c != nil {
		return c, nil
	}
	c, err := s.dial(ctx, s.addrs[i])
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", s.addrs[i], err)
	}
	s.conns[i] = c
	if cl, ok := c.(io.Closer); ok {
		s.closers = append(s.closers, cl)
	}
	return c, nil
}

// close closes the connections the set dialed.
func (s *connSet) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
