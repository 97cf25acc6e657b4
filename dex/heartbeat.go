package dex

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
)

// ErrTaskCanceled is the cause (context.Cause) of a handler's context that
// ended because the server cancelled its task (E38): its step execution
// was cancelled (CancelSteps, CancelSiblingSteps) or its flow was stopped
// or closed. The task's result is refused either way; return promptly.
var ErrTaskCanceled = errors.New("dex: the task was canceled by the server")

// taskCanceledError carries the server's reason.
type taskCanceledError struct{ reason string }

func (e *taskCanceledError) Error() string {
	if e.reason == "" {
		return ErrTaskCanceled.Error()
	}
	return ErrTaskCanceled.Error() + ": " + e.reason
}
func (e *taskCanceledError) Unwrap() error   { return ErrTaskCanceled }
func (*taskCanceledError) ErrorType() string { return "dex.TaskCanceled" }

// taskBeat is a running task's heartbeat state in the worker: its
// heartbeat timeout, the details its handler reported last and whether
// they were sent, and the cancel of its context.
type taskBeat struct {
	timeout time.Duration
	cancel  context.CancelCauseFunc

	mu      sync.Mutex
	details *dexpb.EncodedValue
	unsent  bool
}

type beatKey struct{}

func withBeat(ctx context.Context, b *taskBeat) context.Context {
	return context.WithValue(ctx, beatKey{}, b)
}

func beatOf(ctx context.Context) *taskBeat {
	b, _ := ctx.Value(beatKey{}).(*taskBeat)
	return b
}

// set records new details; they go out with the next heartbeat.
func (b *taskBeat) set(v *dexpb.EncodedValue) {
	b.mu.Lock()
	b.details, b.unsent = v, true
	b.mu.Unlock()
}

// take returns the details not sent yet, once.
func (b *taskBeat) take() *dexpb.EncodedValue {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.unsent {
		return nil
	}
	b.unsent = false
	return b.details
}

func (c *taskContext) Heartbeat(details any) {
	ev, err := encodeAny(details)
	if err != nil {
		c.st.failLocked(&encodeError{what: "heartbeat details", err: err})
		return
	}
	c.st.mu.Lock()
	c.st.details = ev
	c.st.mu.Unlock()
	if b := c.st.beat; b != nil {
		b.set(ev)
	}
}

// HeartbeatDetails returns the progress details that an earlier attempt
// of this handler reported last with Context.Heartbeat, or this attempt's
// own latest ones; ok is false when there are none:
//
//	done, ok, err := dex.HeartbeatDetails[int](ctx)
//	if ok { items = items[done:] } // resume where attempt n-1 stopped
func HeartbeatDetails[T any](ctx Context) (v T, ok bool, err error) {
	st := ctx.state()
	st.mu.Lock()
	ev := st.details
	st.mu.Unlock()
	if ev == nil {
		return v, false, nil
	}
	v, err = decodeValue[T](ev)
	if err != nil {
		return v, false, fmt.Errorf("decode heartbeat details: %w", err)
	}
	return v, true, nil
}

// Heartbeat period: at least three heartbeats per heartbeat timeout, and
// never more often than minBeat.
const minBeat = 10 * time.Millisecond

// beatPeriod is how often the worker heartbeats: the Welcome's interval,
// shortened to a third of the shortest heartbeat timeout of its running
// tasks.
func (w *Worker) beatPeriod(interval time.Duration) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := interval
	for _, b := range w.running {
		if b.timeout > 0 {
			p = min(p, b.timeout/3)
		}
	}
	return max(p, minBeat)
}

// heartbeatMsg builds the Heartbeat: the running tasks' tokens and the
// details reported since the last one (encoded with the codec, if any).
// nil when nothing runs.
func (w *Worker) heartbeatMsg(ctx context.Context) *dexpb.PollWorkerTaskRequest {
	w.mu.Lock()
	if len(w.running) == 0 {
		w.mu.Unlock()
		return nil
	}
	hb := &dexpb.Heartbeat{RunningTaskTokens: make([][]byte, 0, len(w.running))}
	for k, b := range w.running {
		hb.RunningTaskTokens = append(hb.RunningTaskTokens, []byte(k))
		if v := b.take(); v != nil {
			hb.Details = append(hb.Details, &dexpb.TaskHeartbeatDetails{TaskToken: []byte(k), Details: v})
		}
	}
	w.mu.Unlock()
	if w.opts.Codec != nil && len(hb.Details) > 0 {
		enc, err := encodeCopy(ctx, w.opts.Codec, hb, nil)
		if err != nil {
			w.log.Warn("heartbeat details not sent: the codec failed", "err", err)
			hb.Details = nil
		} else {
			hb = enc.(*dexpb.Heartbeat)
		}
	}
	return &dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_Heartbeat{Heartbeat: hb}}
}

// canceled ends the context of a running task the server cancelled.
func (w *Worker) canceled(c *dexpb.TaskCancel) {
	w.mu.Lock()
	b := w.running[string(c.GetTaskToken())]
	w.mu.Unlock()
	if b != nil {
		w.log.Info("task canceled by the server", "reason", c.GetReason())
		b.cancel(&taskCanceledError{reason: c.GetReason()})
	}
}
