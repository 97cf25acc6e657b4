package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
)

// RetryRule says when a call moves on to the next address of --server.
type RetryRule int

const (
	// OnUnavailable moves on whenever an address answers UNAVAILABLE. Only
	// for calls that are safe to repeat: reads, and writes the server
	// deduplicates (StartFlow and PublishToChannel with a request ID) or
	// that change nothing when repeated (SetAttributes, StopFlow,
	// SkipTimer).
	OnUnavailable RetryRule = iota
	// OnUnreachable moves on only when an address cannot be reached at
	// all, so the request was never sent. For calls that must not run
	// twice (InvokeRPC, StepDown): an UNAVAILABLE from a reachable process
	// may come from a call that had already taken effect.
	OnUnreachable
	// OnRefused moves on when an address cannot be reached or answers
	// FAILED_PRECONDITION, which promises that nothing changed. For
	// StepDown: its expectations name one process, so sending the same
	// request to every address is safe, and a standby refuses it.
	OnRefused
)

// connSet holds one lazily dialled connection per address of --server.
type connSet struct {
	addrs []string
	// sec are the dial options of TLS and the token (security.go).
	sec   []grpc.DialOption
	conns []*grpc.ClientConn
	// unresponsive is how long an attempt waits for a server that
	// answers nothing, not even a health check, before it gives the
	// address up (the SDK's DefaultUnresponsiveTimeout unless a test
	// shortens it).
	unresponsive time.Duration
	// codec, when set, encodes the values of requests and decodes those
	// of answers (--codec-key-file).
	codec dex.Codec
}

func newConnSet(addrs []string, sec []grpc.DialOption, unresponsive time.Duration) *connSet {
	if unresponsive <= 0 {
		unresponsive = dex.DefaultUnresponsiveTimeout
	}
	return &connSet{addrs: addrs, sec: sec, conns: make([]*grpc.ClientConn, len(addrs)), unresponsive: unresponsive}
}

func (c *connSet) conn(i int) (*grpc.ClientConn, error) {
	if c.conns[i] != nil {
		return c.conns[i], nil
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// A server that takes the TCP connection but never answers (a
		// frozen process) fails the connection after the bound instead of
		// gRPC's 20 s, and a connection whose server stops answering pings
		// is closed.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: c.unresponsive}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: dex.KeepaliveTime, Timeout: c.unresponsive, PermitWithoutStream: true}),
	}
	opts = append(opts, c.sec...) // TLS wins over the plaintext default
	if c.codec != nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(dex.CodecInterceptor(c.codec)))
	}
	cc, err := grpc.NewClient(c.addrs[i], opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", c.addrs[i], err)
	}
	c.conns[i] = cc
	return cc, nil
}

func (c *connSet) close() {
	for _, cc := range c.conns {
		if cc != nil {
			_ = cc.Close()
		}
	}
}

// Attempt is one address a call was sent to (or could not reach), and the
// error it got.
type Attempt struct {
	Addr      string
	Reachable bool
	Err       error
}

// call runs fn against the addresses in turn, starting with the address
// at index first, until one answers something other than what rule moves
// on from. It returns the index of the address whose error it returns and
// every address's outcome. When no address answered, the error is the
// last one; otherwise it is the last answer, so that an unreachable
// address does not hide what a reachable one said.
func (c *connSet) call(ctx context.Context, rule RetryRule, first int,
	fn func(ctx context.Context, cc *grpc.ClientConn) error,
) (int, []Attempt, error) {
	var tried []Attempt
	last, lastErr := first, error(nil)
	for k := range c.addrs {
		i := (first + k) % len(c.addrs)
		last = i
		cc, err := c.conn(i)
		if err != nil {
			tried = append(tried, Attempt{Addr: c.addrs[i], Err: err})
			lastErr = status.Error(codes.Unavailable, err.Error())
			continue
		}
		if rule != OnUnavailable && !waitReady(ctx, cc) {
			if ctx.Err() != nil {
				lastErr = status.FromContextError(ctx.Err()).Err()
				tried = append(tried, Attempt{Addr: c.addrs[i], Err: lastErr})
				return i, tried, lastErr
			}
			lastErr = status.Errorf(codes.Unavailable, "cannot connect to %s", c.addrs[i])
			tried = append(tried, Attempt{Addr: c.addrs[i], Err: lastErr})
			continue
		}
		lastErr = guard(ctx, c.unresponsive, cc, c.addrs[i], rule, func(ctx context.Context) error { return fn(ctx, cc) })
		tried = append(tried, Attempt{Addr: c.addrs[i], Reachable: true, Err: lastErr})
		code := status.Code(lastErr)
		moveOn := rule == OnUnavailable && code == codes.Unavailable ||
			rule == OnRefused && code == codes.FailedPrecondition
		if !moveOn || ctx.Err() != nil {
			return i, tried, lastErr
		}
	}
	for j := len(tried) - 1; j >= 0; j-- {
		if tried[j].Reachable {
			return indexOf(c.addrs, tried[j].Addr, last), tried, tried[j].Err
		}
	}
	return last, tried, lastErr
}

