package dex

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ClientOptions configure a Client.
type ClientOptions struct {
	// Addresses are the servers, in order of preference. Calls go to
	// the address that last answered; on UNAVAILABLE, or when the server
	// stops answering (UnresponsiveTimeout), the client moves to the next
	// one. Default: DefaultAddress, as for dexcli.
	Addresses []string
	// Dialer opens connections; default grpc.NewClient (TLS only with TLS), with
	// keepalive (KeepaliveTime, UnresponsiveTimeout) and a connect backoff
	// of 50 ms growing to 500 ms, plus DialOptions.
	Dialer Dialer
	// DialOptions are added to the default Dialer's options (after them,
	// so they win).
	DialOptions []grpc.DialOption
	// Conn, when set, is used instead of Addresses and Dialer; the client
	// does not close it (for test helpers with an in-process server).
	Conn grpc.ClientConnInterface
	// RetryBackoff spaces retries after UNAVAILABLE. Default 50 ms to
	// 500 ms, so that a call waiting for a standby to take over is answered
	// soon after it serves.
	RetryBackoff Backoff
	// RetryTimeout bounds how long one call keeps retrying UNAVAILABLE,
	// and sending again a call the server refused as overloaded (the
	// call's context bounds it too). Default 1 minute.
	RetryTimeout time.Duration
	// Logger receives the client's logs (failovers). Default
	// slog.Default().
	Logger *slog.Logger
	// TracerProvider, when set, traces every call: a span per call
	// ("dex.StartFlow" and so on, across its retries and failovers) whose
	// context goes to the server in the gRPC metadata (W3C traceparent),
	// so the server's spans, and the spans of the workers that run the
	// flow's steps, join the caller's trace. With the default Dialer each
	// attempt is also a gRPC client span (otelgrpc). Nil traces nothing
	// and costs nothing; pass otel.GetTracerProvider() to use the global
	// one.
	TracerProvider trace.TracerProvider
	// UnresponsiveTimeout bounds how long a call waits on a server that
	// answers nothing (frozen, hung, or cut off by the network) before the
	// client leaves it for the next address. An attempt that has had no
	// answer for half of it is followed by a health check on the same
	// connection; when that gets no answer within the other half, the
	// attempt is abandoned: an idempotent call is sent again to the next
	// address, any other call returns an *OutcomeUnknownError. A server
	// that answers the check is alive and the call waits on, so slow writes
	// and long polls (WaitForFlow, InvokeRPC) are not cut off. It is also
	// the default Dialer's keepalive timeout and connect timeout. Default
	// DefaultUnresponsiveTimeout (5 s); keep it below the server's
	// lease.duration + 1 s, the earliest a standby can take over from a
	// frozen active.
	UnresponsiveTimeout time.Duration

	// TLS connects over TLS (api.tls); nil connects in plaintext. Token,
	// when set, is sent as "authorization: Bearer <token>" on every call
	// (auth.tokensFile). Both apply to the default Dialer (security.go).
	TLS   *TLSConfig
	Token TokenSource

	// Codec, when set, encodes every user value the client sends (inputs,
	// attributes, channel messages, RPC payloads) and decodes every value
	// it reads back, for example to encrypt them end to end
	// (NewAESGCMCodec): the workers need the same codec. See Codec.
	Codec Codec
}

// Client calls FlowService: it starts, drives, stops and reads flow
// executions. Every call takes a context.Context. Calls that are safe to
// repeat (reads, StartFlow, Publish, Reset and ContinueAsNew with their
// request IDs, SetAttributes) are retried on UNAVAILABLE, and when a server stops
// answering (UnresponsiveTimeout), across the addresses with backoff;
// the others (InvokeRPC, StopFlow, SkipTimer) are sent once, to an address
// that reported itself serving, and never retried: when they end without a
// definitive answer they return an *OutcomeUnknownError. Every call, once
// calls included, is sent again when the server refuses it as overloaded
// (RESOURCE_EXHAUSTED with a RetryInfo detail: it did nothing), after the
// server's hint plus up to half of it again as jitter, within RetryTimeout;
// RESOURCE_EXHAUSTED without RetryInfo (a value or request above a limit)
// is returned at once. A Client is safe for concurrent use.
type Client struct {
	opts   ClientOptions
	conns  *connSet
	log    *slog.Logger
	tracer *tracer // nil: no tracing

	mu        sync.Mutex
	cur       int       // address calls go to
	confirmed bool      // cur answered a call since the last failover
	warned    time.Time // the last "cannot reach" warning

	// indexed holds the names of the indexed attributes the client has
	// written: their values travel in plaintext, whatever the codec (E36).
	indexed sync.Map
}

// noteIndexed records the indexed attributes among vals.
func (c *Client) noteIndexed(vals []AttributeValue) {
	for _, v := range vals {
		if v.indexed {
			c.indexed.Store(v.name, true)
		}
	}
}

