package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/node"
)

// testNode is a dev node running in this process on a temporary directory.
type testNode struct {
	addr    string
	cancel  context.CancelFunc
	abandon chan struct{}
	done    chan error
	conn    *grpc.ClientConn
	flows   dexpb.FlowServiceClient
	metrics *metrics.Metrics
}

// startNode runs a dev node on dir until the test ends (or stop/crash).
func startNode(t *testing.T, dir string, edit func(*config.Config)) *testNode {
	t.Helper()
	cfg, err := config.Parse(nil, config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Lifecycle.AttemptDrainTimeout = 2 * time.Second
	if edit != nil {
		edit(cfg)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &testNode{cancel: cancel, abandon: make(chan struct{}), done: make(chan error, 1), metrics: metrics.New()}
	ready := make(chan net.Addr, 1)
	go func() {
		n.done <- node.RunLocal(ctx, node.LocalOptions{Mode: config.ModeDev, Config: cfg, DataDir: dir, Listener: lis,
			Ready: func(a net.Addr) { ready <- a }, Abandon: n.abandon, Metrics: n.metrics})
	}()
	select {
	case a := <-ready:
		n.addr = a.String()
	case err := <-n.done:
		cancel()
		t.Fatalf("node did not start: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("node did not start within 20s")
	}
	n.conn, err = grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	n.flows = dexpb.NewFlowServiceClient(n.conn)
	t.Cleanup(func() {
		_ = n.conn.Close()
		n.cancel()
		select {
		case <-n.done:
		case <-time.After(20 * time.Second):
			t.Error("node did not stop within 20s")
		}
	})
	return n
}

// stop shuts the node down gracefully and returns RunLocal's result.
func (n *testNode) stop(t *testing.T) error {
	t.Helper()
	_ = n.conn.Close()
	n.cancel()
	select {
	case err := <-n.done:
		n.done <- err // for the cleanup
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("node did not stop within 20s")
		return nil
	}
}

// crash abandons the node like a SIGKILL: nothing is drained, flushed or
// released.
func (n *testNode) crash(t *testing.T) {
	t.Helper()
	_ = n.conn.Close()
	close(n.abandon)
	select {
	case err := <-n.done:
		if !errors.Is(err, node.ErrAbandoned) {
			t.Fatalf("crash: RunLocal returned %v", err)
		}
		n.done <- err
	case <-time.After(20 * time.Second):
		t.Fatal("node did not stop within 20s")
	}
}

func jsonValue(v any) *dexpb.EncodedValue {
	b, _ := json.Marshal(v)
	return &dexpb.EncodedValue{Encoding: "json", Type: "test", Data: b}
}

// orderHello declares flow type "order": Start (no WaitFor) moves to Wait
// (with a WaitFor); RPC "bump"; attribute "count"; channel "approvals".
func orderHello(id string, maxTasks uint32) *dexpb.Hello {
	return &dexpb.Hello{WorkerId: id, MaxConcurrentTasks: maxTasks, SdkVersion: "test/0", FlowTypes: []*dexpb.FlowTypeDeclaration{{
		FlowType: "order",
		Steps: []*dexpb.StepDeclaration{
			{StepType: "Start"},
			{StepType: "Wait", HasWaitFor: true, Options: &dexpb.StepOptions{Execute: &dexpb.StepMethodOptions{
				RetryPolicy: &dexpb.RetryPolicy{InitialInterval: durationpb.New(100 * time.Millisecond)}}}},
		},
		RpcNames: []string{"bump"}, AttributeNames: []string{"count", "note"}, ChannelNames: []string{"approvals"},
	}}}
}

// testWorker is a raw dexpb worker.
type testWorker struct {
	t       *testing.T
	stream  dexpb.WorkerTaskService_PollWorkerTaskClient
	cancel  context.CancelFunc
	welcome *dexpb.Welcome
	tasks   chan *dexpb.Task
	acks    chan *dexpb.TaskAck
	drains  chan *dexpb.Drain
	ended   chan error
}

func connectWorker(t *testing.T, conn *grpc.ClientConn, hello *dexpb.Hello) *testWorker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := dexpb.NewWorkerTaskServiceClient(conn).PollWorkerTask(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := stream.Send(&dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_Hello{Hello: hello}}); err != nil {
		cancel()
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		t.Fatalf("worker hello: %v", err)
	}
	w := &testWorker{t: t, stream: stream, cancel: cancel, welcome: first.GetWelcome(),
		tasks: make(chan *dexpb.Task, 100), acks: make(chan *dexpb.TaskAck, 100), drains: make(chan *dexpb.Drain, 10),
		ended: make(chan error, 1)}
	if w.welcome == nil {
		t.Fatalf("first message is not a Welcome: %v", first)
	}
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				w.ended <- err
				return
			}
			switch m := m.GetMessage().(type) {
			case *dexpb.PollWorkerTaskResponse_Task:
				w.tasks <- m.Task
			case *dexpb.PollWorkerTaskResponse_TaskAck:
				w.acks <- m.TaskAck
			case *dexpb.PollWorkerTaskResponse_Drain:
				w.drains <- m.Drain
			case *dexpb.PollWorkerTaskResponse_Ping:
				_ = stream.Send(&dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_Pong{Pong: &dexpb.Pong{Nonce: m.Ping.GetNonce()}}})
			}
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *testWorker) close() { w.cancel() }

