package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/tracing"
)

// workerService is dex.WorkerTaskService (W1-W5).
type workerService struct {
	dexpb.UnimplementedWorkerTaskServiceServer
	s *Server
}

// PollWorkerTask runs one worker session. The handler goroutine sends
// (tasks, drains, acks, pings); a receiver goroutine reads the worker's
// messages and commits each result in its own goroutine, so that a slow
// commit does not hold up the others; its ack is sent once the outcome is
// durable or refused (W2).
func (w *workerService) PollWorkerTask(stream dexpb.WorkerTaskService_PollWorkerTaskServer) error {
	b, err := w.s.active()
	if err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "hello: the first message must be a Hello")
	}
	wh, err := helloIn(hello)
	if err != nil {
		return statusOf(err)
	}
	ctx := stream.Context()
	sess, err := b.OpenSession(ctx, wh)
	if err != nil {
		return statusOf(err)
	}
	defer sess.Close()
	wel := sess.Welcome()
	maxTask := w.s.maxTaskBytes(hello)
	if err := stream.Send(&dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_Welcome{Welcome: &dexpb.Welcome{
		NodeId: wel.NodeID, NodeEpoch: wel.Epoch, SessionId: wel.SessionID,
		HeartbeatInterval: durationpb.New(wel.HeartbeatInterval), PingInterval: durationpb.New(wel.PingInterval),
		MaxMessageBytes: uint32(w.s.MaxMessageBytes()), MaxTaskBytes: uint32(maxTask)}}}); err != nil { //nolint:gosec // both are at most math.MaxInt32
		return err
	}

	acks := make(chan *dexpb.TaskAck, 16)
	recvErr := make(chan error, 1)
	var pending sync.WaitGroup // result commits whose ack is not queued yet
	go func() { recvErr <- w.receive(stream, sess, acks, &pending) }()
	// flush sends the acks of results that were committing when the
	// session ended, so a drained worker learns that its results counted.
	flush := func() {
		done := make(chan struct{})
		go func() { pending.Wait(); close(done) }()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case a := <-acks:
				if stream.Send(&dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_TaskAck{TaskAck: a}}) != nil {
					return
				}
			case <-done:
				for {
					select {
					case a := <-acks:
						_ = stream.Send(&dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_TaskAck{TaskAck: a}})
					default:
						return
					}
				}
			case <-timeout:
				return
			}
		}
	}

	ping := time.NewTicker(wel.PingInterval)
	defer ping.Stop()
	var nonce uint64
	lastSend := time.Now()
	send := func(m *dexpb.PollWorkerTaskResponse) error {
		lastSend = time.Now()
		return stream.Send(m)
	}
	tooLarge := func(t *engine.Task, size int) {
		w.tooLarge(ctx, sess, hello.GetWorkerId(), t, size, maxTask, &pending)
	}
	for {
		select {
		case <-sess.Notify():
			if err := sendTaken(sess, sess.Take(), send, maxTask, tooLarge); err != nil {
				return err
			}
		case a := <-acks:
			if err := send(&dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_TaskAck{TaskAck: a}}); err != nil {
				return err
			}
		case <-ping.C:
			if time.Since(lastSend) >= wel.PingInterval {
				nonce++
				if err := send(&dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_Ping{Ping: &dexpb.Ping{Nonce: nonce}}}); err != nil {
					return err
				}
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-sess.Done():
			flush()
			return status.Error(codes.Unavailable, "this process stopped serving the worker stream; reconnect")
		case <-w.s.closed:
			flush()
			return status.Error(codes.Unavailable, "the server is shutting down; reconnect")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// receive reads the worker's messages until the stream ends.
func (w *workerService) receive(stream dexpb.WorkerTaskService_PollWorkerTaskServer, sess Session, acks chan<- *dexpb.TaskAck,
	pending *sync.WaitGroup) error {
	ctx := stream.Context()
	reply := func(token []byte, a Ack) {
		select {
		case acks <- ackOut(token, a):
		case <-ctx.Done():
		}
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		switch m := req.GetMessage().(type) {
		case *dexpb.PollWorkerTaskRequest_TaskResult:
			token := m.TaskResult.GetTaskToken()
			tok, err := engine.DecodeToken(token)
			if err != nil {
				go reply(token, Ack{Status: AckUnknownTask, Message: "malformed task token"})
				continue
			}
			r := m.TaskResult
			pending.Add(1)
			go func() {
				defer pending.Done()
				a, err := w.commit(ctx, sess, tok, r)
				if err == nil {
					reply(token, a)
				}
			}()
		case *dexpb.PollWorkerTaskRequest_TaskFailure:
			f := m.TaskFailure
			token := f.GetTaskToken()
			tok, err := engine.DecodeToken(token)
			if err != nil {
				go reply(token, Ack{Status: AckUnknownTask, Message: "malformed task token"})
				continue
			}
			failure := engine.Failure{Type: f.GetErrorType(), Message: f.GetMessage(), Stack: f.GetStack(), NonRetryable: f.GetNonRetryable()}
			if tok.Method == engine.MethodRPC {
				go reply(token, sess.RPCFailed(tok, failure))
				continue
			}
			cmd := engine.TaskFailed{Token: tok, Failure: failure}
			if ra := f.GetRetryAfter(); ra != nil {
				d := max(ra.AsDuration(), 0)
				cmd.RetryAfter = &d
			}
			pending.Add(1)
			go func() {
				defer pending.Done()
				a, err := sess.Result(ctx, tok, cmd)
				if err == nil {
					reply(token, a)
				}
			}()
		case *dexpb.PollWorkerTaskRequest_Heartbeat:
			toks, details := heartbeatIn(m.Heartbeat)
			sess.Heartbeat(toks, details)
		case *dexpb.PollWorkerTaskRequest_Pong:
		case *dexpb.PollWorkerTaskRequest_Hello:
			return status.Error(codes.InvalidArgument, "hello: sent twice on one stream")
		default:
			return status.Error(codes.InvalidArgument, "message: exactly one must be set")
		}
	}
}

// commit converts a result and commits it. A result that does not match
// its task's kind, or does not convert, fails the attempt with
// INVALID_USER_FLOW_CODE (or, for an RPC, is the caller's error) (E28).
func (w *workerService) commit(ctx context.Context, sess Session, tok engine.Token, r *dexpb.TaskResult) (Ack, error) {
	cmd, err := resultIn(tok, r)
	if err != nil {
		f := engine.Failure{Type: string(engine.ErrInvalidUserFlowCode), Message: err.Error()}
		if tok.Method == engine.MethodRPC {
			a := sess.RPCFailed(tok, f)
			if a.Status == AckAccepted {
				a = Ack{Status: AckInvalid, Message: f.Message}
			}
			return a, nil
		}
		cmd = engine.TaskFailed{Token: tok, Failure: f}
	}
	return sess.Result(ctx, tok, cmd)
}

// resultIn converts a TaskResult for tok's method.
func resultIn(tok engine.Token, r *dexpb.TaskResult) (engine.Command, error) {
	staged, err := stagedIn("writes", r.GetWrites())
	if err != nil {
		return nil, err
	}
	switch res := r.GetResult().(type) {
	case *dexpb.TaskResult_WaitFor:
		if tok.Method != engine.MethodWaitFor {
			break
		}
		wait, err := waitIn(res.WaitFor.GetWait())
		if err != nil {
			return nil, err
		}
		locals, err := localsIn("waitFor.locals", res.WaitFor.GetLocals())
		if err != nil {
			return nil, err
		}
		return engine.WaitForResult{Token: tok, Wait: wait, Staged: staged, Locals: locals}, nil
	case *dexpb.TaskResult_Execute:
		if tok.Method != engine.MethodExecute {
			break
		}
		dec, err := decisionIn(res.Execute.GetDecision())
		if err != nil {
			return nil, err
		}
		return engine.ExecuteResult{Token: tok, Decision: dec, Staged: staged}, nil
	case *dexpb.TaskResult_Rpc:
		if tok.Method != engine.MethodRPC {
			break
		}
		out, err := valueIn("rpc.output", res.Rpc.GetOutput())
		if err != nil {
			return nil, err
		}
		ms, err := movementsIn("rpc.movements", res.Rpc.GetMovements())
		if err != nil {
			return nil, err
		}
		return engine.RPCResult{Token: tok, Output: out, Staged: staged, Movements: ms, CancelSteps: res.Rpc.GetCancelStepTypes()}, nil
	}
	return nil, fmt.Errorf("result: a %s task needs a %s result", tok.Method, tok.Method)
}

func ackOut(token []byte, a Ack) *dexpb.TaskAck {
	out := &dexpb.TaskAck{TaskToken: token, Message: a.Message}
	switch a.Status {
	case AckAccepted:
		out.Status = dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED
	case AckInvalid:
		out.Status = dexpb.TaskAckStatus_TASK_ACK_STATUS_INVALID
	case AckStaleEpoch:
		out.Status = dexpb.TaskAckStatus_TASK_ACK_STATUS_STALE_EPOCH
	case AckCanceled:
		out.Status = dexpb.TaskAckStatus_TASK_ACK_STATUS_CANCELED
	case AckSuperseded:
		out.Status = dexpb.TaskAckStatus_TASK_ACK_STATUS_SUPERSEDED
	default:
		out.Status = dexpb.TaskAckStatus_TASK_ACK_STATUS_UNKNOWN_TASK
	}
	return out
}

func drainOut(d *Drain) *dexpb.Drain {
	out := &dexpb.Drain{Timeout: durOut(d.Timeout), Message: d.Message}
	switch d.Reason {
	case DrainShutdown:
		out.Reason = dexpb.DrainReason_DRAIN_REASON_SHUTDOWN
	case DrainStepDown:
		out.Reason = dexpb.DrainReason_DRAIN_REASON_STEP_DOWN
	case DrainLeaseLost:
		out.Reason = dexpb.DrainReason_DRAIN_REASON_LEASE_LOST
	}
	return out
}

// sendTaken sends the messages taken from sess in order. A task whose
// encoded message is larger than maxTask (what the worker accepts, see
// maxTaskBytes) is not sent: the worker would end the stream on it, and
// every task sent after it would be lost with the stream. It goes to
// tooLarge instead, which fails that attempt, and the others are sent.
// When a send fails the stream is broken: the messages after the failed
// one never went out, so they go back to the session (Untake), whose Close
// hands them to the next free slot at once instead of leaving them to
// their attempt timeout. The failed one may have reached the worker, so it
// is not handed back (it times out, W3: never to two workers at once).
func sendTaken(sess Session, msgs []Outgoing, send func(*dexpb.PollWorkerTaskResponse) error,
	maxTask int, tooLarge func(t *engine.Task, size int)) error {
	for i, m := range msgs {
		var err error
		switch {
		case m.Task != nil:
			msg := &dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_Task{Task: taskOut(m.Task)}}
			if size := proto.Size(msg); size > maxTask {
				tooLarge(m.Task, size)
				continue
			}
			err = send(msg)
		case m.Drain != nil:
			err = send(&dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_Drain{Drain: drainOut(m.Drain)}})
		case m.Cancel != nil:
			err = send(&dexpb.PollWorkerTaskResponse{Message: &dexpb.PollWorkerTaskResponse_TaskCancel{TaskCancel: &dexpb.TaskCancel{
				TaskToken: m.Cancel.Token.Encode(), Reason: m.Cancel.Reason}}})
		}
		if err != nil {
			if rest := msgs[i+1:]; len(rest) > 0 {
				sess.Untake(rest)
			}
			return err
		}
	}
	return nil
}

