package dex

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Version is the SDK's version, sent in Hello as "dex-go/<Version>".
const Version = "0.1.0"

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// Addresses are the servers to poll, in order of preference. The
	// worker polls one at a time and moves to the next when a stream ends
	// (UNAVAILABLE from a standby, a drain, a broken connection, a server
	// that stopped answering), skipping servers known to be unresponsive
	// while another address answers. Default: DefaultAddress.
	Addresses []string
	// WorkerID names the worker in live state and logs. Default
	// "<hostname>-<pid>".
	WorkerID string
	// MaxConcurrentTasks is the most tasks the worker runs at once (Hello).
	// Default 10.
	MaxConcurrentTasks int
	// Logger receives the worker's logs. Default slog.Default().
	Logger *slog.Logger
	// Dialer opens connections; default grpc.NewClient (TLS only with TLS), with
	// keepalive (KeepaliveTime, UnresponsiveTimeout) and a connect backoff
	// of 50 ms growing to 500 ms, plus DialOptions.
	Dialer Dialer
	// DialOptions are added to the default Dialer's options (after them,
	// so they win).
	DialOptions []grpc.DialOption
	// Conn, when set, is used instead of Addresses and Dialer; the worker
	// does not close it (for test helpers with an in-process server).
	Conn grpc.ClientConnInterface
	// DrainTimeout bounds a graceful stop: once Run's context ends, the
	// worker takes no new tasks and waits this long for running tasks and
	// for the server to acknowledge their results. Default 30 s.
	DrainTimeout time.Duration
	// ReconnectBackoff spaces reconnection attempts. Default 100 ms to
	// 500 ms, so that a worker waiting for a standby to take over
	// reconnects soon after it serves.
	ReconnectBackoff Backoff
	// UnresponsiveTimeout bounds how long the worker stays on a server that
	// answers nothing (frozen, hung, or cut off by the network) before it
	// moves to the next address: after half of it without a message on the
	// stream, the worker sends a health check on the same connection, and
	// when that gets no answer within the other half, it ends the stream.
	// Results not yet acknowledged are sent again on the next stream.
	// It is also the default Dialer's keepalive timeout and connect
	// timeout. Default DefaultUnresponsiveTimeout (5 s); keep it below the
	// server's lease.duration + 1 s, the earliest a standby can take over
	// from a frozen active.
	UnresponsiveTimeout time.Duration
	// MaxTaskBytes is the largest task message (encoded) the worker
	// accepts: its gRPC receive limit on the worker stream, stated in
	// Hello.max_task_bytes. The server never sends a larger task; it fails
	// that attempt with error type "TaskTooLarge" instead, and the stream
	// and the other tasks go on. Default (0): whatever the server may send,
	// which is at most the server's message limit (stated in
	// Welcome.max_message_bytes; 9 MiB with the server's default limits),
	// so that every legal task arrives. Set it only to bound the worker's
	// memory.
	MaxTaskBytes int
	// TracerProvider, when set, traces every attempt: a span
	// "dex.<Kind> <step or RPC>" (dex.Execute Charge) with the flow ID,
	// step execution, attempt and outcome, the child of the flow's start
	// when the task carries its trace context (package doc: Tracing). The
	// handler's Context carries the span. Nil traces nothing; pass
	// otel.GetTracerProvider() to use the global one.
	TracerProvider trace.TracerProvider

	// TLS connects over TLS (api.tls); nil connects in plaintext. Token,
	// when set, is sent as "authorization: Bearer <token>" on every call
	// (auth.tokensFile). Both apply to the default Dialer (security.go).
	TLS   *TLSConfig
	Token TokenSource

	// Codec, when set, decodes every user value of a task before its
	// handler runs and encodes every value of its result (outputs,
	// movements' inputs, attribute writes, channel messages, RPC answers),
	// for example to encrypt them end to end (NewAESGCMCodec): the
	// clients need the same codec. A value the codec cannot decode fails
	// the attempt with error type "dex.CodecError". With a codec the
	// worker declares its value types without an encoding (see Codec).
	Codec Codec
}

