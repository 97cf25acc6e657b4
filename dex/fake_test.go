package dex_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fakeWorkerServer is an in-process WorkerTaskService: it accepts streams,
// hands each to the test as a fakeSession, and acknowledges every result.
type fakeWorkerServer struct {
	dexpb.UnimplementedWorkerTaskServiceServer
	// unavailable makes every new stream fail with UNAVAILABLE, as a
	// standby does.
	unavailable atomic.Bool
	// refusals counts the streams refused so.
	refusals atomic.Int32
	welcome  *dexpb.Welcome
	sessions chan *fakeSession
}

func newFakeWorkerServer() *fakeWorkerServer {
	return &fakeWorkerServer{
		welcome:  &dexpb.Welcome{NodeId: "node-1", NodeEpoch: 7, SessionId: "s", HeartbeatInterval: durationpb.New(time.Hour)},
		sessions: make(chan *fakeSession, 16),
	}
}

// fakeSession is one accepted stream.
type fakeSession struct {
	hello      *dexpb.Hello
	toWorker   chan *dexpb.PollWorkerTaskResponse
	end        chan error
	results    chan *dexpb.PollWorkerTaskRequest // TaskResults and TaskFailures
	heartbeats chan *dexpb.Heartbeat
	pongs      chan *dexpb.Pong
	closed     chan struct{} // the worker half-closed or the stream ended
	noAck      atomic.Bool
}

func (s *fakeWorkerServer) PollWorkerTask(stream grpc.BidiStreamingServer[dexpb.PollWorkerTaskRequest, dexpb.PollWorkerTaskResponse]) error {
	if s.unavailable.Load() {
		s.refusals.Add(1)
		return status.Error(codes.Unavailable, "standby")
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.GetHello() == nil {
		return status.Error(codes.InvalidArgument, "hello: first message must be a Hello")
	}
	if err := stream.Send(&dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_Welcome{Welcome: s.welcome}}); err != nil {
		return err
	}
	sess := &fakeSession{
		hello:      first.GetHello(),
		toWorker:   make(chan *dexpb.PollWorkerTaskResponse, 16),
		end:        make(chan error, 1),
		results:    make(chan *dexpb.PollWorkerTaskRequest, 64),
		heartbeats: make(chan *dexpb.Heartbeat, 64),
		pongs:      make(chan *dexpb.Pong, 16),
		closed:     make(chan struct{}),
	}
	s.sessions <- sess
	acks := make(chan *dexpb.PollWorkerTaskResponse, 64)
	go func() {
		defer close(sess.closed)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			switch msg := m.GetMessage().(type) {
			case *dexpb.PollWorkerTaskRequest_TaskResult, *dexpb.PollWorkerTaskRequest_TaskFailure:
				sess.results <- m
				if !sess.noAck.Load() {
					acks <- ack(tokenOf(m))
				}
			case *dexpb.PollWorkerTaskRequest_Heartbeat:
				sess.heartbeats <- msg.Heartbeat
			case *dexpb.PollWorkerTaskRequest_Pong:
				sess.pongs <- msg.Pong
			}
		}
	}()
	for {
		select {
		case m := <-sess.toWorker:
			if err := stream.Send(m); err != nil {
				return err
			}
		case m := <-acks:
			if err := stream.Send(m); err != nil {
				return err
			}
		case err := <-sess.end:
			return err
		case <-sess.closed:
			return nil
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

func ack(token []byte) *dexpb.PollWorkerTaskResponse {
	return &dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_TaskAck{TaskAck: &dexpb.TaskAck{
		TaskToken: token, Status: dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED,
	}}}
}

func tokenOf(m *dexpb.PollWorkerTaskRequest) []byte {
	if r := m.GetTaskResult(); r != nil {
		return r.GetTaskToken()
	}
	return m.GetTaskFailure().GetTaskToken()
}

// send hands the worker a task.
func (s *fakeSession) send(t *dexpb.Task) {
	s.toWorker <- &dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_Task{Task: t}}
}

// result waits for the next TaskResult or TaskFailure.
func (s *fakeSession) result(t *testing.T) *dexpb.PollWorkerTaskRequest {
	t.Helper()
	select {
	case m := <-s.results:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no task result within 10s")
		return nil
	}
}

// session waits for the next accepted stream.
func (s *fakeWorkerServer) session(t *testing.T) *fakeSession {
	t.Helper()
	select {
	case sess := <-s.sessions:
		return sess
	case <-time.After(10 * time.Second):
		t.Fatal("no worker connected within 10s")
		return nil
	}
}

