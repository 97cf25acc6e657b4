package dex_test

import (
	"math"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
)

// A worker states in Hello the largest task it accepts, and by default
// accepts whatever the server sends: a task above gRPC's default 4 MiB
// receive limit (a value just under the server's 4 MiB payload limit plus
// the task's envelope, issue 11) arrives and runs. Before, the worker kept
// the default limit and its stream ended on such a task ("received message
// larger than max").
//
// Covers: W1, E28
func TestWorker_ReceivesTasksAboveGRPCsDefaultLimit(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	// The result (a receipt naming the order) is as large as the task: the
	// server accepts it, as the real one does (16 x the payload limit).
	addr := serveLarge(t, ws)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}}, testFlow)
	sess := ws.session(t)
	if got := sess.hello.GetMaxTaskBytes(); got != math.MaxInt32 {
		t.Fatalf("hello.max_task_bytes = %d, want %d (no limit of the worker's own)", got, math.MaxInt32)
	}
	big := Order{ID: strings.Repeat("x", 4<<20), Cents: 1}
	sess.send(task(dexpb.TaskKind(dex.KindExecute), "big", "Ship", jsonValue(t, big)))
	res := sess.result(t)
	if res.GetTaskResult() == nil {
		t.Fatalf("result of a 4 MiB task = %v, want a TaskResult", res)
	}
}

// MaxTaskBytes sets the worker's receive limit and is stated in Hello, so
// that the server sends no larger task.
//
// Covers: W1
func TestWorker_HelloStatesMaxTaskBytes(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	addr := serve(t, ws, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}, MaxTaskBytes: 1 << 20}, testFlow)
	if got := ws.session(t).hello.GetMaxTaskBytes(); got != 1<<20 {
		t.Fatalf("hello.max_task_bytes = %d, want %d", got, 1<<20)
	}
}

// A result larger than the server accepts (Welcome.max_message_bytes)
// would end the stream, and every other result with it: the worker sends
// a TaskFailure of type dex.ResultTooLarge naming the sizes instead, and
// the next result goes out on the same stream.
//
// Covers: W2, E28
func TestWorker_ResultTooLargeForTheServerFailsTheAttempt(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	ws.welcome.MaxMessageBytes = 4096
	addr := serve(t, ws, nil)
	runWorker(t, dex.WorkerOptions{Addresses: []string{addr}}, testFlow)
	sess := ws.session(t)

	sess.send(task(dexpb.TaskKind(dex.KindExecute), "large", "Ship", jsonValue(t, Order{ID: strings.Repeat("y", 8192)})))
	f := sess.result(t).GetTaskFailure()
	if string(f.GetTaskToken()) != "large" || f.GetErrorType() != "dex.ResultTooLarge" ||
		!strings.Contains(f.GetMessage(), "more than the 4096 bytes the server accepts") {
		t.Fatalf("answer to the large result = %v, want a dex.ResultTooLarge failure naming the limit", f)
	}
	sess.send(task(dexpb.TaskKind(dex.KindExecute), "small", "Ship", jsonValue(t, Order{ID: "s"})))
	res := sess.result(t)
	if string(tokenOf(res)) != "small" || res.GetTaskResult() == nil {
		t.Fatalf("answer to the small task = %v, want its TaskResult on the same stream", res)
	}
	select {
	case <-sess.closed:
		t.Fatal("the stream ended")
	default:
	}
}

// A client receives answers above gRPC's default 4 MiB receive limit: a
// flow's output may be as large as the server's payload limit, and its
// answer carries the output and an envelope. Before, WaitForFlow on such a
// flow failed with RESOURCE_EXHAUSTED ("received message larger than
// max").
//
// Covers: E28
func TestClient_ReceivesAnswersAboveGRPCsDefaultLimit(t *testing.T) {
	t.Parallel()
	out := Receipt{OrderID: strings.Repeat("z", 4<<20)}
	fs := &fakeFlowServer{waitForFlow: func(r *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
		return &dexpb.WaitForFlowResponse{Result: &dexpb.FlowResult{
			FlowType: "order", FlowId: r.GetFlowId(), RunId: "run-1", Status: dexpb.FlowStatus(dex.StatusCompleted),
			Outputs: []*dexpb.StepOutput{{StepType: "Ship", StepExecutionId: "Ship-1", Output: jsonValue(t, out)}},
		}}, nil
	}}
	c := dial(t, serve(t, nil, fs))
	res, err := c.WaitForFlow(testCtx(t), "order-42")
	if err != nil {
		t.Fatalf("WaitForFlow of a flow with a 4 MiB output: %v", err)
	}
	var got Receipt
	if err := res.Outputs[0].Value.Decode(&got); err != nil || len(got.OrderID) != 4<<20 {
		t.Fatalf("output of %d bytes (%v), want %d", len(got.OrderID), err, 4<<20)
	}
}

// serveLarge runs ws like serve, with a receive limit of 64 MiB.
func serveLarge(t *testing.T, ws dexpb.WorkerTaskServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	dexpb.RegisterWorkerTaskServiceServer(srv, ws)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}
