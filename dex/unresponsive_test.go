package dex_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// unresponsive is the detection bound of these tests.
const unresponsive = 400 * time.Millisecond

// freezer makes a server's connections stop answering, as a process
// stopped with SIGSTOP (or cut off by the network) looks to its clients:
// the kernel still accepts connections and data, but nothing is read or
// written.
type freezer struct {
	mu     sync.Mutex
	frozen chan struct{} // nil while thawed; closed by thaw
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen == nil {
		f.frozen = make(chan struct{})
	}
}

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen != nil {
		close(f.frozen)
		f.frozen = nil
	}
}

// wait blocks while frozen, until thawed or done closes.
func (f *freezer) wait(done <-chan struct{}) {
	f.mu.Lock()
	ch := f.frozen
	f.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-done:
	}
}

type freezableListener struct {
	net.Listener
	f *freezer
}

func (l *freezableListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &freezableConn{Conn: c, f: l.f, closed: make(chan struct{})}, nil
}

type freezableConn struct {
	net.Conn
	f      *freezer
	once   sync.Once
	closed chan struct{}
}

func (c *freezableConn) Read(b []byte) (int, error) {
	c.f.wait(c.closed)
	n, err := c.Conn.Read(b)
	c.f.wait(c.closed) // what arrived while frozen is read after the thaw
	return n, err
}

func (c *freezableConn) Write(b []byte) (int, error) {
	c.f.wait(c.closed)
	return c.Conn.Write(b)
}

func (c *freezableConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// serveFreezable is serve with a freezer; the server is thawed and stopped
// when the test ends.
func serveFreezable(t *testing.T, ws dexpb.WorkerTaskServiceServer, fs dexpb.FlowServiceServer) (string, *freezer) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{}
	srv := grpc.NewServer()
	if ws != nil {
		dexpb.RegisterWorkerTaskServiceServer(srv, ws)
	}
	if fs != nil {
		dexpb.RegisterFlowServiceServer(srv, fs)
	}
	go func() { _ = srv.Serve(&freezableListener{Listener: lis, f: f}) }()
	t.Cleanup(func() {
		f.thaw()
		srv.Stop()
	})
	return lis.Addr().String(), f
}

