package dex

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dexzd/dexzd/api/dexpb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// registry holds the validated flows a worker serves and runs their tasks.
type registry struct {
	flows  map[string]*flowDef
	order  []*flowDef
	log    *slog.Logger
	tracer *tracer // nil: attempts are not traced
	codec  Codec   // nil: values as they are (codecRun)
}

// plain reports whether a flow of the worker indexes attribute name: its
// values then travel in plaintext, whatever the codec (E36).
func (r *registry) plain(name string) bool {
	for _, d := range r.order {
		if _, ok := d.indexed[name]; ok {
			return true
		}
	}
	return false
}

func newRegistry(flows []*Flow, log *slog.Logger) (*registry, error) {
	r := &registry{flows: map[string]*flowDef{}, log: log}
	var errs []error
	for _, f := range flows {
		d, err := f.compile(true)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if r.flows[d.name] != nil {
			errs = append(errs, fmt.Errorf("%w: flow %q is given twice", ErrInvalidFlow, d.name))
			continue
		}
		r.flows[d.name] = d
		r.order = append(r.order, d)
	}
	if len(flows) == 0 {
		errs = append(errs, fmt.Errorf("%w: no flows to serve", ErrInvalidFlow))
	}
	return r, errors.Join(errs...)
}

// run runs one task and returns the message that answers it: a TaskResult,
// or a TaskFailure with the error's message, type and stack. It never
// panics; a panicking handler becomes a failure. With a codec, the task's
// values are decoded first and the result's encoded (codecRun).
func (r *registry) run(ctx context.Context, t *dexpb.Task) *dexpb.PollWorkerTaskRequest {
	if r.codec != nil {
		return r.codecRun(ctx, t)
	}
	return r.handle(ctx, t)
}

// handle runs one task whose values are decoded.
func (r *registry) handle(ctx context.Context, t *dexpb.Task) (msg *dexpb.PollWorkerTaskRequest) {
	token := t.GetTaskToken()
	f := r.flows[t.GetFlowType()]
	if f == nil {
		return failure(token, &invalidResultError{fmt.Errorf("this worker does not serve flow type %q", t.GetFlowType())}, "")
	}
	if d := t.GetAttemptTimeout(); d != nil && d.AsDuration() > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.AsDuration())
		defer cancel()
	}
	st := newHandlerState(f, t)
	st.beat, st.details = beatOf(ctx), t.GetHeartbeatDetails()
	info := infoOf(t)
	log := r.log.With("flow_type", info.FlowType, "flow_id", info.FlowID, "run_id", info.RunID)
	if info.StepExecutionID != "" {
		log = log.With("step_execution_id", info.StepExecutionID, "attempt", info.Attempt)
	}
	if info.RPCName != "" {
		log = log.With("rpc", info.RPCName)
	}
	ctx, log, end := r.tracer.startAttempt(ctx, t, info, log)
	defer func() { end(msg) }()
	tc := &taskContext{Context: ctx, info: info, log: log, st: st}

	res := &dexpb.TaskResult{TaskToken: token}
	var stack string
	var err error
	switch TaskKind(t.GetKind()) {
	case KindWaitFor:
		stack, err = r.runWaitFor(tc, f, t, res)
	case KindExecute:
		stack, err = r.runExecute(tc, f, t, res)
	case KindRPC:
		stack, err = r.runRPC(tc, f, t, res)
	default:
		err = &invalidResultError{fmt.Errorf("unknown task kind %s", t.GetKind())}
	}
	if err == nil {
		err = st.err()
	}
	if err != nil {
		return failure(token, err, stack)
	}
	res.Writes = st.stagedWrites()
	return &dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_TaskResult{TaskResult: res}}
}

func (r *registry) step(f *flowDef, t *dexpb.Task) (*stepDef, error) {
	s := f.steps[t.GetStepType()]
	if s == nil {
		return nil, &invalidResultError{fmt.Errorf("flow %q has no step %q on this worker", f.name, t.GetStepType())}
	}
	return s, nil
}

func (r *registry) runWaitFor(ctx *taskContext, f *flowDef, t *dexpb.Task, res *dexpb.TaskResult) (string, error) {
	s, err := r.step(f, t)
	if err != nil {
		return "", err
	}
	if !s.waits {
		return "", &invalidResultError{fmt.Errorf("flow %q: step %q has no WaitFor on this worker", f.name, s.name)}
	}
	var w Wait
	stack, err := invoke(s.waitForPC, func() (err error) {
		w, err = s.waitFor(ctx, t.GetInput())
		return err
	})
	if err != nil {
		return stack, err
	}
	pw, err := waitToProto(w)
	if err != nil {
		return "", &invalidResultError{fmt.Errorf("flow %q: step %q: WaitFor: %w", f.name, s.name, err)}
	}
	for _, c := range waitConditions(pw) {
		if ch := c.GetChannel(); ch != nil && !declaredIn(f.channels, ch.GetChannel()) {
			return "", &invalidResultError{fmt.Errorf("flow %q: step %q: WaitFor waits on channel %q, which the flow does not declare", f.name, s.name, ch.GetChannel())}
		}
	}
	res.Result = &dexpb.TaskResult_WaitFor{WaitFor: &dexpb.WaitForResult{Wait: pw, Locals: ctx.st.stagedLocals()}}
	return "", nil
}

func waitConditions(w *dexpb.Wait) []*dexpb.WaitCondition {
	switch k := w.GetKind().(type) {
	case *dexpb.Wait_Until:
		return []*dexpb.WaitCondition{k.Until}
	case *dexpb.Wait_AllOf:
		return k.AllOf.GetConditions()
	case *dexpb.Wait_AnyOf:
		return k.AnyOf.GetConditions()
	case *dexpb.Wait_AnyCombinationOf:
		return k.AnyCombinationOf.GetConditions()
	}
	return nil
}

