// Package dex is the Go SDK of Dex-ZD: define flows of typed steps, serve
// them from a Worker, and start, drive and read them with a Client. It
// depends only on the generated API (api/dexpb), gRPC and protobuf, but its
// exported API is its own types: the API's protobuf messages are reachable
// only through package dex/dexraw, the escape hatch for advanced uses
// (tools that show a flow's full state, tests that hand-make Tasks).
//
// # Defining a flow
//
// A step is a Go type that embeds dex.Step[T], where T is its input, and has
// an Execute method. A step may also have a WaitFor, which returns the
// conditions (timers, channel messages) to wait for; its Execute then also
// receives the Wait's Results:
//
//	type Reserve struct{ dex.Step[Order] }
//
//	func (Reserve) Execute(ctx dex.Context, o Order) (dex.Decision, error) {
//		Status.Set(ctx, "reserved")
//		return dex.Move(dex.To[AwaitApproval](o)), nil // the compiler checks o's type
//	}
//
//	type AwaitApproval struct{ dex.Step[Order] }
//
//	func (AwaitApproval) WaitFor(ctx dex.Context, o Order) (dex.Wait, error) {
//		return dex.AnyOf(Approve.ForOne(), dex.Timer(24*time.Hour)), nil
//	}
//
//	func (AwaitApproval) Execute(ctx dex.Context, o Order, r dex.Results) (dex.Decision, error) {
//		if ok, got := Approve.Received(r); got && ok {
//			return dex.Move(dex.To[Charge](o)), nil
//		}
//		return dex.ForceFail("not approved in time"), nil
//	}
//
// Attributes (DefineAttribute), channels (DefineChannel) and RPCs
// (DefineRPC) are typed package-level values; NewFlow lists them with the
// steps. Handlers stage attribute writes, channel publishes and (for RPCs)
// movements on their Context; the worker sends them with the handler's
// result, and the server commits them atomically with it. Nothing in a
// handler blocks on the server.
//
// Subflows. A WaitFor may also wait for child flows: declare a flow as a
// subflow with its start step, input and output types, and start children
// from a WaitFor, alone or with timers and channels under Until, AllOf and
// AnyOf. Each child is a full flow with its own history, under a flow ID
// the server derives (SubFlow:<parentFlowId>-<stepExecutionId>-<index>),
// and its summary names its parent (FlowSummary.ParentFlowID):
//
//	var Payment = dex.SubFlow[Charge, Order, Receipt](PaymentFlow)
//
//	func (PayAll) WaitFor(ctx dex.Context, os []Order) (dex.Wait, error) {
//		conds := make([]dex.Condition, len(os))
//		for i, o := range os {
//			conds[i] = Payment.Start(o)
//		}
//		return dex.AllOf(conds...), nil
//	}
//
//	func (PayAll) Execute(ctx dex.Context, os []Order, r dex.Results) (dex.Decision, error) {
//		for _, res := range Payment.Results(r) { // in declaration order
//			receipt, err := res.Output() // a Receipt, checked by the compiler
//			...
//		}
//	}
//
// Execute gets each child's FlowResult: final once the child closed (a
// failed child is a result too: res.Status, res.Err()), else, for a child
// that did not win an AnyOf, a snapshot with Status StatusRunning. Losers
// keep running, and so do children when their parent completes: stop one
// with Client.StopFlow and its ID (res.FlowID). WithReusePolicy says what
// a condition does when its derived ID already has a run (the parent's flow
// ID was reused): SubFlowRestartIfPreviousExitsAbnormally (the default),
// SubFlowAttach or SubFlowAlwaysRestart. A child's result reaches its
// parent durably, across restarts and failovers.
//
// The worker validates every flow when it is created (NewWorker): a step
// without a matching Execute, duplicate names, a recovery step or a MovesTo
// target the flow does not declare, invalid options. Each error names the
// flow and the step.
//
// # Cancelling steps
//
// A decision may cancel other step executions of its flow (E29): AndCancel
// attaches CancelSteps (every queued, waiting or running execution of the
// types, flow-wide) or CancelSiblingSteps (only those the deciding
// execution's own parent scheduled) to any decision. The winner of a race
// ends the losers:
//
//	func (Quote) Execute(ctx dex.Context, q Request) (dex.Decision, error) {
//		price, err := quote(ctx, q)
//		if err != nil {
//			return nil, err
//		}
//		return dex.AndCancel(dex.GracefulComplete(price), dex.CancelSiblingSteps(dex.Ref[Quote]())), nil
//	}
//
// The selection is taken when the decision commits; the executions it
// moves to are never selected; a type given to both is cancelled
// flow-wide. A cancelled execution never proceeds: its late result and
// writes are discarded, its failure policy and recovery step do not run, a
// waiting one is removed with its timers, and a running handler's context
// ends with context.Cause ErrTaskCanceled (so does a StopFlow's or a
// forced close's). When the cancelled branches were the last and a branch
// completed gracefully, the flow completes. History has a StepCanceled
// event per execution (CanceledBy, SiblingsOnly). An RPC cancels with
// ScheduleCancel(ctx, dex.CancelSteps(...)), flow-wide only, before its
// movements.
//
// # Heartbeats
//
// MethodOptions.HeartbeatTimeout fails an attempt whose worker sent no
// heartbeat for that long (error kind FailureHeartbeatTimeout) and retries
// it by policy (E38): a long attempt whose worker crashed or was cut off
// is retried after the heartbeat timeout, not after its attempt timeout.
// The worker heartbeats every running attempt itself, at least three
// times per timeout, so a handler needs no call to stay alive; a handler
// stuck inside a live worker is bounded by AttemptTimeout. A handler
// reports progress with ctx.Heartbeat(details); the next attempt of the
// same handler reads the last details the server received:
//
//	func (Import) Options() dex.StepOptions {
//		return dex.StepOptions{Execute: dex.MethodOptions{AttemptTimeout: time.Hour, HeartbeatTimeout: 30 * time.Second}}
//	}
//
//	func (Import) Execute(ctx dex.Context, f File) (dex.Decision, error) {
//		done, _, err := dex.HeartbeatDetails[int](ctx) // rows imported by an earlier attempt
//		if err != nil {
//			return nil, err
//		}
//		for i := done; i < f.Rows; i++ {
//			if err := importRow(ctx, f, i); err != nil {
//				return nil, err
//			}
//			ctx.Heartbeat(i + 1)
//		}
//		return dex.GracefulComplete(f.Rows), nil
//	}
//
// Details are sent with the next heartbeat (the latest only) and logged by
// the server when they change, so they cost one log write per heartbeat
// interval at most; keep them small.
//
// # Combinations, conditional close, locals and events
//
// E32. AnyCombinationOf(groups...) waits for every condition of one group
// (each group an AllOf or a single condition; every condition has an ID,
// and a condition may be in several groups under the same ID); groups are
// tried in order, and Results.WinningGroup tells which one held. Channel
// conditions consume nothing until their whole group can hold; several
// conditions of the winning group on one channel reserve their minimum
// counts first, then share the rest in declaration order, and
// ChannelCondition.Messages returns each one's share.
// ForceCompleteIfChannelsEmpty(output, channels, fallback...) completes
// the flow if every channel is empty when the decision commits, otherwise
// follows the fallback movements; the server decides it atomically, so a
// concurrent publish is either refused (the flow closed) or seen by the
// fallback. A WaitFor stages step-execution locals with ctx.SetLocal (or a
// typed DefineLocal key) that every Execute attempt of the same step
// execution reads with ctx.Local; they are durable, at most 64 keys and
// 64 KiB. ctx.RecordEvent(name, value) from any handler adds a history
// event (EventUser) when the handler's result commits:
//
//	var Ticket = dex.DefineLocal[string]("ticket")
//
//	func (Gate) WaitFor(ctx dex.Context, in Job) (dex.Wait, error) {
//		Ticket.Set(ctx, in.Ticket)
//		ctx.RecordEvent("gate-waiting", in.Ticket)
//		approve := Approve.ForOne().WithID("approve")
//		return dex.AnyCombinationOf(
//			dex.AllOf(approve, Review.ForOne().WithID("review")),
//			dex.AllOf(approve, dex.Timer(time.Hour).WithID("late")),
//		), nil
//	}
//
//	func (Gate) Execute(ctx dex.Context, in Job, r dex.Results) (dex.Decision, error) {
//		ticket, _, err := Ticket.Get(ctx)
//		if err != nil {
//			return nil, err
//		}
//		return dex.ForceCompleteIfChannelsEmpty(ticket, []dex.ChannelDef{Review}, dex.To[Drain](in)), nil
//	}
//
// # How the SDK maps onto the API
//
// Values. Every user value (inputs, outputs, attributes, messages, RPC
// inputs and outputs) is an EncodedValue with encoding "json" (encoding/json
// of the Go value) and type the Go type as reflect prints it
// ("flows.Order"). A nil output or input leaves the EncodedValue unset. The
// SDK decodes "json" values only; an unset value decodes to the zero value.
// With a Codec (ClientOptions.Codec, WorkerOptions.Codec; see codec.go),
// every such value is encoded by the codec before it is sent and decoded
// after it is received, for example encrypted end to end by an
// AESGCMCodec (encoding "aes256-gcm").
//
// Steps. The step type is the Go type's name without package or pointer
// ("Reserve"). Hello declares, per flow type: its steps with has_wait_for
// and their Options() (StepOptions), the RPC names, attribute names, channel
// names and the flow's Defaults (default_step_options). StepOptions map
// field by field to the proto; zero fields stay unset so they inherit;
// StepOptions.Recovery sets execute_recovery_step_type and, unless
// ExecuteFailure says otherwise, EXECUTE_FAILURE_POLICY_PROCEED_TO_RECOVERY_STEP.
//
// Waits. Until, AllOf, AnyOf and AnyCombinationOf map to
// Wait.until/all_of/any_of/any_combination_of (the groups as lists of
// condition IDs, each condition listed once); a nil Wait
// is the empty Wait (satisfied at once). Timer(d) is a TimerCondition with
// duration d; Channel.ForOne/ForN/AtLeast/AtMost/AtLeastAtMost map to the
// ChannelBound values. WithID sets WaitCondition.id (unique within a Wait).
// In Results, timers are looked up by condition_id (Results.TimerFired and
// TimerSkipped with TimerID) or by timer_index (with TimerIndex, from 0
// counting timers only), as SkipTimer selects them; messages by channel
// name (Channel.Received, Channel.Messages); ChannelCondition.Satisfied by
// condition_id when the condition has one, else by channel name.
// Results.WaitForError reports Task.wait_for_failed with
// Task.wait_for_failure.
//
// Decisions. Move maps to StepDecision.movements (To gives one
// Movement; WithOptions and SkipWaitFor set its options and skip_wait_for);
// GracefulComplete, ForceComplete, ForceFail and DeadEnd to the close
// decisions. An RPC's Schedule calls become RpcResult.movements.
//
// Worker protocol. Run opens PollWorkerTask, sends Hello (worker ID,
// flow type declarations, max_concurrent_tasks, sdk_version
// "dex-go/<Version>") and expects Welcome. A declaration gives each
// attribute's, channel's and step input's value type: encoding "json", the Go type's
// name, and the JSON shape that decodes as it (shape.go says what a shape
// leaves out), which the server checks clients' values against. Each Task runs in its own
// goroutine, at most MaxConcurrentTasks at once, with a context that ends at
// the task's attempt_timeout. The answer is a TaskResult (result + staged
// writes) or a TaskFailure (error_type, message, stack, retry_after). The
// task token is opaque: the SDK copies it from the Task into the answer, the
// Heartbeat (running_task_tokens, every Welcome.heartbeat_interval while
// tasks run, and at least three times per Task.heartbeat_timeout; details
// carry what ctx.Heartbeat reported since the last one) and matches
// TaskAcks and TaskCancels by it. A TaskCancel ends that handler's
// context (cause ErrTaskCanceled); its answer is then refused CANCELED. An answer stays in the worker's
// outbox until its TaskAck arrives: when a stream breaks, unacknowledged
// answers (including those of tasks that were running) are sent again on
// the next stream, and the server refuses stale ones; an RPC result
// the server already committed is acknowledged ACCEPTED and commits
// nothing again (each RPC call commits at most once). Pings are
// answered with Pongs; a stream silent for three ping intervals is
// reconnected, and so is one whose server stops answering (see Unresponsive
// servers below). After a Drain the worker keeps sending results until the
// server closes the stream, then reconnects. Reconnects use exponential
// backoff with jitter (100 ms to 500 ms by default), cut short when the
// connection to use comes up again, and move to the next address.
//
// Errors. A handler's error becomes a TaskFailure: message err.Error(); type
// the ErrorType() of an ErrorTyper in the chain, else the Go type of the
// first error in the Unwrap chain that is not a plain fmt.Errorf/errors.New
// wrapper (for example "*payments.DeclinedError"); stack the user's frames
// only, a "function(...)" line and a tab-indented "file:line" line per
// frame, down to the handler, starting where RetryAfter or NonRetryable
// was called, else, for a panic, at the frame that panicked (type
// "dex.Panic"), else, for an ordinary returned error (which records no
// stack, and whose frames have returned by the time the SDK sees it), at
// the handler's own frame, its declaration marked "(declared here;
// returned the error)". RetryAfter(d, err) sets retry_after. The
// SDK's own failures have types
// "dex.DecodeError", "dex.EncodeError", "dex.InvalidResult" (a result that
// breaks the flow's declaration, for example a movement to an undeclared
// step or a write to an undeclared attribute) and "dex.WorkerStopping".
// NonRetryable(err), DecodeError, EncodeError and InvalidResult set the
// failure's non_retryable: the step's failure policy applies at once,
// whatever attempts its retry policy still allows.
//
// The worker logs each failed attempt once (fields flow_type, flow_id,
// step_execution_id, kind, attempt, error_type, error; no stack, which goes
// to the server): a WARN while the server will retry it, an ERROR when it
// was the step's last, because it is non-retryable or the retries are
// exhausted and the step's failure policy applies. The Task says what the
// retry policy allows (max_attempts, retry_deadline, retry_delay): a
// failure is the last when the attempt is the max_attempts-th, or when
// its retry (retry_delay, or the failure's retry_after, from now) would
// start after retry_deadline; for the deadline the worker's clock stands in
// for the server's, so within clock skew of it the two may disagree. An
// RPC handler's error is a WARN: its caller gets it.
//
// Client. Calls go to the address that last answered and move to the
// next on UNAVAILABLE, or when the server stops answering. Reads,
// WaitForFlow, SetAttributes, and StartFlow and Publish (with a request ID
// generated per call and reused on every retry; a request ID lands at most
// once per flow ID, also when the retry reaches a new run that replaced
// the one that accepted it), Reset and ContinueAsNew (with a request ID
// per call: a retry of one that was applied answers its new run) are
// retried with backoff (50 ms to 500 ms by
// default), or after the retry hint an UNAVAILABLE carries (a server
// stepping down asks for 50 ms, a standby for 100 ms, so a call lands soon
// after the new active serves); InvokeRPC, StopFlow and SkipTimer are sent at most once, after
// the address has answered a call or its health service reported
// "dex.FlowService" SERVING. A call that changes state and ends without a
// definitive answer after it was sent (the server stopped answering, the
// connection broke, UNAVAILABLE, or the context ended) returns an
// *OutcomeUnknownError (errors.Is(err, ErrOutcomeUnknown)): a call sent at
// most once at once, a call with a request ID only when its retries give
// up, naming the request ID to retry with (WithRequestID).
// WaitForFlow polls again after each DEADLINE_EXCEEDED until its context
// ends.
//
// Unresponsive servers. A server that is frozen (SIGSTOP, a hung host) or
// cut off by the network accepts connections and requests in its kernel
// and answers nothing, so neither UNAVAILABLE nor a closed connection ever
// comes. Every attempt of a call, and every worker stream, is therefore
// guarded by UnresponsiveTimeout (ClientOptions, WorkerOptions; default
// DefaultUnresponsiveTimeout, 5 s): after half of it without any answer
// from the server on that connection, the SDK sends a health check on the
// same connection, and when that gets no answer within the other half it
// abandons the attempt (UNAVAILABLE, "server unresponsive") and moves to
// the next address. While the frozen server stays silent, the SDK does not
// go back to it when the other address refuses (a standby about to take
// over); it checks it in the background and returns once it answers. A
// server that answers the check is alive, so slow writes and long waits
// (WaitForFlow's long poll, InvokeRPC, a quiet worker stream) are never cut
// off; concurrent calls share the checks, and a busy connection needs
// none. The bound is meant to be shorter than the server's lease.duration
// + 1 s (11 s by default), the earliest a standby may take over from a
// frozen active: then the SDK has moved before the new active serves. The
// default Dialer adds HTTP/2 keepalive (a PING after KeepaliveTime of
// silence, the connection closed when it is not acknowledged within the
// bound; the server tolerates pings every 5 s), cuts off a connection
// attempt after the bound (a frozen server never completes the HTTP/2
// handshake), and reconnects with a backoff of 50 ms growing to 500 ms, so
// that a server that restarts in a few hundred milliseconds is answering
// again through the client within about half a second (a retry waits for
// the reconnection rather than a full retry backoff).
//
// # Flow-level options
//
// Three start options act on the whole flow (E34); each maps onto a
// StartFlowRequest field:
//
//	run, err := dex.Start[Reserve](ctx, c, OrderFlow, "order-42", order,
//		dex.WithStartDelay(time.Hour),
//		dex.WithFlowRetry(dex.RetryPolicy{InitialInterval: time.Minute, MaximumAttempts: 3}),
//		dex.WithTimeoutHandler(24*time.Hour, dex.Ref[Escalate](), 5*time.Minute))
//
// WithStartDelay (start_delay) creates the flow at once and runs its start
// step after the delay, durably; the flow timeout counts from then.
// WithFlowRetry (retry_policy) starts a new run of the same flow ID
// ("<first run ID>.retry-<n>", same input, attributes and options, its
// start step delayed by the backoff) when a run fails by itself: a step
// out of retries, ForceFail, a FAIL flow timeout, a timeout handler that
// fails or misses its deadline; never after StopFlow or a CANCEL timeout.
// MaximumAttempts counts the runs. The retry's FlowStarted history event
// carries RetryAttempt and RetriedRunID; the failed run's
// FlowState.RetryRunID names its retry. WaitForFlow without WithRunID
// follows the retries to the last run. WithTimeoutHandler (flow_timeout,
// FLOW_TIMEOUT_POLICY_HANDLER, timeout_handler) names a step of the flow:
// at the timeout the active steps end and the handler runs its Execute
// with a zero input; unless the flow closes within the deadline (0: one
// minute) it fails with FLOW_TIMEOUT. StartFlow refuses a handler the flow
// does not declare before sending anything.
//
// # Reset
//
// Client.Reset makes a new run of a flow ID from a point of its latest run
// (named by its exact run ID) and returns the new run's ID (E37):
//
//	newRun, err := c.Reset(ctx, "order-42", runID, dex.ResetToStepType(dex.Ref[Charge]()),
//		dex.WithResetReason("charge bug fixed in v2"))
//
// The points (FlowService.ResetFlow, ResetPoint) are ResetToBeginning,
// ResetToStepType, ResetToStepExecution (before its WaitFor),
// ResetToExecute (before its Execute; its WaitFor returned no wait or
// timers only) and ResetToTime (the last point at or before a time where
// steps were created). The new run starts with the attributes, the step
// executions (again from their WaitFor, same IDs and inputs) and the
// unconsumed messages of the point; the client writes after the point
// (SetAttributes, Publish, an RPC's writes) are re-applied unless
// SkipReapply. The old run keeps its history (FlowState.ResetRunID links
// forward; a running one is TERMINATED); the new run's FlowStarted event
// links back (ResetFromRunID, ResetReason) and so does its
// FlowState.ResetFromRunID. WaitForFlow without WithRunID follows to the
// new run. A run that is not the latest, or a point its history does not
// have, is ErrFailedPrecondition. Reset is idempotent by request ID (one
// per call, or WithRequestID's), retried on UNAVAILABLE and lost replies:
// a reset of runID already applied with the request ID returns its new
// run and resets nothing.
// # Continue-as-new
//
// A long-lived flow keeps its history bounded by continuing as a new run
// of the same flow ID (E37). A step asks for it with its decision:
//
//	func (BillMonth) Execute(ctx dex.Context, s Subscription, res dex.Results) (dex.Decision, error) {
//		// ... bill the month ...
//		return dex.ContinueAsNew(dex.Move(dex.To[BillMonth](s))), nil
//	}
//
// ContinueAsNew wraps a Move or a DeadEnd (StepDecision.continue_as_new).
// The server does the same by itself when a run's history reaches
// limits.continueAsNewHistoryEvents (default 10,000 events), and
// Client.ContinueAsNew asks for the exact latest run (idempotent by
// request ID as Reset is: a retry answers the new run). The new run,
// "<first run ID>.continued-<n>", takes over the queued and waiting step
// executions (waits, satisfied conditions, taken messages), unconsumed
// messages, attributes, outputs, step counters (execution IDs go on) and
// the flow timeout's deadline; attempts running at the switch deliver
// their results to the new run, once. The old run is
// StatusContinuedAsNew and FlowState.ContinuedRunID names the new one;
// WaitForFlow without WithRunID and GetFlowState follow to the latest run.
// examples/flows/subscription.go bills a subscription monthly, one run
// per month.
//
// # Attribute locks
//
// A handler that reads an attribute and writes it back races every other
// handler that does the same. Locks serialise them (E30): a step method
// names its lock set in MethodOptions.Locks, an RPC call per call with
// WithLocks.
//
//	var Count = dex.DefineAttribute[int]("count")
//
//	func (Tally) Options() dex.StepOptions {
//		return dex.StepOptions{Execute: dex.MethodOptions{Locks: []dex.AttributeDef{Count}}}
//	}
//
//	n, err := dex.InvokeRPC(ctx, c, "counter-1", Add, 1, dex.WithLocks(Count))
//	if errors.Is(err, dex.ErrLockHeld) { /* nothing ran: call again */ }
//
// The server hands the task out only while it holds every lock of the
// set, so the handler reads the attributes under the locks, and releases
// them when the result commits, the handler fails or its attempt times
// out. A step waits for its locks (its attempt is not consumed; waiting
// attempts take a lock in the order they became due, before any RPC); an
// RPC that cannot take them at once fails with ErrLockHeld (ABORTED,
// naming the lock), and a result that arrives after the call's deadline is
// refused. A takeover releases the locks of the old process's attempts and
// calls. A method with locks is always DurabilitySync. Locks are
// cooperative: SetAttributes and handlers without locks are not held back.
// The worker refuses (NewWorker) a lock on an attribute the flow does not
// declare.
//
// # Long polls on progress
//
// Client.WaitForStepCompletion(ctx, flowID, dex.Ref[Ship](), n) returns
// once n executions of the step type have finished (completed, ended for a
// recovery step, or cancelled when the run closed); dex.WaitForAttribute(ctx,
// c, flowID, Status, dex.Equals("shipped")) once the attribute meets the
// condition (dex.Exists or dex.Equals; Equals compares the encoded JSON,
// so it needs a deterministic Codec). Both poll again after each server
// long poll and after a failover, like WaitForFlow, until ctx ends, and
// fail with ErrFailedPrecondition when the run closed without meeting
// them. Their waits count against the server's limits.maxFlowWaiters with
// WaitForFlow's.