func dialUnresponsive(t *testing.T, opts dex.ClientOptions) *dex.Client {
	t.Helper()
	opts.RetryBackoff = dex.Backoff{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond}
	opts.UnresponsiveTimeout = unresponsive
	opts.Logger = quietLogger()
	c, err := dex.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func summaryServer(runID string) *fakeFlowServer {
	return &fakeFlowServer{getFlowSummary: func(r *dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error) {
		return &dexpb.GetFlowSummaryResponse{Summary: &dexpb.FlowSummary{FlowId: r.GetFlowId(), RunId: runID}}, nil
	}}
}

// A read sent to a server that stopped answering (frozen, partitioned) is
// abandoned within UnresponsiveTimeout and answered by the next address;
// later calls go there directly, and while the frozen server stays silent
// the client does not go back to it when the other refuses.
//
// Covers: P5
func TestClient_LeavesAnUnresponsiveServerWithinTheBound(t *testing.T) {
	t.Parallel()
	frozenAddr, f := serveFreezable(t, nil, summaryServer("from-a"))
	other := summaryServer("from-b")
	c := dialUnresponsive(t, dex.ClientOptions{Addresses: []string{frozenAddr, serve(t, nil, other)}})
	ctx := testCtx(t)
	if s, err := c.GetFlowSummary(ctx, "f"); err != nil || s.RunID != "from-a" {
		t.Fatalf("before the freeze: %+v, %v", s, err)
	}
	f.freeze()
	began := time.Now()
	s, err := c.GetFlowSummary(ctx, "f")
	took := time.Since(began)
	if err != nil || s.RunID != "from-b" {
		t.Fatalf("after the freeze: %+v, %v", s, err)
	}
	if took > unresponsive+300*time.Millisecond {
		t.Errorf("the call took %v, want within the bound %v (plus a margin)", took, unresponsive)
	}
	began = time.Now()
	if s, err := c.GetFlowSummary(ctx, "f"); err != nil || s.RunID != "from-b" || time.Since(began) > unresponsive/2 {
		t.Errorf("the next call: %+v, %v after %v; want the other address at once", s, err, time.Since(began))
	}
}

// A call that changes state and has no request ID (StopFlow, SkipTimer,
// InvokeRPC) is never sent twice: when its server stops answering after
// it was sent, it returns an OutcomeUnknownError within the bound, naming
// the call and the address, that still matches ErrUnavailable.
//
// Covers: P5, E23
func TestClient_OnceCallToAnUnresponsiveServerHasAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	stopped := make(chan struct{}, 1)
	frozen := &fakeFlowServer{}
	frozenAddr, f := serveFreezable(t, nil, frozen)
	other := &fakeFlowServer{stopFlow: func(*dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error) {
		return &dexpb.StopFlowResponse{Status: dexpb.FlowStatus(dex.StatusCanceled)}, nil
	}}
	c := dialUnresponsive(t, dex.ClientOptions{Addresses: []string{frozenAddr, serve(t, nil, other)}})
	ctx := testCtx(t)
	frozen.stopFlow = func(*dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error) {
		stopped <- struct{}{}
		f.freeze() // the server received the call, then froze
		return &dexpb.StopFlowResponse{Status: dexpb.FlowStatus(dex.StatusCanceled)}, nil
	}
	began := time.Now()
	_, err := c.StopFlow(ctx, "order-42", dex.StopCancel, "")
	took := time.Since(began)
	<-stopped
	var ou *dex.OutcomeUnknownError
	if !errors.As(err, &ou) || !errors.Is(err, dex.ErrOutcomeUnknown) || !errors.Is(err, dex.ErrUnavailable) ||
		status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want an OutcomeUnknownError matching ErrOutcomeUnknown and ErrUnavailable", err)
	}
	if ou.Op != "StopFlow" || ou.Address != frozenAddr || ou.RequestID != "" {
		t.Errorf("error = %+v", ou)
	}
	for _, want := range []string{"dex: StopFlow: outcome unknown", frozenAddr, "unresponsive", "read the flow's state before sending it again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if took > unresponsive+300*time.Millisecond {
		t.Errorf("StopFlow took %v, want within the bound %v (plus a margin)", took, unresponsive)
	}
	if n := other.count("StopFlow"); n != 0 {
		t.Errorf("StopFlow was sent again to the other address (%d times)", n)
	}
}