func (r *registry) runExecute(ctx *taskContext, f *flowDef, t *dexpb.Task, res *dexpb.TaskResult) (string, error) {
	s, err := r.step(f, t)
	if err != nil {
		return "", err
	}
	results := Results{pb: t.GetConditionResults(), failed: t.GetWaitForFailed(), failure: t.GetWaitForFailure(), st: ctx.st}
	var d Decision
	stack, err := invoke(s.executePC, func() (err error) {
		d, err = s.execute(ctx, t.GetInput(), results)
		return err
	})
	if err != nil {
		return stack, err
	}
	if d == nil {
		return "", &invalidResultError{fmt.Errorf("flow %q: step %q: Execute returned a nil Decision", f.name, s.name)}
	}
	if err := f.checkMovements(s, d.movements()); err != nil {
		return "", &invalidResultError{err}
	}
	if err := f.checkCancels(cancelsOf(d)); err != nil {
		return "", &invalidResultError{fmt.Errorf("flow %q: step %q: %w", f.name, s.name, err)}
	}
	pd, err := d.decisionProto()
	if err != nil {
		return "", &invalidResultError{fmt.Errorf("flow %q: step %q: %w", f.name, s.name, err)}
	}
	for _, ch := range pd.GetForceCompleteIfChannelsEmpty().GetChannels() {
		if !declaredIn(f.channels, ch) { // a plain channel or a ChannelMap's instance (E33)
			return "", &invalidResultError{fmt.Errorf("flow %q: step %q: ForceCompleteIfChannelsEmpty names channel %q, which the flow does not declare", f.name, s.name, ch)}
		}
	}
	res.Result = &dexpb.TaskResult_Execute{Execute: &dexpb.ExecuteResult{Decision: pd}}
	return "", nil
}

func (r *registry) runRPC(ctx *taskContext, f *flowDef, t *dexpb.Task, res *dexpb.TaskResult) (string, error) {
	rpc := f.rpcs[t.GetRpcName()]
	if rpc == nil {
		return "", &invalidResultError{fmt.Errorf("flow %q has no RPC %q on this worker", f.name, t.GetRpcName())}
	}
	var out *dexpb.EncodedValue
	stack, err := invoke(rpc.fnPC, func() (err error) {
		out, err = rpc.call(ctx, t.GetInput())
		return err
	})
	if err != nil {
		return stack, err
	}
	ctx.st.mu.Lock()
	moves, cancels := ctx.st.moves, ctx.st.cancels
	ctx.st.mu.Unlock()
	if err := f.checkCancels([]Cancel{{steps: cancels}}); err != nil {
		return "", &invalidResultError{fmt.Errorf("RPC %q: %w", rpc.name, err)}
	}
	if err := f.checkMovements(nil, moves); err != nil {
		return "", &invalidResultError{fmt.Errorf("RPC %q: %w", rpc.name, err)}
	}
	pm, err := movementsProto(moves)
	if err != nil {
		return "", &invalidResultError{fmt.Errorf("flow %q: RPC %q: %w", f.name, rpc.name, err)}
	}
	res.Result = &dexpb.TaskResult_Rpc{Rpc: &dexpb.RpcResult{Output: out, Movements: pm, CancelStepTypes: cancels}}
	return "", nil
}

// invoke calls a handler, turning a panic into an error. The stack shows
// the user's code (see stack.go): for a panic, from the frame that
// panicked (taken in the deferred function, while those frames are still
// there); for a returned error, the handler's frame, pc being its entry.
func invoke(pc uintptr, fn func() error) (stack string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &panicError{v: p}
			stack = panicStack()
		}
	}()
	if err = fn(); err != nil {
		stack = handlerFrame(pc)
	}
	return stack, err
}

// failure builds a TaskFailure for err. Invalid UTF-8
// in its texts becomes U+FFFD: protobuf refuses to send such a string, and
// the failure must reach the server.
func failure(token []byte, err error, stack string) *dexpb.PollWorkerTaskRequest {
	f := &dexpb.TaskFailure{
		TaskToken: token,
		ErrorType: strings.ToValidUTF8(errorTypeName(err), "\uFFFD"),
		Message:   strings.ToValidUTF8(err.Error(), "\uFFFD"),
		Stack:     strings.ToValidUTF8(stack, "\uFFFD"),
	}
	var ra *retryAfterError
	if errors.As(err, &ra) {
		f.RetryAfter = durationpb.New(ra.d)
		if ra.stack != "" {
			f.Stack = strings.ToValidUTF8(ra.stack, "\uFFFD")
		}
	}
	if nonRetryable(err) {
		f.NonRetryable = true
		var nr *nonRetryableError
		if errors.As(err, &nr) && nr.stack != "" {
			f.Stack = strings.ToValidUTF8(nr.stack, "\uFFFD")
		}
	}
	return &dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_TaskFailure{TaskFailure: f}}
}

func infoOf(t *dexpb.Task) TaskInfo {
	info := TaskInfo{
		Kind:            TaskKind(t.GetKind()),
		FlowType:        t.GetFlowType(),
		FlowID:          t.GetFlowId(),
		RunID:           t.GetRunId(),
		StepType:        t.GetStepType(),
		StepExecutionID: t.GetStepExecutionId(),
		RPCName:         t.GetRpcName(),
		Attempt:         int(t.GetAttempt()),
		AttemptTimeout:  t.GetAttemptTimeout().AsDuration(),
	}
	if t.GetFirstAttemptTime() != nil {
		info.FirstAttemptTime = t.GetFirstAttemptTime().AsTime()
	}
	return info
}
