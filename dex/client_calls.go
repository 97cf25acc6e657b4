package dex

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// CallOption adjusts one client call.
type CallOption interface{ applyCall(*callOptions) }

// StartOption adjusts StartFlow.
type StartOption interface{ applyStart(*startOptions) }

// PublishOption adjusts Publish.
type PublishOption interface{ applyPublish(*publishOptions) }

// RequestOption is an option of StartFlow, Publish, Reset and
// ContinueAsNew.
type RequestOption interface {
	StartOption
	PublishOption
	ResetOption
	ContinueOption
}

type publishOptions struct {
	requestID string
}

type callOptions struct {
	runID string
	locks []string // InvokeRPC only (WithLocks)
}

type startOptions struct {
	requestID     string
	timeout       time.Duration
	timeoutPolicy FlowTimeoutPolicy
	reuse         IDReusePolicy
	attrs         []AttributeValue
	stepOptions   *StepOptions
	flowOptions   // E34, flowopts.go
}

type runIDOption string

func (o runIDOption) applyCall(c *callOptions) { c.runID = string(o) }

// WithRunID addresses one run of the flow ID; without it a call addresses
// the latest run.
func WithRunID(runID string) CallOption { return runIDOption(runID) }

type startFunc func(*startOptions)

func (f startFunc) applyStart(o *startOptions) { f(o) }

// WithRequestID sets the request ID of StartFlow, Publish, Reset or
// ContinueAsNew. By default each call generates one and reuses it when it
// retries, so a retried call is idempotent; pass your own to make calls
// from several processes or restarts idempotent too, or to retry a call
// that returned an *OutcomeUnknownError. A call with the empty request ID
// is sent at most once.
func WithRequestID(id string) RequestOption { return requestIDOption(id) }

type requestIDOption string

func (o requestIDOption) applyStart(s *startOptions)       { s.requestID = string(o) }
func (o requestIDOption) applyPublish(p *publishOptions)   { p.requestID = string(o) }
func (o requestIDOption) applyReset(r *resetOptions)       { r.requestID = string(o) }
func (o requestIDOption) applyContinue(c *continueOptions) { c.requestID = string(o) }

// WithFlowTimeout bounds the flow execution.
func WithFlowTimeout(d time.Duration, p FlowTimeoutPolicy) StartOption {
	return startFunc(func(o *startOptions) { o.timeout, o.timeoutPolicy = d, p })
}

// WithIDReusePolicy sets the ID reuse policy.
func WithIDReusePolicy(p IDReusePolicy) StartOption {
	return startFunc(func(o *startOptions) { o.reuse = p })
}

// WithAttributes sets attributes before the first step runs.
func WithAttributes(vals ...AttributeValue) StartOption {
	return startFunc(func(o *startOptions) { o.attrs = append(o.attrs, vals...) })
}

// WithStartStepOptions overrides the start step's options for this run.
func WithStartStepOptions(so StepOptions) StartOption {
	return startFunc(func(o *startOptions) { o.stepOptions = &so })
}

func applyCall(opts []CallOption) callOptions {
	var o callOptions
	for _, opt := range opts {
		opt.applyCall(&o)
	}
	return o
}

// Run identifies a started flow execution.
type Run struct {
	FlowID, RunID string
	// AlreadyStarted is true when the request ID matched the latest run, so
	// this call started nothing (an idempotent retry).
	AlreadyStarted bool
}