// unlimitedTaskBytes is the receive limit of a worker that sets no
// MaxTaskBytes: gRPC's largest; the server bounds what it sends.
const unlimitedTaskBytes = math.MaxInt32

// Worker serves flow types: it polls a server for tasks over
// WorkerTaskService.PollWorkerTask, runs them with the configured
// concurrency and sends their results.
type Worker struct {
	opts  WorkerOptions
	reg   *registry
	hello *dexpb.Hello
	log   *slog.Logger
	conns *connSet
	sem   chan struct{}

	started atomic.Bool
	// connected is closed when a server first welcomed the worker
	// (Connected).
	connected     chan struct{}
	connectedOnce sync.Once
	hard          context.Context // ends when the drain times out; tasks run under it
	wg            sync.WaitGroup  // task goroutines
	wake          chan struct{}   // outbox or stop state changed

	mu       sync.Mutex
	running  map[string]*taskBeat // running tasks by token
	beats    chan struct{}        // a task with a heartbeat timeout started
	outbox   []*outItem           // results not yet acknowledged, in order
	stopping bool
	gen      uint64 // stream generation
}

// outItem is a result waiting for its TaskAck. It survives reconnects: a
// result not acknowledged on one stream is sent again on the next, and the
// server refuses it if it is stale.
type outItem struct {
	token string
	msg   *dexpb.PollWorkerTaskRequest
	sent  uint64 // generation of the stream it was last sent on
}