func (c *Client) isIndexed(name string) bool {
	_, ok := c.indexed.Load(name)
	return ok
}

// unreachableWarnEvery spaces the client's warnings that no address
// serves: one after the first failed attempt, then one every 10 s while
// it lasts, so a client pointed at the wrong place does not retry in
// silence.
const unreachableWarnEvery = 10 * time.Second

// NewClient creates a Client. It does not connect: connections are opened
// on the first call to each address (with that call's context), so
// NewClient does not fail when a server is down.
func NewClient(opts ClientOptions) (*Client, error) {
	if len(opts.Addresses) == 0 && opts.Conn == nil {
		opts.Addresses = []string{DefaultAddress}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RetryTimeout <= 0 {
		opts.RetryTimeout = time.Minute
	}
	if opts.UnresponsiveTimeout <= 0 {
		opts.UnresponsiveTimeout = DefaultUnresponsiveTimeout
	}
	opts.RetryBackoff = opts.RetryBackoff.withDefaults(50*time.Millisecond, 500*time.Millisecond)
	tr := newTracer(opts.TracerProvider)
	conns, err := newConnSet(opts.Addresses, opts.Conn, opts.Dialer, tr.dialOptions(opts.DialOptions), opts.UnresponsiveTimeout, opts.TLS, opts.Token)
	if err != nil {
		return nil, err
	}
	return &Client{opts: opts, conns: conns, log: opts.Logger, tracer: tr}, nil
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

// call runs fn against the current address, each attempt guarded by the
// detection bound (connSet.guard). On UNAVAILABLE, or when the server
// stops answering, it moves to the next address; a retryable call is then
// sent again after a backoff, until RetryTimeout or ctx ends. A once call
// is sent only to an address that answered before or whose health check
// says it serves FlowService, and is never sent twice. A call that changes
// state (a once call, or one with requestID) and ends without a definitive
// answer after it was sent returns an *OutcomeUnknownError: a once call at
// once, a call with a request ID when it gives up.
//
// With ClientOptions.TracerProvider set, the call is one span (tracing.go),
// the parent of its attempts' gRPC spans; flowID, when not empty, names
// the flow on it.
func (c *Client) call(ctx context.Context, op, flowID string, kind idempotency, requestID string, fn func(ctx context.Context, fc dexpb.FlowServiceClient) error) (err error) {
	if c.tracer != nil {
		var end func(error)
		ctx, end = c.tracer.startCall(ctx, op, flowID)
		defer func() { end(err) }()
	}
	bo := &backoffState{cfg: c.opts.RetryBackoff}
	deadline := time.Now().Add(c.opts.RetryTimeout)
	var lastErr error
	unknownAt := "" // the address of the last attempt sent without a definitive answer
	giveUp := func(err error) error {
		if unknownAt != "" && (kind == once || requestID != "") {
			return &OutcomeUnknownError{Op: op, Address: unknownAt, RequestID: requestID, Err: err}
		}
		return err
	}
	refused := false         // the last attempt was refused as overloaded and waited for
	var hinted time.Duration // the retry hint of the last UNAVAILABLE, if it had one
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !refused {
			if time.Now().After(deadline) {
				return giveUp(wrapStatus(op, lastErr))
			}
			wait := hinted
			if wait > 0 {
				// A process about to hand over, or a hot standby about to
				// take over, asks for a quick retry: no growing backoff,
				// so the call lands soon after the new active serves.
				wait = min(wait, bo.cfg.Max)
				wait += mrand.N(wait/5 + 1)
			} else {
				wait = bo.next()
			}
			i, _ := c.current()
			if !c.conns.pause(ctx, wait, i) {
				return giveUp(ctxError(ctx, op, lastErr))
			}
		}
		refused, hinted = false, 0
		i, confirmed := c.current()
		e, err := c.conns.get(ctx, i)
		if err != nil {
			return giveUp(wrapStatus(op, err))
		}
		if kind == once && !confirmed {
			if err := c.probe(ctx, e); err != nil {
				if ctx.Err() != nil {
					return giveUp(ctxError(ctx, op, err))
				}
				lastErr = err
				c.failover(i, op, err)
				continue
			}
		}
		if ctx.Err() != nil {
			return giveUp(ctxError(ctx, op, lastErr))
		}
		err = c.conns.guard(ctx, e, func(ctx context.Context) error {
			return fn(ctx, dexpb.NewFlowServiceClient(withCodec(e.cc, c.opts.Codec, c.isIndexed)))
		})
		if err == nil {
			c.confirm(i)
			return nil
		}
		if ctx.Err() != nil {
			unknownAt = e.addr
			return giveUp(ctxError(ctx, op, err))
		}
		if hint, ok := overloaded(err); ok {
			// Refused before the server did anything: any call may be sent
			// again, to the same address.
			c.confirm(i)
			wait := hint + mrand.N(hint/2+1)
			if time.Now().Add(wait).After(deadline) {
				return giveUp(wrapStatus(op, err))
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return giveUp(ctxError(ctx, op, err))
			}
			lastErr, refused = err, true
			continue
		}
		if endedWithCtx(ctx, err) {
			// The server enforced ctx's deadline (sent as grpc-timeout)
			// before this process's timer fired: the call may have been
			// acted on, as when ctx ends here first.
			unknownAt = e.addr
			return giveUp(ctxError(ctx, op, err))
		}
		if status.Code(err) != codes.Unavailable {
			c.confirm(i)
			return wrapStatus(op, err)
		}
		unknownAt = e.addr
		hinted, _ = retryHint(err)
		c.failover(i, op, err)
		if kind == once {
			// The server may have acted on the request; sending it again
			// could apply it twice.
			return giveUp(wrapStatus(op, err))
		}
		lastErr = err
	}
}

// deadlineSkew is how long before ctx's deadline a DEADLINE_EXCEEDED is
// taken as the server's enforcement of it (clocks and timers of the two
// processes differ by about this much).
const deadlineSkew = 100 * time.Millisecond

// endedWithCtx reports whether err, a DEADLINE_EXCEEDED, is ctx's deadline
// as the server enforced it, and then waits until ctx ends here too. A
// DEADLINE_EXCEEDED far from ctx's deadline is the server's own answer (a
// WaitForFlow that waited its longest) and is not.
func endedWithCtx(ctx context.Context, err error) bool {
	if status.Code(err) != codes.DeadlineExceeded {
		return false
	}
	dl, ok := ctx.Deadline()
	if !ok || time.Until(dl) > deadlineSkew {
		return false
	}
	t := time.NewTimer(time.Until(dl) + deadlineSkew)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true
	case <-t.C:
		return ctx.Err() != nil
	}
}