// StartFlow starts flow with flowID. input goes to the flow's start
// step; its type must be the start step's input type (nil sends the zero
// value), and must be nil for a flow without a start step. It returns once
// the start is durable.
func (c *Client) StartFlow(ctx context.Context, flow *Flow, flowID string, input any, opts ...StartOption) (Run, error) {
	var so startOptions
	for _, o := range opts {
		o.applyStart(&so)
	}
	if so.requestID == "" {
		so.requestID = NewRequestID()
	}
	d, err := flow.compile(false)
	if err != nil {
		return Run{}, err
	}
	req := &dexpb.StartFlowRequest{
		FlowType:          d.name,
		FlowId:            flowID,
		FlowTimeoutPolicy: dexpb.FlowTimeoutPolicy(so.timeoutPolicy),
		IdReusePolicy:     dexpb.IdReusePolicy(so.reuse),
		RequestId:         so.requestID,
	}
	if so.timeout > 0 {
		req.FlowTimeout = durationpb.New(so.timeout)
	}
	c.noteIndexed(so.attrs)
	if req.InitialAttributes, err = attributesProto(so.attrs); err != nil {
		return Run{}, fmt.Errorf("dex: StartFlow: %w", err)
	}
	if req.StartStep, err = startMovement(d, input, so.stepOptions); err != nil {
		return Run{}, fmt.Errorf("dex: StartFlow: %w", err)
	}
	if err := so.apply(d, req); err != nil {
		return Run{}, fmt.Errorf("dex: StartFlow: %w", err)
	}
	var resp *dexpb.StartFlowResponse
	err = c.call(ctx, "StartFlow", flowID, retryable, so.requestID, func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
		resp, err = fc.StartFlow(ctx, req)
		return err
	})
	if err != nil {
		return Run{}, err
	}
	return Run{FlowID: flowID, RunID: resp.GetRunId(), AlreadyStarted: resp.GetAlreadyStarted()}, nil
}

// Start is StartFlow with the input's type checked by the compiler: S is
// the flow's start step and in its input, so an input of another type does
// not compile. A flow whose start step is not S is an error, and nothing
// is sent.
//
//	run, err := dex.Start[Reserve](ctx, c, OrderFlow, "order-42", Order{ID: "42"})
func Start[S StepWithInput[In], In any](ctx context.Context, c *Client, flow *Flow, flowID string, in In, opts ...StartOption) (Run, error) {
	if flow != nil {
		if want := stepNameFor[S](); flow.start != want {
			return Run{}, fmt.Errorf("dex: Start: step %q is not the start step of flow %q (%q): name the flow's start step", want, flow.name, flow.start)
		}
	}
	return c.StartFlow(ctx, flow, flowID, in, opts...)
}

func startMovement(d *flowDef, input any, opts *StepOptions) (*dexpb.Movement, error) {
	if d.start == "" {
		if input != nil {
			return nil, fmt.Errorf("flow %q has no start step, so it takes no input (got %T)", d.name, input)
		}
		return nil, nil
	}
	s := d.steps[d.start]
	if input == nil {
		input = reflect.Zero(s.inputType).Interface()
	} else if t := reflect.TypeOf(input); t != s.inputType && (s.inputType.Kind() != reflect.Interface || !t.AssignableTo(s.inputType)) {
		return nil, fmt.Errorf("flow %q: start step %q takes %s, got %s", d.name, s.name, s.inputType, t)
	}
	ev, err := encodeAny(input)
	if err != nil {
		return nil, err
	}
	m := &dexpb.Movement{StepType: s.name, Input: ev}
	if opts != nil {
		m.Options = opts.proto()
	}
	return m, nil
}

// StopFlow cancels, terminates or fails an active flow execution and
// returns its final status. It is sent at most once.
func (c *Client) StopFlow(ctx context.Context, flowID string, how StopType, reason string, opts ...CallOption) (FlowStatus, error) {
	o := applyCall(opts)
	var resp *dexpb.StopFlowResponse
	err := c.call(ctx, "StopFlow", flowID, once, "", func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
		resp, err = fc.StopFlow(ctx, &dexpb.StopFlowRequest{FlowId: flowID, RunId: o.runID, Type: dexpb.StopType(how), Reason: reason})
		return err
	})
	return FlowStatus(resp.GetStatus()), err
}

