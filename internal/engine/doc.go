// Package engine is Dex-ZD's durable-execution state machine. It is pure: no
// goroutines, no clock, no I/O, no randomness. Everything time-dependent or
// random is an input (`now`, run IDs, epochs, RPC call IDs).
//
// # Shape
//
// One flow run is one value, FlowState; the node stores the latest run of
// each flow ID under that ID. Two functions change it:
//
//	recs, err := eng.Decide(st, cmd, now) // validate, decide; st is not modified
//	st, effects = engine.Apply(st, rec)   // for each rec, after its batch is durable
//
// Decide returns the records to log, all in one batch and in order. The
// records carry every decision (step execution IDs, absolute timer fire
// times, attempt numbers, retry backoffs, epochs), so Apply needs nothing
// else: it is deterministic and total, and replaying a run's records from
// nil rebuilds its state byte for byte (MarshalState). Recovery is feeding
// the decoded records through Apply again.
//
// Internally Decide works on a private copy of the state and applies each
// record it emits as it goes, so the later decisions of one command (a
// publish that satisfies a wait that schedules an Execute) see the earlier
// ones.
//
// # Commands (inputs)
//
//	StartFlow         start a run (E2, E3); st is the flow ID's latest run or nil
//	SetDefinition     pin a definition on a run started without one; its
//	                  steps take the declared options (W5, E13)
//	StopFlow          CANCEL / TERMINATE / FAIL (E23)
//	PublishToChannel  client messages, batch order kept; deduplicated by request ID (E16)
//	SetAttributes     client attribute batch (E21)
//	SkipTimer         fire a pending wait timer now (E19)
//	TimerFired        a flow timeout, wait timer or attempt timeout is due (E9, E15, E24)
//	TaskStarted       an attempt is handed to a worker (W4)
//	WaitForResult     a WaitFor result: Wait or none, staged writes (E4, E6)
//	ExecuteResult     an Execute decision and staged writes (E5, E6)
//	RPCResult         an RPC's output, staged writes, movements (E22)
//	TaskFailed        a failed attempt, optional retry-after (E9, E10)
//	RecoverAttempts   after a takeover: fail what earlier epochs handed out (T2-T4)
//	SubFlowUpdate     a parent learns its child's run and, once closed, its result (E31)
//	LockRPC           an RPC call takes its lock set, all or nothing (E30)
//	UnlockRPC         an RPC call that will not commit gives its locks back (E30)
//	Heartbeat         a running attempt's heartbeat details (E38)
//	ResetFlow         a new run from a point of the latest run's history (E37)
//	ContinueAsNew     a client continues the exact run as a new run (E37)
//
// RPC calls are not logged until they commit: Engine.RPCTask checks the call
// and builds its task; the node sends it and submits RPCResult, or answers a
// worker error to the caller itself. Each call commits at most once (see
// RPC call IDs below).
//
// # Records (the log)
//
//	flow_started        new run (replaces the state of an earlier run)
//	definition_set      the run's flow definition, the declared defaults as
//	                    the flow's config, each existing step's options
//	                    under them
//	step_created        <StepType>-<n>, input, resolved options (E1, E13)
//	attempt_scheduled   attempt n of WaitFor/Execute, not before T (E9)
//	attempt_started     handed out under a token of epoch E, times out at T (W2, W4)
//	attempt_failed      failure of the running attempt, with the retry's time (E14)
//	wait_for_completed  stored Wait with absolute timers + staged writes
//	condition_satisfied a channel condition takes the first n queued messages
//	wait_timer_fired    a wait timer fired or was skipped
//	execute_completed   decision + staged writes; the step execution ends
//	channel_published   client messages and the publish's request ID
//	attributes_set      client attributes
//	rpc_completed       RPC input, output, movements + staged writes
//	step_ended          a step execution ends without a decision (E12)
//	flow_closed         status, error type, message; steps are cancelled
//	flow_retried        a failed run's retry run under the flow retry policy (E34)
//	flow_reset          a reset run's new run (E37); the new run's flow_started
//	                    carries the state at the point
//	flow_continued_as_new a run hands its live state to a new run (E37)
//	timeout_handler_started a HANDLER flow timeout: steps end, the handler runs (E34)
//	sub_flow_updated    a subflow condition follows a child run, or takes its result (E31)
//	rpc_locked          an RPC call of epoch E holds a lock set (E30)
//	rpc_unlocked        an RPC call's locks are released without a commit
//	steps_canceled      a decision or an RPC cancelled step executions (E29)
//	attempt_heartbeat   a running attempt's latest heartbeat details (E38)
//
// # Effects (what the node does once a batch is durable)
//
//	DispatchTask      an attempt is pending: hand it to a worker serving the
//	                  flow type once NotBefore has passed (W5)
//	SendTask          a SYNC start is durable: send the task (FlowState.Task)
//	ArmTimer          submit TimerFired at or after At
//	ReplyRPC          answer the RPC caller
//	NotifyClosed      wake WaitForFlow callers (E25); drop the run's timers
//	NotifySuperseded  a new run replaced an old one for the flow ID
//	CancelTask        tell the worker running a cancelled attempt (E29, E38)
//
// Effects are hints computed per record; a later record of the same batch
// may make one moot (a timer armed for a wait that the same batch
// satisfied, a task scheduled just before the flow closed). The engine
// refuses the stale follow-up (ErrTimerNotPending, ErrStaleToken) and the
// node drops it. After a restart the node does not replay effects: it reads
// FlowState.PendingTasks and FlowState.Timers of every running flow
// (E20, T4, T5), then feeds RecoverAttempts with its new epoch (T2, T3).
//
// # Attempts and tokens (W2-W4, T2-T4)
//
// A step execution has at most one current attempt. Its states:
//
//	PENDING  --TaskStarted(epoch)-->  RUNNING  --result--> next phase
//	   ^                                 |
//	   +-- attempt_scheduled(n+1) <------+-- TaskFailed / attempt timeout /
//	                                         RecoverAttempts (NOT_COMPLETED)
//
// SYNC: the node submits TaskStarted, logs it, and sends the task on
// SendTask. ASYNC (the default, except for a method with a recovery path:
// see resolveOptions): the node decides TaskStarted, sends the task at once
// (FlowState.Task works on a pending attempt) and logs the start later, in
// front of the task's result or of any other record of the flow, never
// after one. A result is accepted only when its token equals the
// running attempt's (epoch, run, step execution, method, attempt); anything
// else, including results for cancelled executions or closed runs, is
// refused with ErrStaleToken and commits nothing. After a takeover,
// RecoverAttempts fails every RUNNING attempt of an older epoch with
// NOT_COMPLETED (it consumes a retry, T2, scheduled at once: the takeover
// ended the attempt, not a failure the backoff should space out). An ASYNC attempt whose start was
// not durable is still PENDING: it is dispatched again with the same attempt
// number (T3), as are attempts never handed out (T4); a late result carrying
// the old epoch is refused.
//
// # Step phases
//
//	WAIT_FOR --WaitForResult(wait)--> WAITING --conditions satisfied--> EXECUTE
//	WAIT_FOR --WaitForResult(none)--> EXECUTE      (no WaitFor or skipped: start in EXECUTE)
//	EXECUTE  --ExecuteResult--> ended (movements create new step executions)
//
// Readiness (E15-E18) is evaluated after every publish, timer fire and new
// Wait, over the waiting steps in creation order and their conditions in
// declaration order. A channel condition takes its messages as soon as it is
// ready (AllOf conditions complete one by one); AnyOf and Until stop at the
// first satisfied condition, so the others consume nothing.
//
// Retries (E9-E12): the backoff after failed attempt n is
// initial*coefficient^(n-1), capped at the max interval and at
// MaxRetryInterval (365 days), computed in float64 and converted once
// capped, so no policy overflows time.Duration. It is then moved by a
// jitter j in [-20 %, +20 %) (RetryJitter), rounded to the millisecond
// and capped again: delay = min(backoff*(1+j), cap), never beyond the max
// interval, never below 1 ns. Attempts that failed together (a poison task
// and the tasks lost with its stream, a dependency's outage) thus spread
// their retries instead of retrying in lockstep. j is not random: it is a
// hash (FNV-1a, splitmix64 finalizer) of (flow ID, run ID, step execution,
// method, attempt), so the engine stays pure and the same decision gives
// the same time; the time is carried in the records
// (AttemptFailed.NextAttemptAt, AttemptScheduled.NotBefore), so replay
// never recomputes it. A worker's retry-after replaces the jittered backoff
// (no jitter; capped at 365 days). Validation refuses an initial or
// max interval above 365 days (INVALID_ARGUMENT naming the field). The policy is exhausted when n reached max
// attempts, or when the retry would start later than first attempt + max
// total duration. Then WaitFor fails the flow (FAIL_FLOW) or proceeds to
// Execute with the error (PROCEED); Execute fails the flow or moves to the
// recovery step with the same input. Options resolve per field: movement
// override, the step's options (definition), the flow's config (StartFlow),
// then Config.Defaults.
//
// Completion (E5): GracefulComplete records an output and completes the flow
// when no step execution is left (a later DeadEnd of the last branch then
// completes it too); ForceComplete completes at once; ForceFail fails with
// STEP_DECISION_FAILING_FLOW; DeadEnd ends the branch only.
//
// # Texts
//
// Free texts a worker or client sends (a failure's type, message and
// stack, a ForceFail or StopFlow reason) are made valid UTF-8 before they
// are recorded (invalid bytes become U+FFFD, text.go): the log's JSON
// would do it anyway, and the live state must hold what a replay
// rebuilds. A failure's type, message and stack longer than the payload
// limit are cut to it on a character boundary.
//
// # Size limits (E28)
//
// Every value is at most MaxPayloadBytes, the values of one request at most
// MaxRequestBytes together, and a run's attributes at most
// MaxFlowAttributeBytes once a write is applied (limits.go). Decide checks
// them on new commands only, never Apply, so a replay is unaffected by the
// limits the log was written under. MaxDecisionBytes bounds the encoded
// records of one accepted request, for the node's log record limit.
//
// # Publish request IDs (E16)
//
// A client publish may carry a request ID. The run remembers the IDs of
// the last PublishRequestIDWindow (1,000) accepted publishes in
// FlowState.PublishRequestIDs, in acceptance order; channel_published
// carries the ID and Apply adds it (dropping the oldest beyond the window),
// so a replay rebuilds the same set. A publish whose ID is in the set
// decides no records and no error, also after the run closed; the node
// then answers "duplicate" once the run's last batch in flight is durable,
// which includes the publish it repeats. An empty ID is never
// deduplicated; an ID longer than MaxRequestIDBytes (256) is
// INVALID_ARGUMENT, so the set stays under 256 KiB.
//
// The window belongs to the flow ID, not to one run: a client publish
// names no run, so a publish accepted into run 1 whose response was lost
// may be retried after run 1 closed and run 2 started. flow_started
// carries the replaced run's window (FlowStarted.PublishRequestIDs) and
// the new run starts with it, so the retry decides nothing in run 2 (a
// retry that names run 1 is recognised the same way). The IDs travel in
// the record rather than being read from the replaced run in Apply, so a
// run's state follows from its own records and logs written before the
// field existed replay as they did. Pinning the run ID in the SDK could
// not do this: the run ID comes back in the response that was lost.
//
// # RPC call IDs (E22)
//
// The node names each RPC call with an ID unique for the node (its epoch
// and a counter); the ID is in the call's token. A worker whose stream
// breaks before the TaskAck sends the result again on its next stream,
// and by then the node may have answered the caller and forgotten the
// call. So the run remembers the IDs of its last RPCCallIDWindow (1,000)
// committed calls in FlowState.RPCCallIDs, in commit order: rpc_completed
// carries the ID and Apply adds it (dropping the oldest beyond the window),
// so a replay, a snapshot and a follower all have the same set. A result
// for a remembered call of the run decides no records and no error, also
// after the run closed (the node acknowledges it ACCEPTED once the run's
// last batch in flight is durable, which includes the commit it repeats);
// RPCTask refuses a new call with a remembered ID. A resend is recognised
// as long as fewer than 1,000 other calls of the same run committed since;
// with IDs of at most MaxRequestIDBytes the set stays under 256 KiB. Past
// that the engine alone would commit it again, so the node refuses (ack
// UNKNOWN_TASK) any result for a call that no caller is registered for
// and that the run does not remember.
//
// A result for a call whose caller gave up (timed out, cancelled) is
// committed exactly once when it reaches the process that issued the call
// (same epoch) before the call's timeout plus a grace period has passed
// (after that the node has forgotten the call and refuses it): the worker acted on the flow's state, and its writes land
// with its output, though no caller reads the output. After a takeover the
// new epoch refuses it (W2, STALE_EPOCH) and it commits nothing. A result
// for a run that a new run replaced is refused as stale, unless the new
// run continues it (E37): continue-as-new carries the call IDs, so a
// resend for an earlier run of the chain is recognised like any other.
//
// # Attribute locks (E30)
//
// A lock covers one attribute: its key is the attribute's name (locks.go
// keeps the key opaque so that attribute map instances, E33, add keys of
// their own without changing the rules). A step declares a lock set per
// method (MethodOptions.Locks, resolved field by field like every option,
// E13); an RPC call names its set per invocation (InvokeRPC.Locks). Names
// must be declared attributes, at most MaxLocks (32), each once.
//
// Who holds a lock follows from the state, so a replay, a snapshot and a
// hot standby agree: a step execution whose attempt is RUNNING holds its
// method's set; an RPC call holds the set its rpc_locked record names
// (FlowState.RPCLocks) until rpc_completed or rpc_unlocked. So a step's
// locks are taken by attempt_started and released by whatever ends the
// attempt: its result (wait_for_completed with a Wait, the
// attempt_scheduled of Execute after a WaitFor without one,
// execute_completed), a failure or timeout (attempt_failed and the
// attempt_scheduled of the retry), step_ended, flow_closed.
//
// Acquisition is all or nothing, which keeps it deadlock-free: nothing
// is ever held while waiting for the rest. TaskStarted of an attempt whose
// method has locks is refused (ABORTED, ErrLockHeld, naming the lock)
// while any lock of its set is held, or while a pending attempt that
// comes earlier in lock order wants one of them and is due. Lock order is
// the time an attempt became due (its NotBefore), then step creation
// order; it is total, so the earliest due waiter of any lock is never
// blocked by another waiter, only by a holder, and every holder ends (its
// attempt times out at worst): no waiter starves. A refused attempt stays
// PENDING and consumes nothing; the node drops it from its queues, and
// each record that releases locks carries a DispatchTask effect for every
// pending attempt that wants one of them, in lock order, so it is tried
// again. After a restart PendingTasks lists waiting attempts too; those
// still blocked are refused again and wait for the next release.
//
// LockRPC is refused the same way, at once: an RPC call does not wait
// (its caller retries on ABORTED). A due waiting step counts as holding
// for it, so a stream of RPCs cannot starve a step. UnlockRPC, which the
// node submits when a call ends without a commit (the worker failed it,
// its result was refused, the caller gave up at its timeout), releases
// the call's locks, and an RPCResult marked Locked is then refused as
// stale: a result that arrives after the release could overwrite writes
// the next holder made.
//
// A method with locks is always SYNC (resolveOptions), whatever a layer
// says: its locks are then durable before its handler runs, and its task,
// built once its start is durable, includes every write committed before
// it; an ASYNC start would send the task built from committed state while
// the previous holder's commit might still be in flight, and the handler
// would read a stale value under the lock. The node likewise builds a
// locked RPC's task only once its rpc_locked record is durable.
//
// Failover: an attempt or call handed out by an earlier epoch can never
// commit (its token is refused, W2), so the new active must not inherit
// its locks. RecoverAttempts fails the old epochs' RUNNING attempts with
// NOT_COMPLETED (releasing their locks; the retry waits its turn like any
// attempt) and releases with rpc_unlocked the RPC locks of calls of
// earlier epochs (rpc_locked records the call's epoch). Both happen
// before the new active serves. The choice costs a handler that is still
// running on a worker of the old epoch its exclusivity: it may still run
// while the next holder runs, but its result is refused, so its writes
// never land; side effects outside the flow are the handler's to make
// idempotent, as for any attempt after a takeover.
//
// Locks are cooperative: they exclude the methods and RPCs that lock the
// same attributes, not client SetAttributes, nor methods that lock
// nothing. A flow without locks pays nothing: the checks run only for a
// method or call with a lock set, and the release effects only when a
// released attempt had one.
//
// # Progress long polls (E35)
//
// WaitForStepCompletion and WaitForAttribute read the run's state; the
// engine keeps nothing for them. The executions of a step type that have
// finished are those created (StepCounters) minus those active: an
// execution finishes when its Execute completes, when it ends for a
// recovery step (step_ended), or when the run closes (every active
// execution is cancelled then, and counts as finished). An attribute
// condition is met when the attribute has a value (exists) or one equal to
// the expected value (the same type and bytes). A closed run can meet
// neither any more; the node answers FAILED_PRECONDITION then.
//
// # History (E26)
//
// FlowState.History is the run's semantic history: FLOW_STARTED,
// WAIT_FOR_COMPLETED / WAIT_FOR_FAILED, EXECUTE_COMPLETED / EXECUTE_FAILED,
// RPC_COMPLETED, CHANNEL_PUBLISHED, ATTRIBUTES_SET, TIMER_SKIPPED and
// FLOW_CLOSED, numbered from 1 without gaps. Apply appends the events (it
// never changes one), from the records alone; so the records carry what
// the events need: the start step as given and the ID reuse policy, the
// Wait a WaitFor returned, an Execute's whole decision and an RPC's input
// and movements with the step execution IDs they were given, the staged
// writes, a failure's next attempt time.
//
// Events keep their values (inputs, outputs, messages, attribute writes)
// rather than references to records: the log is not kept for reading once
// the local store has the state, and a reference would tie GetHistoryEvents
// to log retention. The cost is size. Every value a run received stays in
// its state as long as the store keeps the run, each bounded by the
// payload limit (E28); the API numbers events without gaps and offers no
// truncation, so the number of events is not bounded, and a run with a
// long history of large values costs more per change (its state is
// rewritten with every batch). Values the state keeps anyway are not
// copied: FLOW_CLOSED's outputs are FlowState.Outputs. In the log, a
// movement's input appears twice in its batch (the completion and
// step_created). A handler's publishes and attribute writes appear in its
// completion event only (not as CHANNEL_PUBLISHED or ATTRIBUTES_SET); a
// WaitFor's Wait is kept as stored, with absolute fire times (a timer's
// duration is its fire time minus the event's time).
//
// # Flow definitions
//
// The definition a worker registers is stored in the run (StartFlow carries
// the node's registered definition, SetDefinition replaces it). With it the
// engine checks movements, recovery steps, RPC, attribute and channel names
// and reads each step's HasWaitFor and options. A run without one (no worker
// had registered the type) accepts any name and gives every step a WaitFor
// task; the worker answers "no wait" for a step that has none.
//
// Attribute and channel maps (E33, maps.go) are naming only: a name with a
// trailing '/' in Attributes or Channels ("customers/") declares a map,
// and each instance is an ordinary attribute or channel named
// "<name>/<escaped key>" ('%' -> "%25", '/' -> "%2F"; the key non-empty
// and canonically escaped, so the last '/' splits name and key and each
// key has one wire name). Records, queues, locks and RPC queue sizes carry
// the wire name unchanged; a declared map's value type checks each
// instance. A name is looked up as a map only when no plain declaration
// matches, so flows without maps pay nothing; a plain name that is an
// instance of a declared map is refused in the definition.
//
// What a worker declares governs every step execution of the type, also
// one created before any worker declared it (a flow started while no
// worker of its type was connected, as after every restart). The choice:
// the declaration is logged into the run, as definition_set, rather than
// resolved per attempt from the workers connected at that moment. A
// decision then depends only on recorded values, so a replay, a snapshot,
// a hot standby and the process that takes over after a failover all see
// the same options; per-attempt resolution would make a retry or a
// recovery step depend on which worker happened to be connected, which no
// record shows, and would leave a step with no options at all whenever no
// worker is. So SetDefinition on a run that had no definition re-resolves
// every step execution the run has, field by field as createStep would
// have (E13): its start or movement override (recorded in step_created,
// only while the run has no definition, as StepCreated.Override), the
// step's declared options, the flow's config, the server defaults. The
// declared default step options (SetDefinition.Defaults) become the flow's
// config when the run has none, as they would have at StartFlow. The
// record carries the resolved options of the steps that change
// (DefinitionSet.Steps), so Apply computes nothing. A step the definition
// says has no WaitFor and whose WaitFor attempt no worker holds goes to
// Execute attempt 1 in the same Decide; a WaitFor attempt a worker already
// holds is left to it (it answers "no wait"), and if that attempt fails
// instead (a timeout, a takeover, an invalid answer) the step goes to
// Execute attempt 1 rather than retry a WaitFor it does not have. A step
// type the definition does not declare keeps its options. Attempt numbers
// are kept: attempts a step ran before the declaration count against the
// declared maximum. On a run that already had a definition, SetDefinition replaces
// it for the steps created afterwards only.
//
// A run is pinned to the first definition it gets: the node sets one only
// on runs that have none, so workers of two versions that declare a type
// differently never rewrite running flows, and each run logs at most one
// such record (its size is bounded by the declaration's, which the
// server's message limit bounds).
//
// # Flow-level options (E34, flowopts.go)
//
// Start delay. StartFlow.StartDelay creates the run now (RUNNING, its
// attributes readable and writable, RPCs and publishes accepted, its
// timers armed) and schedules the start step's first attempt not before
// now + delay (AttemptScheduled.NotBefore and FirstAt), so the delay is
// as durable as a retry backoff: a restart or a takeover re-dispatches the
// pending attempt at its NotBefore (T4), and a definition that arrives
// during the delay moves the step to Execute without shortening it. The
// flow timeout counts from the end of the delay (TimeoutAt = now + delay +
// timeout): a delayed flow gets its whole timeout to run. A delay needs a
// start step (INVALID_ARGUMENT "startDelay" otherwise) and is at most 365
// days. An RPC's movements during the delay run at once: the delay holds
// the start step only.
//
// Flow retry policy. StartFlow.Retry (partial, over the server's step
// retry defaults) makes a failed run start a new one. "Failed" is: closed
// FAILED by the flow itself: a step's exhausted retries (WORKER_API_FAIL),
// a FORCE_FAIL decision, a FAIL flow timeout (FLOW_TIMEOUT), a timeout
// handler that failed or missed its deadline. Never retried: a client's
// StopFlow (CANCEL, TERMINATE, and FAIL, whose CLIENT_API_FAILING_FLOW
// says an operator decided), a CANCEL flow timeout, a run terminated by a
// new start. In the Decide call that fails the run (retryFailed, after the
// command), when the policy allows another attempt (MaxAttempts counts
// the runs, the client's being 1; MaxTotal bounds the time from the first
// run's start to the retry's first step; the backoff after run n is the
// step retry backoff with jitter, hashed from the flow ID and first run
// ID), the batch holds flow_closed, flow_retried (on the failed run: the
// retry's run ID, attempt and NotBefore; FlowState.RetryRunID) and the
// new run's flow_started, whose StartDelay is the backoff, and its start
// step. The new run has the same start step and input, initial
// attributes, request ID (so a client retrying the first start answers
// the latest run), definition, config, timeout and timeout policy, trace
// context and publish request IDs; its FLOW_STARTED event carries
// RetryAttempt and RetriedRunID (the link back). Run IDs: the node chooses
// the first run's ID (unique); retry run n is "<first run ID>.retry-<n>",
// decided from the state alone, so the engine stays pure and the record
// carries it (Record.RunID), so replay never recomputes it. A node-chosen
// ID never contains ".retry-", so a retry ID cannot collide with one.
// During its backoff the retry run is RUNNING with a pending start step:
// a new StartFlow of the flow ID is judged against it by the ID reuse
// policy, and a StopFlow stops it, which ends the retrying (a stopped run
// is not retried). The failed run stays readable by its run ID. Before
// E34, WaitForFlow without a run ID waited for the latest run as of the
// call and answered its close; it still does, except that it follows
// retries (serving.Core.WaitForFlow): a failed run whose
// RetryRunID is set is not the flow's end, so the call waits for the
// retry, and so on; with a run ID it answers that run's close.
//
// HANDLER flow timeout. TimeoutPolicy HANDLER (implied by a
// TimeoutHandler) with a flow timeout: when the timeout fires,
// timeout_handler_started ends every active step execution (like a close
// does: pending and running attempts are dropped, late results are
// refused as stale, their wait timers are no longer pending) and records
// the handler's deadline (timeout + TimeoutHandler.Deadline, default 1
// minute); the handler step follows, straight to Execute (no WaitFor) with
// no input. The other steps are ended rather than left running because
// the flow's time is up: work that keeps moving past the timeout could
// race the handler's decision, and a handler that wants the work to go on
// moves to the steps it needs. The handler decides like any step:
// complete, fail (FORCE_FAIL), or move on; RPCs still commit. If the flow
// is still running at the deadline (TIMEOUT_HANDLER timer) it fails with
// FLOW_TIMEOUT. Validation: a handler needs a flow timeout, a declared step
// type and policy HANDLER (or none); HANDLER needs a handler.
//
// # Reset (E37, reset.go)
//
// ResetFlow makes a new run (NewRunID, chosen by the node) of a flow ID
// from a point of its latest run's history. It names the run by its exact
// ID: a run that is not the latest (a stale ID, or one a reset or retry
// already replaced) is FAILED_PRECONDITION naming runId, as is a subflow
// run (its parent waits for that run; reset the parent). The point is one
// of BEGINNING (before event 2: the run's start), STEP_TYPE (just after
// the event that created the type's first execution), STEP_EXECUTION
// (just after the event that created it; BeforeExecute: just after its
// first WAIT_FOR_COMPLETED) and EVENT_TIME (the last eligible point at or
// before the time: the beginning or just after an event that created
// step executions). A point the history does not have is
// FAILED_PRECONDITION naming the point's field; a malformed one (none, two
// kinds, an empty field) INVALID_ARGUMENT.
//
// The state at the point is rebuilt from the run's history (the run's
// records may be truncated from the log, its history is in its state):
// the attributes (start attributes, ATTRIBUTES_SET, the staged writes of
// completions), the step executions active at the point (created by
// FLOW_STARTED, the movements of EXECUTE_COMPLETED and RPC_COMPLETED, a
// recovery step after an EXECUTE_FAILED that ran out of retries, resolved
// under the definition; ended by EXECUTE_COMPLETED, STEP_CANCELED and
// running out of retries), the step counters, the outputs and the
// graceful flag, and the number of messages published before the point.
// Channel messages: the history records publishes but not which wait took
// which message, so the new run's queues hold the messages published
// before the point (sequence numbers at most the point's count) that the
// old run still had queued or that the waits of its active executions
// held (each recreated execution starts again from its WaitFor), in
// publish order; a message an execution took and ended with after the
// point is not carried. Not rebuilt: a timeout handler's start
// (no event marks it: reset a run whose handler ran to a point before its
// flow timeout), and subflow conditions beyond their waits.
//
// Records, in one batch: flow_closed TERMINATED on the old run when it is
// running (its message names the new run, the point and the reason; its
// workers are told, late results refused: one run of the flow ID is
// active), flow_reset on the old run (ResetRunID: the forward link,
// FlowState.ResetRunID), the new run's flow_started with Reset (the link
// back, the point, the reason and the state at the point beside the
// attributes; applied it sets the counters, queues, outputs, and its
// FLOW_STARTED event carries it, so a reset run's own history rebuilds
// its beginning for a later reset), then step_created for each execution
// active at the point, with its own ID, input, parent and movement
// options (StepCreated keeps the larger of the counter and N, which for
// every other creation is the counter's next), and its first attempt: its
// WaitFor (Execute when it has none). BeforeExecute starts the target at
// its Execute: with no wait, at once; with a wait of timers only,
// wait_for_completed with the stored wait and wait_timer_fired for each
// timer, so evaluate schedules the Execute; a wait with a channel or
// subflow condition is refused (its results are not in the history).
// The flow_started marks the executions it begins at their Execute
// (ResetStep.ToExecute, with the stored wait), so the history of a reset
// run rebuilds them: a reset of that run begins such an execution at its
// Execute again, the same way, wherever it is active at the point (its
// beginning or later), unless the point is before that execution's own
// WaitFor.
// Then, unless SkipReapply, the client writes of the old run from the
// point on, in order: ATTRIBUTES_SET as attributes_set, CHANNEL_PUBLISHED
// as channel_published (without its request ID: the new run starts with
// the old run's accepted IDs), an RPC's staged writes as attributes_set
// and channel_published (its movements are not re-applied: they were the
// RPC's decision in the old run). The new run takes the declaration known
// now (a fixed worker's, ResetFlow.Definition) or the old run's, the old
// run's timeout policy and handler, and a new flow timeout of the start's
// duration from now; no flow retry policy. WaitForFlow without a run ID
// follows FlowState.NextRunID (a retry or a reset) to the newest run.
// A run that continue-as-new started is refused (FAILED_PRECONDITION on
// runId): it took its state over from the run before (RunOptions.carry),
// which its history does not hold, so no point of it can be rebuilt.
//
// A ResetFlow with a request ID is safe to retry (its reply may be lost,
// and the SDK sends it again): flow_reset and the new run's Reset carry
// the ID, and a ResetFlow naming run R with request ID X, when the latest
// run's Reset says it was reset from R by X, decides nothing, so the node
// answers that run; FlowState.ResetByRequest gives R's answer from R's own
// state once the new run has itself been replaced. Another ID, or none, is
// refused as any reset of a run that is not the latest.
//
// # Continue-as-new (E37, continue.go)
//
// A long-lived flow keeps its history bounded by continuing as a new run of
// the same flow ID. Three triggers: the run's history reached
// Config.ContinueAsNewHistoryEvents (limits.continueAsNewHistoryEvents,
// default 10,000, at least 10), checked at the end of every Decide that
// added history events, so a TaskStarted or a heartbeat never switches a
// run; an Execute decision with ContinueAsNew (MOVEMENTS or DEAD_END only:
// the movements are created first and travel with the rest); a client's
// ContinueAsNew naming the exact run (with a request ID it is safe to
// retry: flow_continued_as_new carries it, Continuation.RequestID on the
// old run and FromRequestID on the new run keep it, and a retry naming the
// old run with that ID decides nothing, answered by the new run, as for
// ResetFlow). The batch then holds
// flow_continued_as_new on the run (it closes CONTINUED_AS_NEW with a
// FLOW_CLOSED event saying why; FlowState.ContinuedRunID links forward)
// and the new run's flow_started with ContinuedFrom (its FLOW_STARTED
// event links back). Run IDs: "<first run of the chain>.continued-<n>",
// decided from the state (Opts.Continued) like a retry's.
//
// The new run takes over the live state: every step execution as it
// stands (queued and pending attempts, waiting steps with their Wait,
// satisfied conditions, taken messages and fired or skipped timers),
// queued messages and the message sequence, attributes, collected
// outputs and a requested graceful completion, per-type step counters (so
// execution IDs continue), heartbeat details, flow-level options, the
// start request and publish request IDs and the committed RPC call IDs
// (a worker's resend of a result committed in an earlier run of the
// chain, under that run's token, decides nothing: issue 14). The flow timeout keeps its
// deadline. Its history starts with FLOW_STARTED; the old run keeps its
// own history, attributes and outputs, readable by run ID. The state does
// not travel in the record: flow_continued_as_new's Apply moves it aside
// (RunOptions.carry, never encoded) and the flow_started that follows in
// the same batch takes it. Both records are always in one envelope, so a
// replay, a snapshot (taken between batches) and a hot standby see the
// same pair; a log record stays as small as any start, whatever the state
// holds. A continuation's flow_started that meets no carry (a log that
// split the pair across batches) would start an empty run: CheckApply
// reports it (ErrNoCarry) and the node stops on it as on a corrupt log.
//
// Attempts in flight at the switch. A RUNNING attempt is carried as
// running: its worker holds a token naming the old run, and the new run
// accepts that token for that attempt only (Continuation.Carried lists
// "<step>/<method>/<attempt>"; the epoch check still applies), so its
// result lands exactly once, in the new run; a resend is refused as for
// any finished attempt, and the old run, closed, never takes a result.
// Its attempt timeout and heartbeat timer are armed again for the new
// run, and a cancellation reaches it under its old token. PENDING
// attempts are dispatched as the new run's (an ASYNC start the node
// decided is applied to the head before any other record of the flow, so
// it is RUNNING by then). RPC calls are not carried: a call in flight
// holds a token of the old run and is refused as stale, and its lock set
// is dropped with the old run. A subflow child that continues as new is
// not followed by its parent's condition yet.
//
// # Indexed attributes (E36)
//
// A definition may declare attributes indexed for search
// (FlowDefinition.Indexed: attribute name -> index key and IndexType,
// search.go). The engine's part is a check: every write of an indexed
// attribute (a client's at start or later, a handler's staged write) must
// be plain JSON ("json" encoding: a Codec leaves indexed attributes
// unencoded, the server must read them), at most MaxIndexedValueBytes,
// and of the type's JSON form (a string for KEYWORD, TEXT and DATETIME in
// RFC 3339, an array of strings for KEYWORD_ARRAY, an integer within 64
// bits for INT, a finite number for DOUBLE, a boolean for BOOL; null
// clears the value). Anything else is INVALID_ARGUMENT naming the
// attribute (a handler's attempt fails with INVALID_USER_FLOW_CODE). The
// index itself is derived from the stored state by the local store, in
// the same batch as the state (package localstore), so replay, snapshots
// and standbys carry it without records of their own. A run indexes what
// its own definition declares: like the rest of the definition, a new
// declaration reaches the runs started after it (and runs that had none).
//
// Choices where the spec is silent: keys are checked when a worker
// registers (server: a key with another type than another flow type's
// declaration is refused, naming the key; a flow type may change the
// type of a key that no other type uses, and runs indexed under the old
// type are then not found by queries on the key); a value stored as a
// value object (limits.valueObjectBytes below MaxIndexedValueBytes) is not
// indexed.
//
// # SubFlows (E31)
//
// A WaitFor's Wait may hold SubFlow conditions beside timers and channels,
// under Until, AllOf and AnyOf. Each names the child's flow type, start
// step (empty: the type's declared one), input, flow timeout and policy,
// initial attributes and a reuse policy; a start delay and a flow retry
// policy belong to E34 and are not part of the condition (the API has no
// field for them). The stored condition (StoredSubFlow) carries what the
// engine derives when it stores the Wait, in the wait_for_completed
// record: the child's flow ID SubFlow:<parentFlowId>-<stepExecId>-<index>
// (index: among the Wait's SubFlow conditions, from 0) and the start's
// request ID SubFlow:<parentFlowId>/<parentRunId>/<stepExecId>/<index>,
// unique to that parent run, step execution and condition. A client's
// StartFlow under the SubFlow: prefix is INVALID_ARGUMENT.
//
// The engine decides one flow at a time, so a subflow is a short sequence
// of ordinary commands, each on one flow with its own records:
//
//  1. the parent's WaitForResult: wait_for_completed with the conditions;
//  2. the child's StartFlow (SubFlowRef.ChildStart): flow_started with
//     FlowStarted.Parent naming the parent run, step execution and
//     condition index, or no records when it attaches (below);
//  3. the parent's SubFlowUpdate: sub_flow_updated linking the condition
//     to the child's run (ChildRunID), with the child's result when that
//     run is already closed;
//  4. later, when the child closes (any status, any cause: its own
//     decision, a timeout, a StopFlow by its ID), the parent's
//     SubFlowUpdate with the result (FlowState.ParentNotice):
//     sub_flow_updated with Result, which satisfies the condition; AllOf
//     and AnyOf then hold as with any condition.
//
// LinkSubFlows performs steps 2 and 3 for every pending condition of a
// parent (FlowState.PendingSubFlows), given a SubFlowHost that reads head
// states and decides commands. The node runs it, and sends step 4, in the
// same sequencer turn as the records that call for it, submitting each
// command's records after the ones before: the log therefore holds them
// in this order, and both flows live in the same node's log. A crash loses
// a suffix of the log, so a restart, a takeover or a hot standby that
// becomes active can only miss later steps of a sequence, never an
// earlier one; recovery runs LinkSubFlows again for every running flow
// with pending conditions, and every step is idempotent:
//
//   - an unlinked condition decides the child's start again: the child's
//     latest run carries the same request ID, so the start attaches
//     (whatever the reuse policy), or the start was lost and happens now;
//   - a linked condition whose Wait still waits reads its child's run and
//     takes its result if it closed (the child's close was durable, the
//     parent's update was not);
//   - an update the parent already applied decides no records.
//
// Snapshots need nothing more: the state of both flows holds every link
// and result (StoredSubFlow.RunID, Result; FlowState.Parent), so the
// pending work follows from the state alone.
//
// Reuse policies (the derived ID already has a run when the parent's
// flow ID was reused, or the parent was reset): a start whose request ID
// equals the latest run's attaches, always. Otherwise
// RESTART_IF_PREVIOUS_EXITS_ABNORMALLY (the default) attaches to a RUNNING
// or COMPLETED run and starts a new run over FAILED, CANCELED (a CANCEL
// timeout included) or TERMINATED; ATTACH attaches to any run;
// ALWAYS_RESTART terminates a running run (flow_closed TERMINATED, then
// flow_started, in one Decide) or starts after a closed one. Attaching to
// a closed run gives the condition its result at once (step 3). A
// condition follows exactly one child run: an update naming another run
// (the run an ALWAYS_RESTART terminated) decides nothing, and the node
// sends a parent notice only for the run the child's flow ID still
// holds. The parent a child's close notifies is its flow ID's latest run,
// matched by the condition that follows that child run, so a child that a
// new parent run attached to reports to the new run. A notice never links:
// for a condition not linked yet (a crash came between the child's start
// and the link) it decides nothing, and the link that recovery decides
// applies the reuse policy and takes the result.
//
// Choices where the spec is silent:
//
//   - Every SubFlow condition starts its child, also when the Wait is
//     already satisfied by the time the node links it (an AnyOf won by a
//     channel message that was queued already): losers keep running.
//   - A result is taken only while the Wait waits. A child of an AnyOf
//     that closes after the winner is not recorded: the parent's Execute
//     sees it as a RUNNING snapshot (its flow ID and run), as it saw it
//     when the Wait held, on every attempt. Its FlowResult is readable by
//     its ID.
//   - A parent's close (completion, failure, StopFlow) does not touch its
//     children; a child's later close is refused by the closed parent
//     (FAILED_PRECONDITION) and the node drops it.
//   - A child start the engine refuses (the child's definition does not
//     take the input or an attribute, the type declares no start step)
//     satisfies the condition with a FAILED result of error type
//     INVALID_USER_FLOW_CODE and the refusal as its message; the parent's
//     Execute decides what to do. The parent's own checks (a flow type, a
//     valid timeout, policy and reuse policy, the size limits) fail the
//     WaitFor attempt as any invalid Wait does.
//   - The child's result carries every output the child committed; the
//     record that delivers it is bounded like the child's outputs are.
//   - A child's tasks join the parent's trace (the child's start takes
//     the parent run's trace context).
//   - The parent's WaitFor cannot know the child type's declared input
//     type, so the child's start checks it (a refusal is the failed
//     result above), except for an input large enough to be a value
//     object: the node keeps only its reference, which is not checked
//     again, and a mismatch shows when the child's worker decodes it.
//
// History: the parent's WAIT_FOR_COMPLETED event holds the conditions
// with their derived IDs; SUB_FLOW_COMPLETED records each result taken;
// the child's FLOW_STARTED is its own history's first event.
//
// # Step cancellation (E29)
//
// An Execute decision (of any kind) may carry a CancelSelector: Steps
// cancels every active execution of those types in the flow, Siblings
// those of the types whose parent (StepExec.ParentID, the execution or
// "rpc:<name>" that moved to it) is the deciding execution's parent. An
// RPC result may carry CancelSteps (flow-wide only). Decide takes the
// selection right after the decision's completion record, before its
// movements are created, and logs it as one steps_canceled record naming
// each execution and its scope (FLOW wins over SIBLINGS for a type in
// both lists); nothing selected logs nothing. Apply removes the
// executions and appends one STEP_CANCELED event per execution with the
// scope and the cause. The choices where the spec is silent:
//
//   - Removing is all there is: a cancelled execution's attempts' results
//     are refused as stale (ErrStaleToken, ack CANCELED), its timers are
//     no longer pending (Timers omits them; a fire is ErrTimerNotPending),
//     its failure policy and recovery step never run. Messages a waiting
//     execution's AllOf conditions had already taken stay consumed (they
//     left their queue when the condition was satisfied); nothing is
//     consumed by the cancellation itself.
//   - Steps an RPC moved to all have the parent "rpc:<name>", so for a
//     step execution moved to by an RPC, CancelSiblingSteps selects the
//     executions that any call of the same RPC moved to.
//   - The flow then goes on as after a DeadEnd of those branches: if a
//     graceful completion was requested and no execution is left, it
//     completes; otherwise a flow with nothing left stays open for RPCs.
//   - Cancellation types are checked like movements: a type the
//     definition does not declare makes the result invalid
//     (INVALID_USER_FLOW_CODE; for an RPC the caller's error).
//   - A cancelled execution whose attempt a worker may hold (running, or
//     pending: an ASYNC attempt is sent before its start is logged)
//     yields a CancelTask effect; so does each execution a closing run
//     abandons (StopFlow, a flow timeout, a forced completion or failure,
//     TERMINATE_IF_RUNNING). The node tells the worker holding it; the
//     handler's context ends (E38). It is a hint: the result is refused
//     whether or not the worker hears it.
//
// # Heartbeats (E38)
//
// A method's options may set HeartbeatTimeout. AttemptStarted then also
// arms a HEARTBEAT timer at start + timeout. The worker heartbeats every
// running attempt on its stream; the node moves the timer to now +
// timeout on each heartbeat, in memory, logging nothing, so heartbeats
// cost no log write. When it fires, Decide fails the attempt with failure
// type HEARTBEAT, and the retry policy applies as for any failure. Decide
// trusts the node's timer, as it does for attempt timeouts, but refuses
// a fire before the attempt's last logged heartbeat (HeartbeatDetails.At)
// + timeout (not due).
//
// Heartbeat details (ctx.Heartbeat(details) in the SDK) are the one part
// that is logged: the node submits a Heartbeat command for a heartbeat
// that carries details, and Decide logs attempt_heartbeat when they differ
// from the recorded ones. The step execution keeps the last details of
// its current method (FlowState.HeartbeatDetails); the next attempt of the
// same method receives them in its task (also after a takeover, since
// they are in the log); an Execute does not receive its WaitFor's. The
// SDK sends details at most once per heartbeat interval, so a handler
// that reports progress in a tight loop writes one record per interval.
//
// The SDK heartbeats every running attempt by itself: the timeout
// detects a worker that is gone (crashed, partitioned, its stream cut)
// long before a long attempt timeout, not a handler stuck inside a live
// worker; the attempt timeout bounds that. After a takeover the new epoch
// fails the old epoch's running attempts anyway (RecoverAttempts), so the
// in-memory timer positions need not survive it; Timers lists a running
// attempt's heartbeat timer at its last logged heartbeat (or start) +
// timeout.
//
// # Combinations, conditional close, locals, events (E32)
//
// The rules are written beside the code: combination.go (AnyCombination
// waits: groups tried in order, channel conditions consuming only when a
// whole group can hold, minimum counts reserved before the extra capacity
// is shared in declaration order) and locals.go
// (FORCE_COMPLETE_IF_CHANNELS_EMPTY decided against the state the decision
// commits on and recorded with what was found, step-execution locals
// carried by WaitForCompleted and kept on the step's StoredWait, user
// events as USER_EVENT history events after their completion's event).
// Choices the spec leaves open: a ForceCompleteIfChannelsEmpty needs at
// least one declared channel, named once; a condition of an
// AnyCombination in no group is invalid (it could never matter); only a
// WaitFor writes locals (Execute and RPCs read or record events only).
//
// # Encoding
//
// MarshalRecord/UnmarshalRecord, MarshalState/UnmarshalState and
// MarshalHistoryEvent/UnmarshalHistoryEvent write format 2 (codec.go:
// CBOR with the JSON field names, a value's bytes as they are) and read
// format 1 (JSON, what earlier versions wrote) too; callers treat the bytes
// as opaque. Unknown record types and versions are errors, never skipped.
// testdata/records.cbor.golden pins the record encoding,
// testdata/records.golden keeps format 1 readable.
package engine