// NewWorker validates the flows and the options. Every mistake in a flow
// definition is reported here, naming the flow and the step (the errors
// match ErrInvalidFlow), not when the first task arrives.
func NewWorker(opts WorkerOptions, flows ...*Flow) (*Worker, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.WorkerID == "" {
		host, _ := os.Hostname()
		opts.WorkerID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if opts.MaxConcurrentTasks <= 0 {
		opts.MaxConcurrentTasks = 10
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	if opts.UnresponsiveTimeout <= 0 {
		opts.UnresponsiveTimeout = DefaultUnresponsiveTimeout
	}
	if opts.MaxTaskBytes <= 0 || opts.MaxTaskBytes > unlimitedTaskBytes {
		opts.MaxTaskBytes = unlimitedTaskBytes
	}
	opts.ReconnectBackoff = opts.ReconnectBackoff.withDefaults(100*time.Millisecond, 500*time.Millisecond)
	reg, err := newRegistry(flows, opts.Logger)
	if err != nil {
		return nil, err
	}
	reg.tracer = newTracer(opts.TracerProvider)
	reg.codec = opts.Codec
	if len(opts.Addresses) == 0 && opts.Conn == nil {
		opts.Addresses = []string{DefaultAddress}
	}
	conns, err := newConnSet(opts.Addresses, opts.Conn, opts.Dialer, opts.DialOptions, opts.UnresponsiveTimeout, opts.TLS, opts.Token)
	if err != nil {
		return nil, err
	}
	hello := &dexpb.Hello{
		WorkerId:           opts.WorkerID,
		MaxConcurrentTasks: uint32(opts.MaxConcurrentTasks),
		SdkVersion:         "dex-go/" + Version,
		MaxTaskBytes:       uint32(opts.MaxTaskBytes), //nolint:gosec // at most math.MaxInt32
	}
	for _, f := range reg.order {
		hello.FlowTypes = append(hello.FlowTypes, f.declaration())
	}
	if opts.Codec != nil {
		declareForCodec(hello)
	}
	return &Worker{
		opts:    opts,
		reg:     reg,
		hello:   hello,
		log:     opts.Logger.With("worker_id", opts.WorkerID),
		conns:   conns,
		sem:     make(chan struct{}, opts.MaxConcurrentTasks),
		wake:    make(chan struct{}, 1),
		running: map[string]*taskBeat{}, beats: make(chan struct{}, 1),

		connected: make(chan struct{}),
	}, nil
}

// Connected is closed once a server has welcomed the worker for the first
// time: its Hello, and with it the declarations of its flow types, is
// registered, so a flow started from then on gets the declared start step
// and options. Tests wait for it before their first flow (dextest does).
func (w *Worker) Connected() <-chan struct{} { return w.connected }

// Run polls for tasks until ctx ends, reconnecting with backoff and moving
// through the address list. When ctx ends it stops gracefully: it takes
// no new tasks (a task that still arrives is answered with a TaskFailure of
// type "dex.WorkerStopping"), waits up to DrainTimeout for running tasks and
// for the acknowledgements of their results, then closes the stream and
// returns nil. It returns an error at once when a server refuses the worker
// (INVALID_ARGUMENT, UNIMPLEMENTED, PERMISSION_DENIED, UNAUTHENTICATED).
// Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("dex: Worker.Run called twice")
	}
	hard, hardCancel := context.WithCancel(context.WithoutCancel(ctx))
	w.hard = hard
	runDone := make(chan struct{})
	defer func() {
		// Tasks still running now are abandoned (their contexts end), and
		// every goroutine of the worker stops.
		hardCancel()
		w.waitTasks()
		close(runDone)
		if err := w.conns.close(); err != nil {
			w.log.Warn("close connections", "error", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-runDone:
			return
		}
		w.beginStop()
		t := time.NewTimer(w.opts.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			w.log.Warn("drain timeout expired", "running", w.runningCount())
			hardCancel()
		case <-runDone:
		}
	}()

	w.log.Info("worker started", "addresses", w.conns.addrs, "flow_types", len(w.hello.GetFlowTypes()),
		"max_concurrent_tasks", w.opts.MaxConcurrentTasks)
	bo := &backoffState{cfg: w.opts.ReconnectBackoff}
	addr := 0
	for {
		if w.stopDone() {
			w.log.Info("worker stopped")
			return nil
		}
		if hard.Err() != nil {
			w.log.Warn("worker stopped with unfinished tasks", "running", w.runningCount(), "unacknowledged", w.outboxLen())
			return nil
		}
		welcomed, err := w.session(hard, addr)
		if welcomed {
			bo.reset()
		}
		if err == nil {
			continue
		}
		if permanent(err) {
			return fmt.Errorf("dex: worker refused by %s: %w", w.conns.addr(addr), err)
		}
		w.log.Warn("worker stream ended", "address", w.conns.addr(addr), "error", err)
		addr = w.conns.next(addr)
		w.pause(hard, bo.next(), addr)
	}
}

// pause waits d before reconnecting to address addr, or less: when ctx
// ends, when a graceful stop has nothing left to deliver, or when addr's
// connection, down now, is up again (a restarted server is reached as
// soon as gRPC has reconnected, not a backoff later).
func (w *Worker) pause(ctx context.Context, d time.Duration, addr int) {
	t := time.NewTimer(d)
	defer t.Stop()
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	up := make(chan struct{})
	go func() {
		if w.conns.reconnected(pctx, addr) {
			close(up)
		}
	}()
	for {
		select {
		case <-t.C:
			return
		case <-up:
			return
		case <-ctx.Done():
			return
		case <-w.wake:
			// The session's sender sends every unsent result when it
			// starts, so this wake-up is not needed later.
			if w.stopDone() {
				return
			}
		}
	}
}

// permanent reports whether a stream error means the worker is refused,
// not that it should reconnect.
func permanent(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

func (w *Worker) beginStop() {
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	w.log.Info("worker stopping", "running", w.runningCount())
	w.signal()
}

// stopDone reports whether a graceful stop has nothing left to do.
func (w *Worker) stopDone() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopping && len(w.running) == 0 && len(w.outbox) == 0
}

func (w *Worker) runningCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

func (w *Worker) outboxLen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.outbox)
}

