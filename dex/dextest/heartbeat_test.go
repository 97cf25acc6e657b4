package dextest_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dextest"
)

// crunchHeartbeat is Crunch's heartbeat timeout: short, so the test is
// quick; its attempt timeout is 5 minutes.
const crunchHeartbeat = 600 * time.Millisecond

var crunchStarted = make(chan struct{}, 1)

// Crunch reports progress 41 in its first attempt, then hangs (its worker
// is cut off); the next attempt resumes from the details.
type Crunch struct{ dex.Step[string] }

func (Crunch) Options() dex.StepOptions {
	return dex.StepOptions{Execute: dex.MethodOptions{
		AttemptTimeout:   5 * time.Minute,
		HeartbeatTimeout: crunchHeartbeat,
		Retry:            &dex.RetryPolicy{InitialInterval: 50 * time.Millisecond},
	}}
}

func (Crunch) Execute(ctx dex.Context, _ string) (dex.Decision, error) {
	if ctx.Info().Attempt == 1 {
		ctx.Heartbeat(41)
		crunchStarted <- struct{}{}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	done, ok, err := dex.HeartbeatDetails[int](ctx)
	if err != nil || !ok {
		return nil, dex.NonRetryable(errors.New("no heartbeat details from attempt 1"))
	}
	return dex.GracefulComplete(done + 1), nil
}

var crunchFlow = dex.NewFlow("crunch").Start(Crunch{})

// partition cuts a worker's connections off: once frozen, what the worker
// writes is dropped and it reads nothing more, as behind a network
// partition, and new connections fail.
type partition struct {
	mu     sync.Mutex
	frozen bool
}

func (p *partition) isFrozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

func (p *partition) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

func (p *partition) dial(ctx context.Context, addr string) (net.Conn, error) {
	if p.isFrozen() {
		return nil, errors.New("partitioned")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &partConn{Conn: c, p: p, closed: make(chan struct{})}, nil
}

type partConn struct {
	net.Conn
	p      *partition
	closed chan struct{}
	once   sync.Once
}

func (c *partConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.p.isFrozen() {
		<-c.closed
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *partConn) Write(b []byte) (int, error) {
	if c.p.isFrozen() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *partConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// runWorker runs a worker for flow until the test ends.
func runWorker(t *testing.T, opts dex.WorkerOptions, flow *dex.Flow) {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.DrainTimeout = 100 * time.Millisecond
	w, err := dex.NewWorker(opts, flow)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// A worker cut off mid-attempt stops heartbeating: the attempt fails with
// a HEARTBEAT timeout after Crunch's 600 ms heartbeat timeout (its attempt
// timeout is 5 minutes) and is retried on another worker, which resumes
// from the details the first attempt reported.
//
// Covers: E38
func TestHeartbeatTimeout_RetriesACutOffWorker(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, holdFlow) // its worker does not serve crunch
	ctx, c := ctxT(t), env.Client()
	part := &partition{}
	runWorker(t, dex.WorkerOptions{Addresses: []string{env.Addr()}, MaxConcurrentTasks: 1,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(part.dial)}}, crunchFlow)
	if _, err := c.StartFlow(ctx, crunchFlow, "crunch-1", "data"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-crunchStarted:
	case <-ctx.Done():
		t.Fatal("attempt 1 did not start")
	}
	// Run for three heartbeat timeouts before the partition: heartbeats
	// (every 200 ms, a third of the timeout) keep the attempt alive and
	// carry the details.
	time.Sleep(3 * crunchHeartbeat)
	part.freeze()
	cut := time.Now()
	runWorker(t, dex.WorkerOptions{Addresses: []string{env.Addr()}}, crunchFlow)
	res, err := c.WaitForFlow(ctx, "crunch-1")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := dex.Output[int](res); res.Status != dex.StatusCompleted || err != nil || out != 42 {
		t.Fatalf("result %+v (error %v), output %d (%v); want COMPLETED with 42", res, res.Error, out, err)
	}
	d := time.Since(cut)
	if d > 10*time.Second {
		t.Fatalf("the retry took %v after the cut", d)
	}
	t.Logf("the flow completed on the other worker %v after the cut", d)
	fails := executeFailures(history(ctx, t, c, "crunch-1"), "Crunch")
	if len(fails) != 1 || fails[0].Failure == nil || fails[0].Failure.Kind != dex.FailureHeartbeatTimeout {
		t.Fatalf("failed attempts %v; want one HEARTBEAT timeout", fails)
	}
	// Heartbeats kept attempt 1 alive until the cut, beyond its timeout.
	if at := fails[0].Failure.Time; at.Before(cut) {
		t.Fatalf("attempt 1 failed at %v, before the cut at %v", at, cut)
	}
}