// next returns the next task.
func (w *testWorker) next() *dexpb.Task {
	w.t.Helper()
	select {
	case task := <-w.tasks:
		return task
	case err := <-w.ended:
		w.t.Fatalf("worker stream ended: %v", err)
	case <-time.After(15 * time.Second):
		w.t.Fatal("no task within 15s")
	}
	return nil
}

func (w *testWorker) ack() *dexpb.TaskAck {
	w.t.Helper()
	select {
	case a := <-w.acks:
		return a
	case <-time.After(15 * time.Second):
		w.t.Fatal("no ack within 15s")
	}
	return nil
}

// result sends a result and returns its ack.
func (w *testWorker) result(task *dexpb.Task, r *dexpb.TaskResult) *dexpb.TaskAck {
	w.t.Helper()
	r.TaskToken = task.GetTaskToken()
	if err := w.stream.Send(&dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_TaskResult{TaskResult: r}}); err != nil {
		w.t.Fatal(err)
	}
	return w.ack()
}

// fail sends a failure and returns its ack.
func (w *testWorker) fail(task *dexpb.Task, f *dexpb.TaskFailure) *dexpb.TaskAck {
	w.t.Helper()
	f.TaskToken = task.GetTaskToken()
	if err := w.stream.Send(&dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_TaskFailure{TaskFailure: f}}); err != nil {
		w.t.Fatal(err)
	}
	return w.ack()
}

func waitResult(w *dexpb.Wait) *dexpb.TaskResult {
	return &dexpb.TaskResult{Result: &dexpb.TaskResult_WaitFor{WaitFor: &dexpb.WaitForResult{Wait: w}}}
}

func decide(d *dexpb.StepDecision, writes *dexpb.StagedWrites) *dexpb.TaskResult {
	return &dexpb.TaskResult{Result: &dexpb.TaskResult_Execute{Execute: &dexpb.ExecuteResult{Decision: d}}, Writes: writes}
}

func moveTo(step string, input *dexpb.EncodedValue) *dexpb.StepDecision {
	return &dexpb.StepDecision{Decision: &dexpb.StepDecision_Movements{Movements: &dexpb.Movements{
		Movements: []*dexpb.Movement{{StepType: step, Input: input}}}}}
}

func complete(out *dexpb.EncodedValue) *dexpb.StepDecision {
	return &dexpb.StepDecision{Decision: &dexpb.StepDecision_GracefulComplete{GracefulComplete: &dexpb.GracefulComplete{Output: out}}}
}

func timerCond(id string, d time.Duration) *dexpb.WaitCondition {
	return &dexpb.WaitCondition{Id: id, Condition: &dexpb.WaitCondition_Timer{Timer: &dexpb.TimerCondition{Duration: durationpb.New(d)}}}
}

func channelCond(id, channel string) *dexpb.WaitCondition {
	return &dexpb.WaitCondition{Id: id, Condition: &dexpb.WaitCondition_Channel{Channel: &dexpb.ChannelCondition{
		Channel: channel, Bound: dexpb.ChannelBound_CHANNEL_BOUND_FOR_ONE}}}
}

// expectTask checks a task's kind and step execution.
func expectTask(t *testing.T, task *dexpb.Task, kind dexpb.TaskKind, stepExec string) {
	t.Helper()
	if task.GetKind() != kind || task.GetStepExecutionId() != stepExec {
		t.Fatalf("task = %s %s (attempt %d), want %s %s", task.GetKind(), task.GetStepExecutionId(), task.GetAttempt(), kind, stepExec)
	}
}

func expectAck(t *testing.T, a *dexpb.TaskAck, want dexpb.TaskAckStatus) {
	t.Helper()
	if a.GetStatus() != want {
		t.Fatalf("ack = %s (%s), want %s", a.GetStatus(), a.GetMessage(), want)
	}
}