// StartFlow and Publish carry a request ID and are retried with it on the
// next address when a server stops answering; when no address answers
// before RetryTimeout, the error names the request ID to retry with.
//
// Covers: P5, E3, E16
func TestClient_RequestIDCallsRetryElsewhereOrNameTheirRequestID(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ids []string
	record := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, id)
	}
	frozenAddr, f := serveFreezable(t, nil, &fakeFlowServer{})
	f.freeze()
	other := &fakeFlowServer{startFlow: func(r *dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
		record(r.GetRequestId())
		return &dexpb.StartFlowResponse{RunId: "run-1"}, nil
	}, publishToChannel: func(r *dexpb.PublishToChannelRequest) (*dexpb.PublishToChannelResponse, error) {
		record(r.GetRequestId())
		return &dexpb.PublishToChannelResponse{}, nil
	}}
	c := dialUnresponsive(t, dex.ClientOptions{Addresses: []string{frozenAddr, serve(t, nil, other)}})
	ctx := testCtx(t)
	if run, err := c.StartFlow(ctx, testFlow, "order-42", Order{ID: "42"}, dex.WithRequestID("start-1")); err != nil || run.RunID != "run-1" {
		t.Fatalf("StartFlow = %+v, %v", run, err)
	}
	if err := c.Publish(ctx, "order-42", []dex.Message{Approve.Message(true)}, dex.WithRequestID("pub-1")); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != "start-1" || ids[1] != "pub-1" {
		t.Errorf("request IDs on the other address = %v", ids)
	}

	// Nothing answers: the frozen server and a standby.
	onlyFrozen := dialUnresponsive(t, dex.ClientOptions{Addresses: []string{frozenAddr, serve(t, nil, &fakeFlowServer{})},
		RetryTimeout: 2 * unresponsive})
	_, err := onlyFrozen.StartFlow(ctx, testFlow, "order-43", Order{ID: "43"}, dex.WithRequestID("start-2"))
	var ou *dex.OutcomeUnknownError
	if !errors.As(err, &ou) || ou.RequestID != "start-2" || ou.Op != "StartFlow" ||
		!strings.Contains(err.Error(), `retry with request ID "start-2" (dex.WithRequestID)`) {
		t.Errorf("StartFlow err = %v, want an OutcomeUnknownError naming request ID start-2", err)
	}
	err = onlyFrozen.Publish(ctx, "order-43", []dex.Message{Approve.Message(true)}, dex.WithRequestID("pub-2"))
	if !errors.As(err, &ou) || ou.RequestID != "pub-2" || !strings.Contains(err.Error(), `request ID "pub-2" (dex.WithRequestID)`) {
		t.Errorf("Publish err = %v, want an OutcomeUnknownError naming request ID pub-2", err)
	}
	// A call whose context ends keeps the context's error in the chain; once
	// it was sent, the error names the generated request ID. (On a loaded
	// machine the context can end before anything was sent: the outcome is
	// then known, nothing happened, and a plain context error is right.)
	short, cancel := context.WithTimeout(ctx, unresponsive/4)
	defer cancel()
	_, err = onlyFrozen.StartFlow(short, testFlow, "order-44", Order{ID: "44"})
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ou) && ou.RequestID == "" {
		t.Errorf("StartFlow with a short context: err = %v, want the context's error (in an OutcomeUnknownError with the generated request ID, if it was sent)", err)
	}
}

// A server that is alive but slow to answer (a long poll, a slow write)
// answers the health checks, so the call waits on, well past the bound,
// and is sent once.
//
// Covers: E25, P5
func TestClient_LongCallToALiveServerIsNotCutOff(t *testing.T) {
	t.Parallel()
	fs := &fakeFlowServer{waitForFlow: func(r *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
		time.Sleep(4 * unresponsive)
		return &dexpb.WaitForFlowResponse{Result: &dexpb.FlowResult{FlowId: r.GetFlowId(), Status: dexpb.FlowStatus(dex.StatusCompleted)}}, nil
	}}
	other := &fakeFlowServer{}
	c := dialUnresponsive(t, dex.ClientOptions{Addresses: []string{serve(t, nil, fs), serve(t, nil, other)}})
	res, err := c.WaitForFlow(testCtx(t), "f")
	if err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("WaitForFlow = %+v, %v", res, err)
	}
	if fs.count("WaitForFlow") != 1 || other.count("WaitForFlow") != 0 {
		t.Errorf("WaitForFlow sent %d times, %d times to the other address; want once", fs.count("WaitForFlow"), other.count("WaitForFlow"))
	}
}

// A worker whose server stops answering moves to the next address within
// UnresponsiveTimeout, although the server's pings (every 15 s by default)
// would take far longer to be missed.
//
// Covers: P5, W1
func TestWorker_LeavesAnUnresponsiveServerWithinTheBound(t *testing.T) {
	t.Parallel()
	a, b := newFakeWorkerServer(), newFakeWorkerServer()
	addrA, f := serveFreezable(t, a, nil)
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{addrA, serve(t, b, nil)}, Logger: quietLogger(),
		ReconnectBackoff:    dex.Backoff{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond},
		UnresponsiveTimeout: unresponsive, DrainTimeout: time.Second}, testFlow)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	a.session(t)
	f.freeze()
	began := time.Now()
	sb := b.session(t)
	if took := time.Since(began); took > unresponsive+300*time.Millisecond {
		t.Errorf("the worker reached the next address %v after the freeze, want within the bound %v (plus a margin)", took, unresponsive)
	}
	sb.send(task(dexpb.TaskKind(dex.KindExecute), "t-1", "Ship", jsonValue(t, Order{ID: "1"})))
	if r := sb.result(t); r.GetTaskResult() == nil {
		t.Errorf("result on the next address = %v", r)
	}
}