// # Search by indexed attributes
//
// An attribute declared with Indexed is searchable (E36): the server keeps
// an index of its values, maintained with the writes, and Client.Search
// finds flow runs (latest and older) with a small SQL-like filter on the
// indexed keys and the built-in fields FlowId, RunId, FlowType, Status,
// StartTime, CloseTime, ActiveStepTypes and ParentFlowId:
//
//	var Status = dex.DefineAttribute[string]("status", dex.Indexed(dex.IndexKey("OrderStatus")))
//	var Cents = dex.DefineAttribute[int]("cents", dex.Indexed())
//
//	for f, err := range client.Search(ctx, "FlowType = 'order' AND OrderStatus = 'charged' AND cents >= 1000 ORDER BY StartTime DESC", 0) {
//		if err != nil {
//			return err
//		}
//		cents, _, _ := dex.SearchValue(f, Cents)
//		fmt.Println(f.FlowID, f.Status, cents)
//	}
//
// The index type comes from the Go type (string KEYWORD, []string
// KEYWORD_ARRAY, integers INT, floats DOUBLE, bool BOOL, time.Time
// DATETIME); IndexAs(IndexText) makes a string TEXT (matched by words).
// Keys are global across flow types and keep one type: a worker that
// declares a key with another type than another flow type's is refused
// at startup (Run returns the INVALID_ARGUMENT naming the key). Indexed
// values travel as plain JSON even with a Codec, at most 4 KiB each.
// Client.SearchFlows returns one page at a time; a malformed query is
// INVALID_ARGUMENT saying at which position. The language is in
// docs/search.md.
//
// # Attribute and channel maps
//
// An AttributeMap is one declared name and value type with any number of
// instances, one per key, each stored as its own attribute; a ChannelMap
// is one name with an independent FIFO queue per key (E33). Both list in
// the flow's Attributes and Channels like plain ones, and the key type is
// any string type:
//
//	var Spent = dex.DefineAttributeMap[string, int]("spent")
//	var Orders = dex.DefineChannelMap[Region, RegionOrder]("orders")
//
//	func (Drain) WaitFor(_ dex.Context, r Region) (dex.Wait, error) {
//		return dex.Until(Orders.ForOne(r)), nil // this region's queue only
//	}
//
//	func (Drain) Execute(ctx dex.Context, r Region, res dex.Results) (dex.Decision, error) {
//		o, _ := Orders.Received(res, r)
//		n, _ := Spent.Get(ctx, o.Customer)
//		Spent.Set(ctx, o.Customer, n+o.Cents)
//		return dex.Move(dex.To[Drain](r)), nil
//	}
//
// In a handler, AttributeMap.Keys and Count list the instances that have a
// value, the handler's own staged Sets included; in an RPC,
// ChannelMap.Keys lists the keys with queued messages and QueueSize gives
// each one's size. A client writes an instance with Spent.Value(key, v)
// (SetAttributes, WithAttributes) and publishes with Orders.Message(key,
// m); Entries and QueueSizes read a FlowState. Instance(key) is the plain
// Attribute or Channel of one key, for locks (WithLocks, MethodOptions.Locks),
// WaitForAttribute, GetAttribute and every wait condition.
//
// On the wire an instance is named MapInstanceName(name, key):
// "<name>/<key>" with '%' in the key written "%25" and '/' written "%2F",
// so any key round-trips (ParseMapInstanceName) and two keys never share a
// name. The flow declares the map as "<name>/"; the server accepts an
// instance name only for a declared map, checks its values against the
// map's value type, and refuses a plain attribute or channel whose name is
// an instance of a declared map. dexcli addresses an instance with --key
// and shows it as name["key"].
//
// # Testing
//
// To run whole flows in a unit test, use package dex/dextest:
// dextest.Start(t, flows...) runs a real server in the test's process on
// its temporary directory, a worker serving the flows and a client, and
// stops them when the test ends. The Client and the Worker take a Dialer or
// a Conn (any grpc.ClientConnInterface), so a test helper can connect them
// to an in-process server; dexraw.HandleTask runs one hand-made Task
// through the same code path as Worker.Run, without a stream.
//
// # Names
//
// Client methods are named after the FlowService calls they make
// (StartFlow, Publish, GetFlowSummary, GetFlowState, GetFlowHistory,
// ListFlows, SearchFlows, ...); the generic GetAttribute and InvokeRPC are functions
// because methods cannot have type parameters. Constructors are New...
// (NewClient, NewWorker, NewFlow), declarations Define... (DefineAttribute,
// DefineChannel, DefineRPC), options With....
package dex