// signal wakes the session's sender.
func (w *Worker) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// waitTasks waits for the task goroutines; after a drain timeout their
// contexts have ended, so well-behaved handlers return promptly. Handlers
// that ignore their context are abandoned after a grace period.
func (w *Worker) waitTasks() {
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		w.log.Error("handlers ignore their context; abandoning them", "running", w.runningCount())
	}
}

// startTask runs a task received on the stream of generation gen.
func (w *Worker) startTask(t *dexpb.Task) {
	key := string(t.GetTaskToken())
	w.mu.Lock()
	if w.running[key] != nil || w.inOutboxLocked(key) {
		w.mu.Unlock()
		w.log.Warn("duplicate task ignored", "flow_id", t.GetFlowId(), "step_execution_id", t.GetStepExecutionId())
		return
	}
	if w.stopping {
		w.outbox = append(w.outbox, &outItem{token: key, msg: failure(t.GetTaskToken(), errWorkerStopping, "")})
		w.mu.Unlock()
		w.signal()
		return
	}
	ctx, cancel := context.WithCancelCause(w.hard)
	b := &taskBeat{timeout: t.GetHeartbeatTimeout().AsDuration(), cancel: cancel}
	w.running[key] = b
	w.wg.Add(1)
	w.mu.Unlock()
	if b.timeout > 0 {
		select {
		case w.beats <- struct{}{}:
		default:
		}
	}
	go func() {
		defer cancel(nil)
		defer w.wg.Done()
		select {
		case w.sem <- struct{}{}:
		case <-ctx.Done():
			// Cancelled by the server before it ran: answer, so that the
			// server frees its slot now. Stopped: the next worker runs it.
			var msg *dexpb.PollWorkerTaskRequest
			if cause := context.Cause(ctx); errors.Is(cause, ErrTaskCanceled) {
				msg = failure(t.GetTaskToken(), cause, "")
			}
			w.finishTask(key, msg)
			return
		}
		msg := w.reg.run(withBeat(ctx, b), t)
		<-w.sem
		if cause := context.Cause(ctx); errors.Is(cause, ErrTaskCanceled) {
			// The server refuses its result; nothing will retry it.
			w.log.Info("canceled task ended", "flow_id", t.GetFlowId(), "step_execution_id", t.GetStepExecutionId(),
				"attempt", t.GetAttempt(), "reason", cause.Error())
		} else {
			w.logFailure(t, msg.GetTaskFailure())
		}
		w.finishTask(key, msg)
	}()
}

var errWorkerStopping = &stoppingError{}

type stoppingError struct{}

func (*stoppingError) Error() string {
	return "the worker is stopping; the task runs on another worker"
}
func (*stoppingError) ErrorType() string { return "dex.WorkerStopping" }

func (w *Worker) finishTask(key string, msg *dexpb.PollWorkerTaskRequest) {
	w.mu.Lock()
	delete(w.running, key)
	if msg != nil {
		w.outbox = append(w.outbox, &outItem{token: key, msg: msg})
	}
	w.mu.Unlock()
	w.signal()
}

func (w *Worker) inOutboxLocked(key string) bool {
	for _, it := range w.outbox {
		if it.token == key {
			return true
		}
	}
	return false
}

// ack removes an acknowledged result from the outbox.
func (w *Worker) ack(a *dexpb.TaskAck) {
	key := string(a.GetTaskToken())
	w.mu.Lock()
	for i, it := range w.outbox {
		if it.token == key {
			w.outbox = append(w.outbox[:i], w.outbox[i+1:]...)
			break
		}
	}
	w.mu.Unlock()
	switch a.GetStatus() {
	case dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED:
	case dexpb.TaskAckStatus_TASK_ACK_STATUS_INVALID:
		w.log.Warn("task result refused as invalid", "status", a.GetStatus().String(), "message", a.GetMessage())
	default:
		w.log.Info("task result refused", "status", a.GetStatus().String(), "message", a.GetMessage())
	}
	w.signal()
}