// Publish appends msgs to channels of the flow's latest run, atomically and
// in order:
//
//	err := c.Publish(ctx, "order-42", []dex.Message{Approve.Message(true)})
//
// Each call has its own request ID (or the one WithRequestID gives), reused
// when it retries, so a retry never queues the messages twice: a publish
// whose request ID the flow ID already accepted queues nothing, also in a
// later run (a retry whose first response was lost may arrive after the run
// that accepted it closed and a new one started). The server remembers the
// last 1,000 request IDs per flow ID.
func (c *Client) Publish(ctx context.Context, flowID string, msgs []Message, opts ...PublishOption) error {
	po := publishOptions{requestID: NewRequestID()}
	for _, o := range opts {
		o.applyPublish(&po)
	}
	requestID := po.requestID
	req := &dexpb.PublishToChannelRequest{FlowId: flowID, RequestId: requestID}
	for _, m := range msgs {
		if m.err != nil {
			return fmt.Errorf("dex: Publish to channel %q: %w", m.channel, m.err)
		}
		if n := len(req.Publishes); n > 0 && req.Publishes[n-1].GetChannel() == m.channel {
			req.Publishes[n-1].Values = append(req.Publishes[n-1].Values, m.ev)
			continue
		}
		req.Publishes = append(req.Publishes, &dexpb.ChannelPublish{Channel: m.channel, Values: []*dexpb.EncodedValue{m.ev}})
	}
	kind := retryable
	if requestID == "" {
		kind = once
	}
	return c.call(ctx, "Publish", flowID, kind, requestID, func(ctx context.Context, fc dexpb.FlowServiceClient) error {
		_, err := fc.PublishToChannel(ctx, req)
		return err
	})
}

// GetAttribute reads one attribute of a flow execution, active or closed.
// An attribute without a value reads as T's zero value; LookupAttribute
// tells the two apart.
func GetAttribute[T any](ctx context.Context, c *Client, flowID string, a Attribute[T], opts ...CallOption) (T, error) {
	v, _, err := LookupAttribute(ctx, c, flowID, a, opts...)
	return v, err
}

// LookupAttribute reads one attribute of a flow execution, active or
// closed, and reports whether it has a value: ok is false (and v T's zero
// value) for an attribute never set, which GetAttribute cannot tell from
// one set to the zero value.
func LookupAttribute[T any](ctx context.Context, c *Client, flowID string, a Attribute[T], opts ...CallOption) (v T, ok bool, err error) {
	var zero T
	vals, err := c.GetAttributes(ctx, flowID, []string{a.name}, opts...)
	if err != nil {
		return zero, false, err
	}
	ev, ok := vals[a.name]
	if !ok || !ev.IsSet() {
		return zero, false, nil
	}
	out, err := decodeValue[T](ev.ev)
	if err != nil {
		return zero, true, fmt.Errorf("dex: attribute %q: %w", a.name, err)
	}
	return out, true, nil
}

// GetAttributes reads attributes by name (all when names is empty); names
// without a value are missing from the map.
func (c *Client) GetAttributes(ctx context.Context, flowID string, names []string, opts ...CallOption) (map[string]Value, error) {
	o := applyCall(opts)
	var resp *dexpb.GetAttributesResponse
	err := c.call(ctx, "GetAttributes", flowID, retryable, "", func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
		resp, err = fc.GetAttributes(ctx, &dexpb.GetAttributesRequest{FlowId: flowID, RunId: o.runID, Names: names})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]Value, len(resp.GetAttributes()))
	for _, a := range resp.GetAttributes() {
		out[a.GetName()] = valueOf(a.GetValue())
	}
	return out, nil
}

// SetAttributes writes attributes of the flow's latest run atomically:
//
//	err := c.SetAttributes(ctx, "order-42", Status.Value("paused"))
//
// It is retried on UNAVAILABLE: writing the same values again leaves the
// same state.
func (c *Client) SetAttributes(ctx context.Context, flowID string, vals ...AttributeValue) error {
	c.noteIndexed(vals)
	attrs, err := attributesProto(vals)
	if err != nil {
		return fmt.Errorf("dex: SetAttributes: %w", err)
	}
	return c.call(ctx, "SetAttributes", flowID, retryable, "", func(ctx context.Context, fc dexpb.FlowServiceClient) error {
		_, err := fc.SetAttributes(ctx, &dexpb.SetAttributesRequest{FlowId: flowID, Attributes: attrs})
		return err
	})
}

