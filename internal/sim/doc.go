// Package sim is a seeded simulation of whole node processes in virtual
// time (testing/synctest): the machine looks for the next safety hole
// instead of an example test.
//
// # What runs
//
// Three processes of one node ID share one memory store (blob/mem): p1 a
// hot standby, which follows the log into its local store while it waits
// (wal.Follower; a snapshot restore when truncation passed it) and takes
// an available lease after a 0-50 ms jitter, p0 and p2 cold standbys.
// Each runs the real protocol code: lease.Acquire and
// Holder.Run (renewal from the acquisition on), wal.Fence with
// serving.ReplayWhile into its own local store (flowstore.MemStore, kept
// across restarts unless a kill drops it), a wal.Writer under
// node.Supervise, and a serving.Core that recovers (T2-T4) and serves.
// While it serves, it writes snapshots of its local store and truncates
// the log at moments drawn from the seed (wal.WriteSnapshotFrom,
// wal.Truncate, with the holder's lease check, G7); a process whose local
// store is empty or behind a truncated log restores the newest snapshot
// first. The lease period itself (proc.period) mirrors node's
// leasePeriod.run without its gRPC surface and step down: that one needs
// a listener and a grpc.Server, which a synctest bubble cannot hold. The
// local store is an in-memory flowstore.MemStore with the simulator's own
// snapshot format, not Pebble.
// When a period ends (renewal timeout, lease lost, fenced) the process
// "exits 1" and starts again under a new process ID on the same local
// store. A step down drains for up to 2 s, stops the core, flushes the
// writer and releases the lease (A3, L12), then holds off 2 s.
//
// Clients start flows with request IDs and retry each call until it is
// acknowledged, publish to the flows that wait for a message, and wait
// for every flow to end; two workers open sessions on whichever process
// serves (OpenSession, Take, Result, Heartbeat, two slots each) and run a
// workload whose outcome is known in advance: chain (S1 -> S2 -> S3),
// fan-out (F -> A and B), wait (WaitFor a channel message, then Execute
// with it), timer (WaitFor a durable 2 s timer, staging an attribute;
// Execute stages another; the client sets a third with SetAttributes),
// stop (the step waits for a message nobody sends; the client cancels or
// terminates the flow with StopFlow, retried until acknowledged or the run
// is seen closed), reset and count (E37, lifecycle.go); S2, A, B and R2
// are ASYNC (T3). A WaitFor task of a step
// without WaitFor (a flow started before any worker declared its type) is
// answered "no wait", as the SDK does, and logged as an event. Like the SDK, a worker
// resends the results whose answer it did not get on its next session,
// where a new epoch answers STALE_EPOCH.
//
// Run lifecycle traffic (E37, lifecycle.go). A reset flow (R1 waits for
// a message on "go", then R1 -> R2 -> R3) has its client set an
// attribute, publish, and reset it once or twice, each to a point of the
// seed's (the beginning, before the first R2, before R3-1; a run reset
// to R3-1 has no R2 to go back to, so the beginning instead), while the
// run runs or once it closed; each reset names the exact run, the one the
// client knows. A count flow's step C takes one message on "inc" and
// moves to C with its input plus one until it took four, in order (a
// message lost or counted twice fails the flow), so its final output is
// the value the runs carried; its client publishes the four with request
// IDs and asks for continue-as-new (ContinueAsNew naming the latest run)
// before some of them, the C-2 decision of every other count flow asks
// for it (Decision.ContinueAsNew), and the processes'
// limits.continueAsNewHistoryEvents is the least allowed (10,
// Config.ContinueAsNewHistoryEvents), which a count run reaches after
// three messages unless a continuation came first (the other flows' runs
// only after failed attempts). A quarter of the other flows are
// continued once by their client while they run (steps, attempts in
// flight, waits, the durable timer, messages and attributes go to the new
// run), and a sixth of the chain, fan, wait and timer flows (others) are
// reset once they completed (to the first S2, the first A, which makes A and B again,
// the beginning, whose publish is re-applied, and T-1's Execute, whose
// timer wait counts as fired), then waited for again. Some
// clients send their StartFlow again after a reset or continuation (a
// late retry with the start's request ID): it must be recognised, not
// start a run. Resets and continue-as-new calls carry request IDs, and
// one in four answers of one that landed gets lost on its way to the
// client, which sends the same call again as the SDK does: it must be
// answered with the run the first send made (issue 14), a refusal or a
// second new run (a double reset or continuation) fails the run at once;
// after a try that failed the client reads the run it named, whose
// forward link (with its request ID) says whether the call landed. A
// reset whose run continued as new first, or of a continuation, is
// skipped (a continuation cannot be reset).
//
// # Faults
//
// A seeded math/rand/v2 source draws the schedule before the run starts,
// over the first 40 s of virtual time; two in three faults hit whichever
// process serves at that moment:
//
//   - kill: the process's context ends, nothing is released, requests it
//     has not sent are dropped, requests on their way may still land; the
//     local store is kept or (one in three) dropped; restart after up to
//     5 s.
//   - freeze for up to 9 s (the lease is 3 s, a standby takes over at
//     4 s): a gate stops every store request of the process, and every
//     call of clients and workers to it, whatever their contexts say; on
//     resume they go on, so a write on its way lands late. The process's
//     in-memory goroutines (timers, dispatch) keep running, and its clock
//     is the bubble's.
//   - host suspend (one freeze in three): a freeze during which the
//     process's monotonic clock stops while the wall clock and the other
//     processes' clocks run on (its lease's Config.Clock), so that on
//     resume its monotonic clock says the lease period still runs.
//   - store faults for a while on one process's requests: 5xx,
//     throttling, latency up to 3 s, lost replies (the write lands, the
//     caller sees a transient error), and conditional-write conflicts:
//     S3's 409 ConditionalRequestConflict (transient, nothing written), a
//     412 for a conditional write that landed (what a store client that
//     retried its own write after a lost reply answers), and a 412 for a
//     PutIfMatch that did not land with nothing in its way (a spurious
//     conflict). A spurious 412 of a PutIfAbsent (the key said to exist
//     when it does not) is not injected: blob.Store promises otherwise
//     and wal.Values.Put relies on it (a value object's key names its
//     bytes); with it, seeds 14, 37 and 45 lost a value object. Each
//     request's fault is a hash of the seed, the process, the request
//     and its count, not a draw from a shared stream, so it does not
//     depend on goroutine order.
//   - step down of a process while it serves.
//   - per task, from the seed: a worker disconnects with tasks in hand,
//     or sends a result twice.
//
// Then the run heals (every gate opens, every process starts) and waits
// up to 3 minutes of virtual time for every flow to end.
//
// # Invariants
//
//   - Continuously (every 10 ms of virtual time): at most one process
//     counts its lease valid (Holder.Valid), and no worker session is
//     handed more tasks than its slots.
//   - Each log position is written once: the store records every batch
//     that ever landed (truncation deletes them later), and a position
//     written again with other bytes, a batch re-created after truncation
//     deleted it, fails the run at once.
//   - That history of the log is gap-free from 0 and its epochs never go
//     down: no batch of an epoch follows a batch of a higher one.
//   - Replay equals live: the history replayed from scratch into a fresh
//     store, up to the batch each process applied, gives that process's
//     states (engine.MarshalState bytes, every run of every flow, and
//     each flow's latest run).
//   - Restore equals history: the newest snapshot plus the log from its
//     nextSeq (up to the first missing batch, with nothing after that gap)
//     reaches the last batch and gives the same states. This is the final
//     state the next checks read.
//   - No result of a superseded attempt commits: along the whole log, a
//     WaitFor or Execute result record commits only for its step's
//     current attempt of that method, once, after that attempt's start,
//     in a batch of the epoch that started it; a start is written in its
//     own epoch, once; a failure names the current attempt; no WaitFor
//     attempt is scheduled for a step without WaitFor (E4); a closed run
//     takes no result, and a continue-as-new carries its run's attempts
//     to the new run, where a running one commits under its old token
//     (E37).
//   - No acknowledged change is lost: every acknowledged start is in the
//     final state (the whole log replayed), every acknowledged publish is
//     the output of its wait flow, every accepted Execute result is
//     there (its movements ran, its output is among the outputs of its
//     run, or of the last continuation of it), every acknowledged
//     attribute write (the client's, and those staged with an accepted
//     WaitFor or Execute result) has its value in the latest run.
//   - A durable timer fires no earlier than its time: T's Execute task
//     comes with the timer fired, not before its fire time, which is at
//     least 2 s after the first WaitFor result of the flow was sent.
//   - Each flow completes exactly once, with the outputs the workload
//     expects, and each step runs exactly one execution (a result
//     committed twice would start a second one); a stop flow ends
//     CANCELED or TERMINATED as its client asked, its history ending with
//     the close. For a flow that was reset or continued this is its
//     latest run (one execution of each step, counting those at the
//     point or carried, and one output each); for a count flow the last
//     of its continuations (C-1 ... C-4, carried, and the output
//     "count:<ID>:4").
//   - Runs and their links (E37): from the run the acknowledged start
//     answered, the forward links (FlowState.ResetRunID, ContinuedRunID)
//     reach every run of the flow ID, once each, and end at its latest
//     run, which is the run the client's last WaitForFlow answered
//     (WaitForFlow follows the links: it never answers a run that one
//     leaves, checked when it answers). Each new run links back
//     (PreviousRunID, and its FLOW_STARTED's reset or continued-from
//     run); a reset run was COMPLETED or TERMINATED, a continued one is
//     CONTINUED_AS_NEW. The reset links are exactly the resets the client
//     saw land, in order (acknowledged, or found landed after a lost
//     answer): every reset made one new run, none made two; the
//     continuations triggered by a client are exactly those the client
//     saw land, once each; a retry after a lost answer that made a second
//     run, or was refused, fails the run at once. A continuation's new run holds its old
//     run's attributes, outputs and step counters, and every count flow
//     continued at least once. A read (GetFlowState of the flow's latest
//     run) never sees a run with a forward link.
//   - The client-visible history is linearizable (porcupine, per flow;
//     history.go): each flow's acknowledged start and client attribute
//     write, and reads of its state through the process's real
//     FlowService handlers (server.FlowService: the server's read gate,
//     L15) after each acknowledgement and every 1-5 s, against a model
//     of a flow that exists from its start on, holds the client's
//     attribute from its write on (written only while it runs), and
//     closes for good unless its client resets it (its new run runs
//     then; a continuation is not seen). A stale read (a process answering from state
//     another process changed since) or an acknowledged write a later
//     read does not see fails it.
//   - Liveness: every flow ends within 3 minutes after the faults.
//
// # Running it
//
//	go test ./internal/sim -run 'TestSim$' -seeds 1000      # or make sim SEEDS=1000
//	go test ./internal/sim -run 'TestSim$' -seed 27 -v      # or make sim SEED=27
//	go test ./internal/sim -run 'TestSim$' -seed 27 -repeat 20 -simlog -v
//
// make test runs 50 seeds under -race (with the other packages, about
// 37-39 s of CPU) and then 1000 without (about 105-125 s of CPU, 55-65 s
// on two cores: -par seeds run at once, GOMAXPROCS by default, each in its own
// bubble; -simlog runs one at a time); DEX_SIM_SEEDS or -seeds changes
// the count. A failing seed prints
// its fault schedule and the run's events; -showif TEXT prints those of
// every run with an event containing TEXT. The
// schedule, the store faults and the workers' choices are the seed's; the
// order in which goroutines of one virtual instant run is the Go
// scheduler's, so a replay follows the same schedule but may interleave
// differently: -repeat runs one seed many times and counts its failures.
package sim
