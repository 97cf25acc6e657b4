// Package serving is the serving core of an active process: one lease
// period's sequencer, the log writer's apply hook, the dispatcher of tasks
// to worker sessions, the timer wheel, the WaitForFlow waiters, pending RPC
// calls, admission of new work, and the recovery of the serving state after
// a replay (Recover). It reads and applies to the local state of package
// flowstore (a flowstore.Store). Core implements server.Backend.
//
// Package node runs it: it opens the local store, replays and fences the
// log (ReplayApply, ReplayWhile), creates the Core and the wal.Writer whose
// OnDurable is Core.OnDurable, runs Recover with a valid lease, serves, and
// on a step down or a stop drains (BeginDrain, WaitIdle) and stops it. This
// package never touches the lease, the process or the network: it is told
// whether the lease is valid (CoreConfig.Lease) and what to count
// (CoreConfig.Metrics).
//
// # The serving core
//
// One goroutine, the sequencer, decides everything: client commands, worker
// results, task starts, timer fires and recovery. For a command it loads
// the flow's head state (in memory while envelopes of the flow are in
// flight, else the committed state from the local store), calls
// engine.Decide, applies the records to the head and submits them to the
// log writer as ONE log record, an envelope (envelope.go), so the records
// of one Decide are atomic and contiguous. The caller waits for the
// envelope's future, which completes after the batch is durable and applied
// to the local store (G3). A command that changes nothing waits for the
// flow's last envelope in flight, so no answer rests on state that is not
// durable. Reads answer from the local store: committed state only.
//
// OnDurable, on the writer goroutine and in sequence order, applies each
// batch to the local store in one transaction with its sequence number
// (engine.Apply on the committed states), posts the committed envelope
// counts back to the sequencer (which drops heads that are fully
// committed) and performs the effects:
//
//	DispatchTask  -> the dispatcher's queue of the flow type (after its NotBefore)
//	SendTask      -> the task goes to the session that reserved it
//	ArmTimer      -> the timer wheel
//	NotifyClosed  -> wake WaitForFlow long polls; drop the run's timers and tasks
//	                 (indexed by run: the cost does not grow with other runs')
//	ReplyRPC      -> nothing: the stream that committed the RPC answers its caller
//
// The dispatcher (dispatch.go) hands tasks to worker sessions: a slot is
// reserved before the start is decided, so a task goes to exactly one
// worker (W3); SYNC starts are logged before the task is sent, ASYNC ones
// are sent at once and logged with the next batch (W4). Tasks are keyed by
// attempt (or RPC call) and epoch: after a crash an ASYNC attempt whose
// start was lost runs again with the same number (T3) while the worker
// resends its unacknowledged answer of the earlier epoch, and that answer
// must not free, extend or name the new task's slot. A started task that
// no worker received (the stream that reserved it ended first, or ended
// with the task still in its outbox) is not dropped: it waits at the front
// of its queue for the next free slot, typically the same worker
// reconnected, until its attempt timeout has passed. Every task carries
// committed state only: a SYNC task is built from the state its start
// committed in; an ASYNC or RPC task, built on the sequencer, from the local
// store's state when the flow has envelopes in flight (the head may hold
// attribute writes or publishes a crash can still take back), so no handler
// acts on a value that never became durable. An RPC on a run whose start is
// still in flight is sent once the start is durable. The timer wheel
// (timers.go) submits TimerFired when a timer is due; the engine refuses
// stale ones and they are dropped. After a restart nothing is replayed as
// effects: Recover arms every running flow's timers, queues its pending
// tasks and fails the attempts an earlier epoch handed out (recover.go).
//
// The dispatch scripts in testdata/dispatch (TestDispatchScripts,
// script_test.go) state these rules as script lines, like the engine's
// golden scripts: workers connecting with their slots and flow types,
// starts, the tasks each worker got, results and failures with their
// acks, streams that end, the clock, a crash and the answers of the
// earlier epoch that follow it. A new dispatch rule gets a script there.
//
// # Recovery after a takeover (T1-T5)
//
// A new lease period starts from the committed state only; nothing of the
// old process's memory survives, and replayed batches perform no effects.
//
//   - T1: node replays the log into the local store from its applied
//     position (after a restore of the newest snapshot when the store is
//     empty or behind a truncated log) with ReplayApply or ReplayWhile, each
//     batch applied as OnDurable applies it (applyBatch, envelope.go), and
//     writes its fence (wal.Fence, G2) before anything is served.
//   - T2: Recover submits RecoverAttempts with the new epoch for every flow
//     with attempts an earlier epoch handed out; the engine fails them with
//     NOT_COMPLETED, each consuming a retry, and Recover waits until that
//     is durable. Their workers' answers of the earlier epoch are acked
//     STALE_EPOCH and touch no slot of this one (dispatch.go).
//   - T3: an ASYNC attempt whose start was not durable is still PENDING in
//     the log: it runs again under the same attempt number and consumes no
//     retry (sequencer.go, dispatch.go).
//   - T4: attempts not handed to a worker are queued again by Recover for
//     the dispatcher.
//   - T5: Recover arms every running flow's durable timers; those due
//     during the outage fire at once (timers.go, E20).
//
// Only then does the core answer public calls. The dispatch scripts'
// crash lines (testdata/dispatch) and core_test.go's crash tests replay
// T2 and T3 at this level; node's restart and takeover tests, test/ha and the
// simulator (internal/sim) replay whole takeovers.
//
// # Declarations (W5, E13)
//
// A worker's Hello declares its flow types: each one's definition and
// default step options. The registry (Core.defs) keeps the latest
// declaration of each type in memory; StartFlow stores it in the new run
// (definition, and the defaults as the flow's config unless the client gave
// one). Declarations are durable through the runs that took them: applying a
// batch records, per flow type, the run whose start (or definition_set) took
// the type's latest declaration (flowstore.Tx.PutFlowType, the local store's
// type index, carried by replay, snapshots and hot standbys). After a
// restart the registry is seeded from that run's definition and defaults,
// closed runs included (and, for a store written before the index existed,
// from each type's latest running run), so starts before a worker reconnects
// get the latest declaration used. A type declared but never started has no
// run to keep it: it is known again once a worker of it connects. A run
// started with none (no worker had declared the type, nor a seed) gets it
// from register when a worker declares the type: SetDefinition, logged,
// re-resolves the options of the steps the run already has (engine doc: Flow
// definitions), so replay, snapshots, a hot standby and a takeover keep what
// the worker declared. register is posted to the sequencer before the
// session joins the dispatcher, so the definition is decided before that
// worker can be handed one of the run's attempts. A new or changed
// declaration looks for such runs (a scan of the running flows, on the
// sequencer); so does the first declaration of a seeded type for which
// recovery found running runs without a definition (a crash came before
// their definition_set was durable), even when it equals the seed. A run
// keeps the first definition it got.
//
// # Bounded load (admission.go, issue 11)
//
// Every queue between a client and the log is bounded by refusing new
// work, never by dropping or refusing work already accepted and never by
// exiting. The rule: work that adds load may be refused; work that
// finishes load must queue.
//
//   - New work is a FlowService call that changes state: StartFlow,
//     PublishToChannel, SetAttributes, StopFlow, SkipTimer, InvokeRPC. The
//     server's interceptor asks Core.Admit before the handler runs, so a
//     refusal comes before anything is decided: RESOURCE_EXHAUSTED with a
//     RetryInfo hint (the only status that carries one) and an ErrorInfo
//     naming the limit's key. The SDK sends any call refused so again after
//     the hint plus jitter, once calls included.
//   - Admit refuses when the admitted calls not yet answered reach
//     limits.maxPendingRequests, when their request bytes would pass
//     limits.maxPendingBytes (one call alone is always admitted), when the
//     sequencer's queue holds limits.maxPendingRequests functions, when the
//     log writer's queue (records waiting for a batch) holds
//     limits.maxPendingBytes, and, for a StartFlow, when the flow type's
//     queue of tasks waiting for a worker holds limits.maxQueuedTasks. The
//     hint is 100 ms for the pipeline limits (a few batch writes drain
//     them) and 500 ms for a task queue (workers drain it). An InvokeRPC
//     stops counting once its task is queued for a worker
//     (server.ReleaseAdmission): waiting for the worker loads neither the
//     sequencer nor the log, and a few slow RPCs must not refuse all new
//     work. The RPCs waiting for a worker have a bound of their own, also
//     limits.maxPendingRequests: beyond it an InvokeRPC is refused (hint
//     500 ms).
//   - Work that is not new is never refused and never counted against a
//     caller: worker results and failures (they free slots and close
//     runs), RPC results, task starts, timers firing, retries of attempts
//     already owned, recovery, definitions set by a declaration. Each of
//     them follows from work admitted earlier, so its amount is bounded by
//     what was admitted: the running attempts (the workers' slots), the
//     armed timers, the runs.
//   - Reads are never refused: they queue nothing in the sequencer or the
//     writer. Neither is WaitForFlow, except when maxFlowWaiters calls
//     wait already (waiters.go): it is refused the same way then.
//   - Per connection, limits.maxConcurrentStreams bounds the calls and
//     streams open at once (grpc.MaxConcurrentStreams); a client's further
//     calls wait in the client.
//
// Memory then stays near a bound that does not grow with the offered
// load: at most maxPendingRequests calls and maxPendingBytes of their
// requests in flight, the writer's queue near maxPendingBytes plus what
// running attempts and timers add, and at most maxQueuedTasks waiting
// tasks per flow type (plus those released by timers and retries).
//
// # What workers see (W1-W4)
//
// Task tokens are engine.Token.Encode(): opaque bytes bound to the epoch,
// run, step execution, method and attempt (or the RPC call). A result is
// acked ACCEPTED once durable, INVALID when the engine failed the attempt
// for an invalid result (E28), STALE_EPOCH for a token of another epoch,
// CANCELED when the step execution or the run is gone, SUPERSEDED when the
// attempt is no longer the running one, UNKNOWN_TASK otherwise. A worker's
// slot is freed when its result's outcome is known, so a drain waits for
// results to commit; a STALE_EPOCH result held no slot here and frees
// none. An RPC result sent again for a call that already
// committed (the worker's stream broke before the ack) is acked ACCEPTED
// and commits nothing: the engine remembers the run's committed call IDs
// (rpc.go says how long a call whose caller gave up stays known).
package serving
