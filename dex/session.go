package dex

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Protocol timings a Welcome may leave unset.
const (
	defaultHeartbeat = 10 * time.Second
	// staleAfter is how many ping intervals of silence end a stream.
	staleAfter = 3
	// closeGrace is how long the worker waits for the server to end a
	// stream it half-closed.
	closeGrace = time.Second
	// welcomeTimeout is how long the worker waits for the Welcome.
	welcomeTimeout = 30 * time.Second
)

var errStaleStream = errors.New("no message from the server for several ping intervals")

// session runs one PollWorkerTask stream against address i: Hello,
// Welcome, then tasks in, results, heartbeats and pongs out. It returns nil
// when a graceful stop finished on it, else the error that ended it;
// welcomed reports whether the server accepted the Hello. The stream is
// guarded by the detection bound (connSet.guard): every message from the
// server proves it alive, and after half a bound of silence a health check
// on the same connection must be answered, so a frozen or unreachable
// server ends the session within UnresponsiveTimeout.
func (w *Worker) session(hard context.Context, i int) (welcomed bool, err error) {
	e, err := w.conns.get(hard, i)
	if err != nil {
		return false, err
	}
	err = w.conns.guard(hard, e, func(ctx context.Context) error {
		var err error
		welcomed, err = w.stream(ctx, e)
		return err
	})
	return welcomed, err
}

// stream runs the session's stream on e until it ends.
func (w *Worker) stream(parent context.Context, e *endpoint) (welcomed bool, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	// The receive limit is what the worker accepts (MaxTaskBytes, stated
	// in Hello); the server sends no larger task. The send limit is left
	// at gRPC's largest: results are checked against the server's
	// Welcome.max_message_bytes before they are sent (unsent).
	stream, err := dexpb.NewWorkerTaskServiceClient(e.cc).PollWorkerTask(ctx,
		grpc.MaxCallRecvMsgSize(w.opts.MaxTaskBytes), grpc.MaxCallSendMsgSize(math.MaxInt32))
	if err != nil {
		return false, err
	}
	hello := &dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_Hello{Hello: w.hello}}
	if err := stream.Send(hello); err != nil {
		// The stream's status comes from Recv.
		_, rerr := stream.Recv()
		return false, errors.Join(err, rerr)
	}
	noWelcome := time.AfterFunc(welcomeTimeout, cancel)
	first, err := stream.Recv()
	if !noWelcome.Stop() {
		return false, fmt.Errorf("protocol: no Welcome within %s", welcomeTimeout)
	}
	if err != nil {
		return false, err
	}
	e.answered()
	welcome := first.GetWelcome()
	if welcome == nil {
		return false, fmt.Errorf("protocol: first message from the server is not a Welcome")
	}
	gen := w.nextGen()
	maxMsg := int(min(welcome.GetMaxMessageBytes(), math.MaxInt32)) // 0: an older server that does not say
	w.connectedOnce.Do(func() { close(w.connected) })
	w.log.Info("worker connected", "address", e.addr, "node_id", welcome.GetNodeId(),
		"node_epoch", welcome.GetNodeEpoch(), "session_id", welcome.GetSessionId(),
		"max_task_bytes", welcome.GetMaxTaskBytes(), "max_message_bytes", welcome.GetMaxMessageBytes())

	var lastRecv atomic.Int64
	lastRecv.Store(time.Now().UnixNano())
	pongs := make(chan uint64, 16)
	recvDone := make(chan struct{}) // closed when Recv failed with recvErr
	var recvErr error
	go func() {
		defer close(recvDone)
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr = err
				return
			}
			lastRecv.Store(time.Now().UnixNano())
			e.answered()
			switch msg := m.GetMessage().(type) {
			case *dexpb.PollWorkerTaskResponse_Task:
				w.startTask(msg.Task)
			case *dexpb.PollWorkerTaskResponse_TaskAck:
				w.ack(msg.TaskAck)
			case *dexpb.PollWorkerTaskResponse_TaskCancel:
				w.canceled(msg.TaskCancel)
			case *dexpb.PollWorkerTaskResponse_Ping:
				select {
				case pongs <- msg.Ping.GetNonce():
				case <-ctx.Done():
				}
			case *dexpb.PollWorkerTaskResponse_Drain:
				w.log.Info("server drains the stream", "reason", msg.Drain.GetReason().String(),
					"timeout", msg.Drain.GetTimeout().AsDuration(), "message", msg.Drain.GetMessage())
			default:
				// A Welcome again, or a kind added later: ignore it.
			}
		}
	}()

	hb := welcome.GetHeartbeatInterval().AsDuration()
	if hb <= 0 {
		hb = defaultHeartbeat
	}
	// The heartbeat ticks every Welcome interval, and at least three times
	// per heartbeat timeout of the running tasks (E38).
	period := w.beatPeriod(hb)
	heartbeat := time.NewTicker(period)
	defer heartbeat.Stop()
	ping := welcome.GetPingInterval().AsDuration()
	var liveness <-chan time.Time
	if ping > 0 {
		t := time.NewTicker(ping)
		defer t.Stop()
		liveness = t.C
	}
	var closing <-chan time.Time // set once the stream is half-closed

	send := func(m *dexpb.PollWorkerTaskRequest) error {
		if err := stream.Send(m); err != nil {
			// The stream is broken; its status comes from Recv.
			cancel()
			<-recvDone
			return recvErr
		}
		return nil
	}
	flush := func() error {
		for _, m := range w.unsent(gen, maxMsg) {
			if err := send(m); err != nil {
				return err
			}
		}
		return nil
	}
	if err := flush(); err != nil {
		return true, err
	}
	w.signal()
	for {
		select {
		case <-recvDone:
			if closing != nil {
				return true, nil
			}
			return true, recvErr
		case n := <-pongs:
			if err := send(&dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_Pong{Pong: &dexpb.Pong{Nonce: n}}}); err != nil {
				return true, err
			}
		case <-heartbeat.C:
			if m := w.heartbeatMsg(ctx); m != nil {
				if err := send(m); err != nil {
					return true, err
				}
			}
			period = w.beatPeriod(hb)
			heartbeat.Reset(period)
		case <-w.beats:
			// Only ever shorter: tasks starting in a row must not
			// postpone the next heartbeat.
			if p := w.beatPeriod(hb); p < period {
				period = p
				heartbeat.Reset(period)
			}
		case <-liveness:
			if time.Since(time.Unix(0, lastRecv.Load())) > staleAfter*ping {
				cancel()
				<-recvDone
				return true, errStaleStream
			}
		case <-w.wake:
			if err := flush(); err != nil {
				return true, err
			}
			if closing == nil && w.stopDone() {
				// Every result is acknowledged: half-close and give the
				// server a moment to end the stream.
				if err := stream.CloseSend(); err != nil {
					cancel()
					<-recvDone
					return true, nil
				}
				closing = time.After(closeGrace)
			}
		case <-closing:
			cancel()
			<-recvDone
			return true, nil
		}
	}
}