// defaultWorkerReceiveBytes is gRPC's default receive limit, which a worker
// that does not state Hello.max_task_bytes (an older SDK) keeps.
const defaultWorkerReceiveBytes = 4 << 20

// ErrTaskTooLarge is the failure type of an attempt whose task is larger
// than the worker it was handed to accepts (Welcome.max_task_bytes).
const ErrTaskTooLarge = "TaskTooLarge"

// maxTaskBytes is the largest task message the server sends to the worker
// that said hello: what the worker accepts (gRPC's default when it does not
// say), and never more than the server's own message limit, which is what
// a worker must accept to receive every task (README: Limits).
func (s *Server) maxTaskBytes(hello *dexpb.Hello) int {
	accepts := defaultWorkerReceiveBytes
	if n := hello.GetMaxTaskBytes(); n > 0 {
		accepts = int(min(n, math.MaxInt32))
	}
	return min(accepts, s.MaxMessageBytes())
}

// tooLarge fails the attempt of a task the worker would not accept, through
// the same path as a failure the worker reports: the step's retry policy
// applies, the slot is freed, and the stream goes on. An RPC's caller gets
// the error (E22). The commit runs in its own goroutine, like a worker's
// result, so the other tasks are sent meanwhile.
func (w *workerService) tooLarge(ctx context.Context, sess Session, workerID string, t *engine.Task, size, limit int,
	pending *sync.WaitGroup) {
	tok := t.Token
	f := engine.Failure{Type: ErrTaskTooLarge, Message: fmt.Sprintf(
		"the task is %d bytes encoded, more than the %d bytes worker %q accepts (Welcome.max_task_bytes: "+
			"the smaller of the worker's receive limit and the server's message limit); it was not sent",
		size, limit, workerID)}
	// Inside the flow's trace, if it has one: the line carries its IDs.
	lctx := ctx
	if sc := tracing.SpanContextOf(t.TraceContext); sc.IsValid() {
		lctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	w.s.log.WarnContext(lctx, "task not sent: too large for the worker", "flowId", t.FlowID, "stepExecId", t.StepExecID,
		"method", string(tok.Method), "attempt", tok.Attempt, "bytes", size, "limit", limit, "workerId", workerID)
	if tok.Method == engine.MethodRPC {
		sess.RPCFailed(tok, f)
		return
	}
	pending.Add(1)
	go func() {
		defer pending.Done()
		if _, err := sess.Result(ctx, tok, engine.TaskFailed{Token: tok, Failure: f}); err != nil {
			w.s.log.Warn("oversized task's attempt not failed; it times out", "flowId", t.FlowID, "err", err)
		}
	}()
}