// overloaded reports whether err is the server's refusal of new work
// beyond its capacity, RESOURCE_EXHAUSTED with a RetryInfo detail, and
// returns the delay it asks for (at least 1 ms, at most maxOverloadHint).
// The server gives this refusal before acting on the call.
func overloaded(err error) (time.Duration, bool) {
	if status.Code(err) != codes.ResourceExhausted {
		return 0, false
	}
	return retryHint(err)
}

// retryHint returns the delay of err's RetryInfo detail (at least 1 ms, at
// most maxOverloadHint), if it has one. Besides the overload refusal, an
// UNAVAILABLE of a process that is stepping down or a hot standby carries
// one: a short delay, because a new active is about to serve.
func retryHint(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Proto().GetDetails() {
		if d.GetTypeUrl() != retryInfoType {
			continue
		}
		delay, ok := retryDelay(d.GetValue())
		if !ok {
			return 0, false
		}
		return min(max(delay, time.Millisecond), maxOverloadHint), true
	}
	return 0, false
}

// retryInfoType is the type URL of google.rpc.RetryInfo, whose field 1 is
// the google.protobuf.Duration retry_delay. The SDK decodes it by hand: it
// imports only gRPC and protobuf.
const retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// retryDelay decodes a RetryInfo's retry_delay.
func retryDelay(b []byte) (time.Duration, bool) {
	var delay time.Duration
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return 0, false
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		var d durationpb.Duration
		if err := proto.Unmarshal(v, &d); err != nil {
			return 0, false
		}
		delay = d.AsDuration()
	}
	return delay, true
}

// maxOverloadHint caps the server's retry hint.
const maxOverloadHint = 10 * time.Second

// probe asks the health service whether e serves FlowService, within the
// detection bound. A server without a health service counts as serving.
func (c *Client) probe(ctx context.Context, e *endpoint) error {
	return c.conns.guard(ctx, e, func(ctx context.Context) error {
		resp, err := grpc_health_v1.NewHealthClient(e.cc).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "dex.FlowService"})
		switch {
		case status.Code(err) == codes.Unimplemented:
			return nil
		case err != nil:
			return err
		case resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING:
			return status.Errorf(codes.Unavailable, "dex.FlowService is %s", resp.GetStatus())
		}
		return nil
	})
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

// failover moves from address i to the next one whose server is not known
// to be unresponsive (connSet.next), unless another call already moved.
func (c *Client) failover(i int, op string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != i {
		return
	}
	c.cur = c.conns.next(i)
	c.confirmed = false
	if now := time.Now(); now.Sub(c.warned) >= unreachableWarnEvery {
		c.warned = now
		c.log.Warn("dex client: the server did not serve the call; retrying", "op", op, "address", c.conns.addr(i),
			"addresses", c.conns.addrs, "error", err)
	}
	if c.cur != i {
		msg := "server unavailable; trying the next address"
		if isUnresponsive(err) {
			msg = "server unresponsive; trying the next address"
		}
		c.log.Info(msg, "op", op, "address", c.conns.addr(i), "next", c.conns.addr(c.cur), "error", err)
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