// InvokeRPC calls RPC r of an active flow execution and returns its output.
// WithLocks makes the call take attribute locks first (E30); a held lock
// fails it at once with an error matching ErrLockHeld.
// The worker's error comes back as an error matching
// ErrFailedPrecondition that holds a *WorkerError. It is sent at most once:
// an RPC is not idempotent. The worker's attempt is bounded by ctx's
// deadline when it has one. The call commits at most once: when ctx ends
// first, the worker's result still commits (once) if it reaches the
// server process that sent the task, and is refused after a failover.
func InvokeRPC[I, O any](ctx context.Context, c *Client, flowID string, r RPC[I, O], in I, opts ...CallOption) (O, error) {
	var zero O
	o := applyCall(opts)
	ev, err := encodeValue(in)
	if err != nil {
		return zero, fmt.Errorf("dex: InvokeRPC %q: %w", r.name, err)
	}
	req := &dexpb.InvokeRPCRequest{FlowId: flowID, RunId: o.runID, RpcName: r.name, Input: ev, Locks: o.locks}
	if dl, ok := ctx.Deadline(); ok {
		req.Timeout = durationpb.New(time.Until(dl))
	}
	var resp *dexpb.InvokeRPCResponse
	err = c.call(ctx, "InvokeRPC", flowID, once, "", func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
		resp, err = fc.InvokeRPC(ctx, req)
		return err
	})
	if err != nil {
		return zero, err
	}
	out, err := decodeValue[O](resp.GetOutput())
	if err != nil {
		return zero, fmt.Errorf("dex: InvokeRPC %q: %w", r.name, err)
	}
	return out, nil
}

// TimerRef selects a timer of a stored Wait: TimerID or TimerIndex.
type TimerRef struct {
	id    string
	index int
}

// TimerID selects the timer with this condition ID.
func TimerID(id string) TimerRef { return TimerRef{id: id} }

// TimerIndex selects the timer with this index among the Wait's timers
// (from 0).
func TimerIndex(i int) TimerRef { return TimerRef{index: i} }

// SkipTimer fires a pending timer of a step execution's Wait now. It
// is sent at most once.
func (c *Client) SkipTimer(ctx context.Context, flowID, stepExecutionID string, timer TimerRef, opts ...CallOption) error {
	o := applyCall(opts)
	req := &dexpb.SkipTimerRequest{FlowId: flowID, RunId: o.runID, StepExecutionId: stepExecutionID}
	if timer.id != "" {
		req.Timer = &dexpb.SkipTimerRequest_ConditionId{ConditionId: timer.id}
	} else {
		req.Timer = &dexpb.SkipTimerRequest_TimerIndex{TimerIndex: uint32(timer.index)}
	}
	return c.call(ctx, "SkipTimer", flowID, once, "", func(ctx context.Context, fc dexpb.FlowServiceClient) error {
		_, err := fc.SkipTimer(ctx, req)
		return err
	})
}

// WaitForFlow waits until the flow execution closes and returns its result.
// It polls again whenever the server's long poll expires
// (DEADLINE_EXCEEDED), until ctx ends. A failed flow is a result, not an
// error: check FlowResult.Status or Err.
func (c *Client) WaitForFlow(ctx context.Context, flowID string, opts ...CallOption) (*FlowResult, error) {
	o := applyCall(opts)
	for {
		var resp *dexpb.WaitForFlowResponse
		err := c.call(ctx, "WaitForFlow", flowID, retryable, "", func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
			resp, err = fc.WaitForFlow(ctx, &dexpb.WaitForFlowRequest{FlowId: flowID, RunId: o.runID})
			return err
		})
		if err == nil {
			return flowResultOf(resp.GetResult()), nil
		}
		if ctx.Err() != nil {
			return nil, ctxError(ctx, "WaitForFlow", nil)
		}
		if status.Code(err) != codes.DeadlineExceeded {
			return nil, err
		}
	}
}

// GetFlowSummary returns the flow execution's identity, type, status and
// times.
func (c *Client) GetFlowSummary(ctx context.Context, flowID string, opts ...CallOption) (*FlowSummary, error) {
	o := applyCall(opts)
	var resp *dexpb.GetFlowSummaryResponse
	err := c.call(ctx, "GetFlowSummary", flowID, retryable, "", func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
		resp, err = fc.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: flowID, RunId: o.runID})
		return err
	})
	if err != nil {
		return nil, err
	}
	return summaryOf(resp.GetSummary()), nil
}

// GetFlowState returns the flow execution's live state: its active
// step executions with their phase, attempt and last failure, its queued
// messages, attributes and outputs. dexraw.FlowState returns every field
// the API has (Waits, timers, options, pending tasks).
func (c *Client) GetFlowState(ctx context.Context, flowID string, opts ...CallOption) (*FlowState, error) {
	p, err := c.flowState(ctx, flowID, opts)
	if err != nil {
		return nil, err
	}
	return flowStateOf(p), nil
}

