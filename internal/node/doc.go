// Package node ties the lease, the log, the local store, the engine and the
// server into one process lifecycle. It holds the serving core of an
// active process (Core) and the lifecycle of `dex-server-zd dev` and
// `local` (Run).
//
// # Lifecycle of dev and local (Run)
//
//	lock DIR/dev.lock (D2; a filesystem without locks: warn, D4)
//	refuse DIR/relaxed.unclean (D7); write it in relaxed mode
//	open DIR/log as the blob fs store: strict fsyncs, the others do not (D5, D6)
//	probe conditional writes (G6), listen (UNAVAILABLE until serving)
//	acquire the lease; while dev.lock is held, a held lease is taken over (D3)
//	open DIR/state (the local store); Fence from Applied()+1: replay the
//	  log into it, write the fence (T1, G2)
//	start the writer under Supervise; Recover (T2-T5); open the gate
//	SIGTERM/SIGINT: drain (A3, K2), stop the streams, flush, release (L12), exit 0
//	lease lost, log write limit, fenced: exit 1 (L7, L9, L10, G4, L11)
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
//	DispatchTask  -> the dispatcher's queue of the flow type (NotBefore kept)
//	SendTask      -> the task goes to the session that reserved it
//	ArmTimer      -> the timer wheel
//	NotifyClosed  -> wake WaitForFlow long polls; drop the run's timers and tasks
//	ReplyRPC      -> nothing: the stream that committed the RPC answers its caller
//
// The dispatcher (dispatch.go) hands tasks to worker sessions: a slot is
// reserved before the start is decided, so a task goes to exactly one
// worker (W3); SYNC starts are logged before the task is sent, ASYNC ones
// are sent at once and logged with the next batch (W4). The timer wheel
// (timers.go) submits TimerFired when a timer is due; the engine refuses
// stale ones and they are dropped. After a restart nothing is replayed as
// effects: Recover arms every running flow's timers, queues its pending
// tasks and fails the attempts an earlier epoch handed out (recover.go).
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
// results to commit.
package node