// unsent returns the outbox items not yet sent on stream generation gen and
// marks them sent. A result larger than maxMsg (the server's receive limit
// from the Welcome; 0: unknown) would end the stream, and with it the
// delivery of every other result: it is replaced by a TaskFailure of type
// "dex.ResultTooLarge", which fails that attempt under its retry policy.
func (w *Worker) unsent(gen uint64, maxMsg int) []*dexpb.PollWorkerTaskRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*dexpb.PollWorkerTaskRequest
	for _, it := range w.outbox {
		if it.sent != gen {
			it.sent = gen
			if size := proto.Size(it.msg); maxMsg > 0 && size > maxMsg {
				err := &resultTooLargeError{size: size, limit: maxMsg}
				w.log.Warn("task result too large for the server; reporting a failure instead", "bytes", size, "limit", maxMsg)
				it.msg = failure([]byte(it.token), err, "")
			}
			out = append(out, it.msg)
		}
	}
	return out
}

// resultTooLargeError fails an attempt whose result the server would not
// accept (Welcome.max_message_bytes).
type resultTooLargeError struct{ size, limit int }

func (e *resultTooLargeError) Error() string {
	return fmt.Sprintf("the task's result is %d bytes encoded, more than the %d bytes the server accepts in one message "+
		"(Welcome.max_message_bytes); it was not sent", e.size, e.limit)
}
func (*resultTooLargeError) ErrorType() string { return "dex.ResultTooLarge" }

func (w *Worker) nextGen() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gen++
	return w.gen
}

// logFailure logs a failed attempt of t: one WARN line (flow, step
// execution, attempt, error type and message; the stack goes to the
// server, not the log) while the server will retry it, and one ERROR when
// it was the last: the failure is non-retryable, or lastFailure says the
// step's retries are exhausted, so the step's failure policy applies. nil
// logs nothing.
func (w *Worker) logFailure(t *dexpb.Task, f *dexpb.TaskFailure) {
	if f == nil {
		return
	}
	attrs := []any{"flow_type", t.GetFlowType(), "flow_id", t.GetFlowId(), "step_execution_id", t.GetStepExecutionId(),
		"kind", t.GetKind().String(), "attempt", t.GetAttempt(), "error_type", f.GetErrorType(), "error", f.GetMessage()}
	switch {
	case t.GetKind() == dexpb.TaskKind_TASK_KIND_RPC:
		w.log.Warn("RPC handler failed; its caller gets the error", attrs...)
	case f.GetNonRetryable():
		w.log.Error("attempt failed with a non-retryable error; the step's failure policy applies", attrs...)
	case lastFailure(t, f, time.Now()):
		if m := t.GetMaxAttempts(); m > 0 {
			attrs = append(attrs, "max_attempts", m)
		}
		if d := t.GetRetryDeadline(); d != nil {
			attrs = append(attrs, "retry_deadline", d.AsTime())
		}
		w.log.Error("attempt failed and the step's retries are exhausted; the step's failure policy applies", attrs...)
	default:
		w.log.Warn("attempt failed; the server retries it under the step's retry policy", attrs...)
	}
}

// lastFailure reports whether failure f of task t, at now, exhausts the
// step's retry policy, from what the task says of it: the attempt is the
// policy's last (max_attempts), or the retry would start after
// retry_deadline (now plus the failure's retry_after, else the task's
// retry_delay). The server decides with its own clock, so near the
// deadline the two may disagree by the clock skew and the time the
// failure takes to arrive; an older server that sends none of these
// fields never has a last failure.
func lastFailure(t *dexpb.Task, f *dexpb.TaskFailure, now time.Time) bool {
	if m := t.GetMaxAttempts(); m > 0 && t.GetAttempt() >= m {
		return true
	}
	if t.GetRetryDeadline() == nil {
		return false
	}
	delay := t.GetRetryDelay().AsDuration()
	if ra := f.GetRetryAfter(); ra != nil {
		delay = max(ra.AsDuration(), 0)
	}
	return now.Add(delay).After(t.GetRetryDeadline().AsTime())
}