// A server that restarts in a few hundred milliseconds (dex-server-zd dev
// after a crash) is answering again through the client within about
// 0.5 s: the default Dialer's connect backoff starts at 50 ms (gRPC's
// default waits 1 s before it reconnects) and the client's retries are
// at most 500 ms apart.
//
// Covers: P5
func TestClient_ReconnectsSoonAfterTheServerRestarts(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	start := func(lis net.Listener) *grpc.Server {
		srv := grpc.NewServer()
		dexpb.RegisterFlowServiceServer(srv, summaryServer("run-1"))
		go func() { _ = srv.Serve(lis) }()
		return srv
	}
	srv := start(lis)
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	if _, err := c.GetFlowSummary(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	answered := make(chan error, 1)
	go func() {
		_, err := c.GetFlowSummary(ctx, "f")
		answered <- err
	}()
	time.Sleep(300 * time.Millisecond) // the restart
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv = start(lis)
	defer srv.Stop()
	back := time.Now()
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	lag := time.Since(back)
	t.Logf("the client answered %v after the server was back", lag.Round(time.Millisecond))
	if lag > 450*time.Millisecond {
		t.Errorf("the client answered %v after the server was back, want within about 0.5 s of the outage", lag)
	}
}

// A worker whose server restarts in a few hundred milliseconds is
// connected again within about 0.5 s: its reconnection waits for gRPC to
// reconnect (a 50 ms connect backoff) rather than a whole reconnect
// backoff.
//
// Covers: P5, W1
func TestWorker_ReconnectsSoonAfterTheServerRestarts(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	start := func(lis net.Listener, ws *fakeWorkerServer) *grpc.Server {
		srv := grpc.NewServer()
		dexpb.RegisterWorkerTaskServiceServer(srv, ws)
		go func() { _ = srv.Serve(lis) }()
		return srv
	}
	first := newFakeWorkerServer()
	srv := start(lis, first)
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{addr}, Logger: quietLogger(), DrainTimeout: time.Second}, testFlow)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	first.session(t)
	srv.Stop()
	time.Sleep(300 * time.Millisecond) // the restart
	if lis, err = net.Listen("tcp", addr); err != nil {
		t.Fatal(err)
	}
	second := newFakeWorkerServer()
	srv = start(lis, second)
	defer srv.Stop()
	back := time.Now()
	second.session(t)
	lag := time.Since(back)
	t.Logf("the worker connected %v after the server was back", lag.Round(time.Millisecond))
	if lag > 450*time.Millisecond {
		t.Errorf("the worker connected %v after the server was back, want within about 0.5 s of the outage", lag)
	}
}

// The server enforces the call's deadline (gRPC sends it as grpc-timeout)
// and answers DEADLINE_EXCEEDED a moment before the client's own timer
// fires, as a loaded machine makes it do: the request may have been
// acted on, so the caller gets the context's error and, for a request
// with an ID, an OutcomeUnknownError naming it, as when its context ends
// first. A DEADLINE_EXCEEDED far from the context's deadline (the
// server's own long-poll bound) stays the server's answer.
//
// Covers: P5, E3
func TestClient_ADeadlineTheServerEnforcesFirstIsTheContexts(t *testing.T) {
	t.Parallel()
	fs := &fakeFlowServer{startFlow: func(*dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
		return nil, status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	}}
	c := dialUnresponsive(t, dex.ClientOptions{Addresses: []string{serve(t, nil, fs)}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.StartFlow(ctx, testFlow, "order-45", Order{ID: "45"}, dex.WithRequestID("start-45"))
	var ou *dex.OutcomeUnknownError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ou) || ou.RequestID != "start-45" {
		t.Errorf("StartFlow err = %v, want the context's error in an OutcomeUnknownError naming start-45", err)
	}

	_, err = c.StartFlow(context.Background(), testFlow, "order-46", Order{ID: "46"}, dex.WithRequestID("start-46"))
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ou) || !strings.Contains(err.Error(), "DeadlineExceeded") {
		t.Errorf("StartFlow without a deadline: err = %v, want the server's DEADLINE_EXCEEDED as it is", err)
	}
}