// fakeFlowServer is an in-process FlowService whose methods the test sets.
type fakeFlowServer struct {
	dexpb.UnimplementedFlowServiceServer
	mu    sync.Mutex
	calls map[string]int

	startFlow        func(*dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error)
	publishToChannel func(*dexpb.PublishToChannelRequest) (*dexpb.PublishToChannelResponse, error)
	getAttributes    func(*dexpb.GetAttributesRequest) (*dexpb.GetAttributesResponse, error)
	setAttributes    func(*dexpb.SetAttributesRequest) (*dexpb.SetAttributesResponse, error)
	invokeRPC        func(*dexpb.InvokeRPCRequest) (*dexpb.InvokeRPCResponse, error)
	waitForFlow      func(*dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error)
	skipTimer        func(*dexpb.SkipTimerRequest) (*dexpb.SkipTimerResponse, error)
	stopFlow         func(*dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error)
	listFlows        func(*dexpb.ListFlowsRequest) (*dexpb.ListFlowsResponse, error)
	getFlowSummary   func(*dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error)
	resetFlow        func(*dexpb.ResetFlowRequest) (*dexpb.ResetFlowResponse, error)
	continueAsNew    func(*dexpb.ContinueAsNewRequest) (*dexpb.ContinueAsNewResponse, error)
}

func (f *fakeFlowServer) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func call[Req, Resp any](f *fakeFlowServer, name string, fn func(Req) (Resp, error), req Req) (Resp, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[name]++
	f.mu.Unlock()
	if fn == nil {
		var zero Resp
		return zero, status.Error(codes.Unavailable, "standby")
	}
	return fn(req)
}

func (f *fakeFlowServer) StartFlow(_ context.Context, r *dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
	return call(f, "StartFlow", f.startFlow, r)
}

func (f *fakeFlowServer) ResetFlow(_ context.Context, r *dexpb.ResetFlowRequest) (*dexpb.ResetFlowResponse, error) {
	return call(f, "ResetFlow", f.resetFlow, r)
}

func (f *fakeFlowServer) ContinueAsNew(_ context.Context, r *dexpb.ContinueAsNewRequest) (*dexpb.ContinueAsNewResponse, error) {
	return call(f, "ContinueAsNew", f.continueAsNew, r)
}

func (f *fakeFlowServer) PublishToChannel(_ context.Context, r *dexpb.PublishToChannelRequest) (*dexpb.PublishToChannelResponse, error) {
	return call(f, "PublishToChannel", f.publishToChannel, r)
}

func (f *fakeFlowServer) GetAttributes(_ context.Context, r *dexpb.GetAttributesRequest) (*dexpb.GetAttributesResponse, error) {
	return call(f, "GetAttributes", f.getAttributes, r)
}

func (f *fakeFlowServer) SetAttributes(_ context.Context, r *dexpb.SetAttributesRequest) (*dexpb.SetAttributesResponse, error) {
	return call(f, "SetAttributes", f.setAttributes, r)
}

func (f *fakeFlowServer) InvokeRPC(_ context.Context, r *dexpb.InvokeRPCRequest) (*dexpb.InvokeRPCResponse, error) {
	return call(f, "InvokeRPC", f.invokeRPC, r)
}

func (f *fakeFlowServer) WaitForFlow(_ context.Context, r *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
	return call(f, "WaitForFlow", f.waitForFlow, r)
}

func (f *fakeFlowServer) SkipTimer(_ context.Context, r *dexpb.SkipTimerRequest) (*dexpb.SkipTimerResponse, error) {
	return call(f, "SkipTimer", f.skipTimer, r)
}

func (f *fakeFlowServer) StopFlow(_ context.Context, r *dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error) {
	return call(f, "StopFlow", f.stopFlow, r)
}

func (f *fakeFlowServer) GetFlowSummary(_ context.Context, r *dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error) {
	return call(f, "GetFlowSummary", f.getFlowSummary, r)
}

func (f *fakeFlowServer) ListFlows(_ context.Context, r *dexpb.ListFlowsRequest) (*dexpb.ListFlowsResponse, error) {
	return call(f, "ListFlows", f.listFlows, r)
}

// serve runs the given services on a 127.0.0.1:0 listener until the test
// ends and returns the address.
func serve(t *testing.T, ws dexpb.WorkerTaskServiceServer, fs dexpb.FlowServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	if ws != nil {
		dexpb.RegisterWorkerTaskServiceServer(srv, ws)
	}
	if fs != nil {
		dexpb.RegisterFlowServiceServer(srv, fs)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}
