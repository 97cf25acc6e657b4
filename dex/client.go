package dex

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// ClientOptions configure a Client.
type ClientOptions struct {
	// Addresses are the servers, in order of preference (P5). Calls go to
	// the address that last answered; on UNAVAILABLE the client moves to
	// the next one.
	Addresses []string
	// Dialer opens connections; default grpc.NewClient without TLS plus
	// DialOptions.
	Dialer Dialer
	// DialOptions are added to the default Dialer's options.
	DialOptions []grpc.DialOption
	// Conn, when set, is used instead of Addresses and Dialer; the client
	// does not close it (for test helpers with an in-process server).
	Conn grpc.ClientConnInterface
	// RetryBackoff spaces retries after UNAVAILABLE. Default 50 ms to 2 s.
	RetryBackoff Backoff
	// RetryTimeout bounds how long one call keeps retrying UNAVAILABLE
	// (the call's context bounds it too). Default 1 minute.
	RetryTimeout time.Duration
	// Logger receives the client's logs (failovers). Default
	// slog.Default().
	Logger *slog.Logger
}

// Client calls FlowService: it starts, drives, stops and reads flow
// executions. Every call takes a context.Context. Calls that are safe to
// repeat (reads, StartFlow and Publish with their request IDs,
// SetAttributes) are retried on UNAVAILABLE across the addresses with
// backoff (P5); the others (InvokeRPC, StopFlow, SkipTimer) are sent once,
// to an address that reported itself serving, and never retried. A Client
// is safe for concurrent use.
type Client struct {
	opts  ClientOptions
	conns *connSet
	log   *slog.Logger

	mu        sync.Mutex
	cur       int  // address calls go to
	confirmed bool // cur answered a call since the last failover
}

// Dial creates a Client. It does not connect: connections are opened on
// the first call to each address (with that call's context), so Dial does
// not fail when a server is down.
func Dial(_ context.Context, opts ClientOptions) (*Client, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RetryTimeout <= 0 {
		opts.RetryTimeout = time.Minute
	}
	opts.RetryBackoff = opts.RetryBackoff.withDefaults(50*time.Millisecond, 2*time.Second)
	conns, err := newConnSet(opts.Addresses, opts.Conn, opts.Dialer, opts.DialOptions)
	if err != nil {
		return nil, err
	}
	return &Client{opts: opts, conns: conns, log: opts.Logger}, nil
}

// Close closes the connections the client opened.
func (c *Client) Close() error { return c.conns.close() }

// idempotency says whether a call may be sent again after UNAVAILABLE.
type idempotency int

const (
	// retryable calls are reads, or writes that carry a request ID or
	// write the same values again.
	retryable idempotency = iota
	// once calls are sent at most once.
	once
)

// call runs fn against the current address. On UNAVAILABLE it moves to the
// next address; a retryable call is then sent again after a backoff, until
// RetryTimeout or ctx ends. A once call is sent only to an address that
// answered before or whose health check says it serves FlowService, and is
// never sent twice.
func (c *Client) call(ctx context.Context, op string, kind idempotency, fn func(ctx context.Context, fc dexpb.FlowServiceClient) error) error {
	bo := &backoff{cfg: c.opts.RetryBackoff}
	deadline := time.Now().Add(c.opts.RetryTimeout)
	var lastErr error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if time.Now().After(deadline) {
				return wrapStatus(op, lastErr)
			}
			if !sleep(ctx, bo.next()) {
				return ctxError(ctx, op, lastErr)
			}
		}
		i, confirmed := c.current()
		cc, err := c.conns.get(ctx, i)
		if err != nil {
			return wrapStatus(op, err)
		}
		if kind == once && !confirmed {
			if err := c.probe(ctx, cc); err != nil {
				if ctx.Err() != nil {
					return ctxError(ctx, op, err)
				}
				lastErr = err
				c.failover(i, op, err)
				continue
			}
		}
		err = fn(ctx, dexpb.NewFlowServiceClient(cc))
		if err == nil {
			c.confirm(i)
			return nil
		}
		if ctx.Err() != nil {
			return ctxError(ctx, op, err)
		}
		if status.Code(err) != codes.Unavailable {
			c.confirm(i)
			return wrapStatus(op, err)
		}
		c.failover(i, op, err)
		if kind == once {
			// The server may have acted on the request; sending it again
			// could apply it twice.
			return wrapStatus(op, err)
		}
		lastErr = err
	}
}

// probe asks the health service whether cc serves FlowService. A server
// without a health service counts as serving.
func (c *Client) probe(ctx context.Context, cc grpc.ClientConnInterface) error {
	resp, err := grpc_health_v1.NewHealthClient(cc).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "dex.FlowService"})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return nil
	case err != nil:
		return err
	case resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING:
		return status.Errorf(codes.Unavailable, "dex.FlowService is %s", resp.GetStatus())
	}
	return nil
}

func (c *Client) current() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur, c.confirmed
}

func (c *Client) confirm(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == i {
		c.confirmed = true
	}
}

// failover moves from address i to the next one, unless another call
// already did.
func (c *Client) failover(i int, op string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != i {
		return
	}
	c.cur = (i + 1) % c.conns.len()
	c.confirmed = false
	if c.conns.len() > 1 {
		c.log.Info("server unavailable; trying the next address", "op", op,
			"address", c.conns.addr(i), "next", c.conns.addr(c.cur), "error", err)
	}
}

// ctxError reports that ctx ended, keeping the last server error for the
// message.
func ctxError(ctx context.Context, op string, last error) error {
	if last != nil && status.Code(last) != codes.Canceled && status.Code(last) != codes.DeadlineExceeded {
		return errors.Join(wrapStatus(op, ctx.Err()), wrapStatus(op, last))
	}
	return wrapStatus(op, ctx.Err())
}

// NewRequestID returns a random request ID, as StartFlow and Publish
// generate one per call.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