func indexOf(addrs []string, addr string, fallback int) int {
	for i, a := range addrs {
		if a == addr {
			return i
		}
	}
	return fallback
}

// guard runs one attempt fn on cc and gives it up when the server stops
// answering: after half the bound without an answer it asks the health
// service, on the same connection, for an answer within the other half;
// none makes the attempt end UNAVAILABLE (so a safe call moves on to the
// next address), and any answer, even an error, lets it go on (a long
// WaitForFlow is never cut off). For a call that must not run twice the
// error says the request may have taken effect.
func guard(ctx context.Context, unresponsiveAfter time.Duration, cc *grpc.ClientConn, addr string, rule RetryRule, fn func(ctx context.Context) error) error {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		half := unresponsiveAfter / 2
		t := time.NewTimer(half)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-stop:
				return
			case <-actx.Done():
				return
			}
			pctx, pcancel := context.WithTimeout(actx, half)
			_, err := grpc_health_v1.NewHealthClient(cc).Check(pctx, &grpc_health_v1.HealthCheckRequest{})
			silent := pctx.Err() != nil || status.Code(err) == codes.Unavailable
			pcancel()
			select {
			case <-stop:
				return
			default:
			}
			if silent && actx.Err() == nil {
				cancel(errUnresponsive)
				return
			}
			t.Reset(half)
		}
	}()
	err := fn(actx)
	close(stop)
	<-watched
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errUnresponsive) {
		if rule == OnUnavailable {
			return status.Errorf(codes.Unavailable, "%s answered nothing for %s, not even a health check: unresponsive", addr, unresponsiveAfter)
		}
		return status.Errorf(codes.Unavailable, "%s answered nothing for %s, not even a health check: unresponsive; the request was sent and may have taken effect",
			addr, unresponsiveAfter)
	}
	return err
}

// errUnresponsive is the cause of an attempt guard gave up.
var errUnresponsive = errors.New("server unresponsive")

// waitReady connects cc and reports whether it became ready. It gives up
// when the connection fails (the address is unreachable) or ctx ends.
func waitReady(ctx context.Context, cc *grpc.ClientConn) bool {
	cc.Connect()
	for {
		s := cc.GetState()
		switch s {
		case connectivity.Ready:
			return true
		case connectivity.TransientFailure, connectivity.Shutdown:
			return false
		}
		if !cc.WaitForStateChange(ctx, s) {
			return false
		}
	}
}

// Flow calls fn with a FlowService client, retrying addresses by rule.
func (s *Session) Flow(ctx context.Context, rule RetryRule,
	fn func(ctx context.Context, c dexpb.FlowServiceClient) error,
) error {
	_, _, err := s.conns.call(ctx, rule, 0, func(ctx context.Context, cc *grpc.ClientConn) error {
		return fn(ctx, dexpb.NewFlowServiceClient(cc))
	})
	return err
}

// Call runs fn against the addresses of --server in turn, starting with
// the one at index first, moving on by rule (see connSet.call).
func (s *Session) Call(ctx context.Context, rule RetryRule, first int,
	fn func(ctx context.Context, cc *grpc.ClientConn) error,
) (int, []Attempt, error) {
	return s.conns.call(ctx, rule, first, fn)
}

// Addresses are the addresses of --server.
func (s *Session) Addresses() []string { return s.conns.addrs }

// DialOptions are the options of TLS and the token, for a command that
// dials the addresses itself.
func (s *Session) DialOptions() []grpc.DialOption { return s.conns.sec }

// ServerList is --server as the addresses that were used.
func (s *Session) ServerList() string { return strings.Join(s.conns.addrs, ",") }