func (c *Client) flowState(ctx context.Context, flowID string, opts []CallOption) (*dexpb.FlowState, error) {
	o := applyCall(opts)
	var resp *dexpb.GetFlowStateResponse
	err := c.call(ctx, "GetFlowState", flowID, retryable, "", func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
		resp, err = fc.GetFlowState(ctx, &dexpb.GetFlowStateRequest{FlowId: flowID, RunId: o.runID})
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.GetState(), nil
}

// HistoryQuery selects a page of history.
type HistoryQuery struct {
	// PageSize is the most events (0 means the server's default, 100).
	PageSize int
	// PageToken continues a previous page.
	PageToken string
	// FirstEventID starts at this event when PageToken is empty.
	FirstEventID uint64
}

// HistoryPage is a page of semantic history events, oldest first.
type HistoryPage struct {
	RunID         string
	Events        []HistoryEvent
	NextPageToken string // empty on the last page
}

// GetFlowHistory returns a page of the flow execution's history.
// dexraw.History returns every field the API has.
func (c *Client) GetFlowHistory(ctx context.Context, flowID string, q HistoryQuery, opts ...CallOption) (*HistoryPage, error) {
	resp, err := c.history(ctx, flowID, q, opts)
	if err != nil {
		return nil, err
	}
	page := &HistoryPage{RunID: resp.GetRunId(), NextPageToken: resp.GetNextPageToken()}
	for _, e := range resp.GetEvents() {
		page.Events = append(page.Events, historyEventOf(e))
	}
	return page, nil
}

func (c *Client) history(ctx context.Context, flowID string, q HistoryQuery, opts []CallOption) (*dexpb.GetHistoryEventsResponse, error) {
	o := applyCall(opts)
	var resp *dexpb.GetHistoryEventsResponse
	err := c.call(ctx, "GetFlowHistory", flowID, retryable, "", func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
		resp, err = fc.GetHistoryEvents(ctx, &dexpb.GetHistoryEventsRequest{
			FlowId: flowID, RunId: o.runID, PageSize: uint32(max(q.PageSize, 0)),
			PageToken: q.PageToken, FirstEventId: q.FirstEventID,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// FlowQuery filters ListFlows; zero fields match everything.
type FlowQuery struct {
	FlowType string
	Statuses []FlowStatus
	// StartedFrom (inclusive) and StartedTo (exclusive) bound the start
	// time.
	StartedFrom, StartedTo time.Time
	PageSize               int
	PageToken              string
}

// FlowPage is a page of flow executions, newest start first.
type FlowPage struct {
	Flows         []*FlowSummary
	NextPageToken string // empty on the last page
}

// ListFlows lists flow executions.
func (c *Client) ListFlows(ctx context.Context, q FlowQuery) (*FlowPage, error) {
	req := &dexpb.ListFlowsRequest{
		FlowType: q.FlowType, Statuses: statusesProto(q.Statuses),
		PageSize: uint32(max(q.PageSize, 0)), PageToken: q.PageToken,
	}
	if !q.StartedFrom.IsZero() {
		req.StartTimeFrom = timestamppb.New(q.StartedFrom)
	}
	if !q.StartedTo.IsZero() {
		req.StartTimeTo = timestamppb.New(q.StartedTo)
	}
	var resp *dexpb.ListFlowsResponse
	err := c.call(ctx, "ListFlows", "", retryable, "", func(ctx context.Context, fc dexpb.FlowServiceClient) (err error) {
		resp, err = fc.ListFlows(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := &FlowPage{NextPageToken: resp.GetNextPageToken()}
	for _, s := range resp.GetFlows() {
		out.Flows = append(out.Flows, summaryOf(s))
	}
	return out, nil
}

func statusesProto(ss []FlowStatus) []dexpb.FlowStatus {
	if ss == nil {
		return nil
	}
	out := make([]dexpb.FlowStatus, len(ss))
	for i, s := range ss {
		out[i] = dexpb.FlowStatus(s)
	}
	return out
}
