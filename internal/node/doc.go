// Package node ties the lease, the log, the local store, the serving core
// (package serving) and the server into one process lifecycle: that of
// `dex-server-zd dev` and `local` (RunLocal) and that of `dex-server-zd
// serve` with a cold or hot standby (RunServe), whose metrics (package
// metrics) it feeds and serves.
// What an active process does while it serves (the sequencer, dispatch,
// timers, recovery of the serving state, admission) is package serving's;
// this package opens what the core runs on, starts and stops it, and
// decides when the process serves.
//
// # Words
//
// Three words name three things, and this package and its docs use them
// so:
//
//   - A phase (apiPhase, apisurface.go) is what the process's API answers
//     as for a while: a standby phase (before the lease, or in a hold-off)
//     or a serving instance. Each phase has its own server.Server and gate;
//     a connection stays with the phase that accepted it.
//   - A serving instance is the phase of one lease period: the only kind
//     of phase whose gate ever opens, and it never opens again once closed
//     (H6). dev and local start in one, which their first lease period
//     takes.
//   - A lease period (leasePeriod, leaseperiod.go) is one holding of the
//     lease, from its acquisition to its release or loss: it renews the
//     lease, recovers, runs one serving.Core and serves in one serving
//     instance. A take-back starts a new lease period with a new serving
//     instance.
//
// The serving core (package serving) is the code a lease period runs, not
// a phase; the process (this package) holds the phases and the periods.
//
// # Lifecycle of dev and local (RunLocal)
//
//	lock DIR/dev.lock (D2; a filesystem without locks: warn, D4)
//	refuse DIR/relaxed.unclean (D7); write it in relaxed mode
//	open DIR/log as the blob fs store, and (when flock works) the log batches
//	  as segment files in DIR/log-segments (seglog, OpenDataLog): strict
//	  fsyncs, the others do not (D5, D6)
//	probe conditional writes (G6), listen (UNAVAILABLE until serving)
//	acquire the lease; while dev.lock is held, a held lease is taken over (D3)
//	renew it from now on, every lease.duration/3 (L2), through the recovery
//	  and serving: one renewal loop per lease period
//	open DIR/state (the local store); Fence from Applied()+1: replay the
//	  log into it, write the fence (T1, G2)
//	start the writer under Supervise; Recover (T2-T5); open the gate (with
//	  a valid lease only, H2)
//	SIGTERM/SIGINT: drain (A3, K2), stop the streams, flush, release (L12), exit 0
//	lease lost, log write limit, fenced: exit 1 (L7, L9, L10, G4, L11)
//
// Everything from the renewal on is one lease period (leasePeriod.run in
// leaseperiod.go), shared with serve; so is the API surface (startAPI in
// apisurface.go) and the metrics listener. Both take their TLS and
// credentials from security.go: api.tls (a plaintext client of a TLS API
// is told so, server.RefusePlaintext), auth and admin.credentialFile (one
// auth.Authorizer per process, shared by every phase's server.Server),
// metrics.tls and metrics.tokensFile.
//
// The renewal starts before the recovery, not after it: a recovery can
// take longer than lease.duration (a snapshot restored from object
// storage, a cold replay of thousands of batches), and a lease renewed only
// once the process serves would have expired by then, letting another
// standby take it while the recovery still ran, and ending the recovery in
// "lease renewal timed out" (a crash loop of takeovers). The recovery runs
// under a context that ends when the renewal stops, and the replay applies
// no batch after that. Supervise then watches the same renewal beside the
// writer; a release (a graceful stop, a step down, a failed takeover) or
// the end of the period ends it.
//
// # Lifecycle of serve: active and standby (RunServe)
//
// Several processes run the same node: the same nodeId and storage
// settings, each with its own localStore.dir. At most one holds the lease
// and serves; the others are standbys (S1). The phases of one process:
//
//	starting    flock localStore.dir (a second process on it fails naming
//	            it); open the API and metrics.listen (a standby phase:
//	            UNAVAILABLE, NOT_SERVING, /readyz 503, /livez 200); open
//	            the durable store of storage.backend (s3: bucket,
//	            endpoint, region, pathStyle, caFile, sse, kmsKeyId,
//	            credentials from the AWS environment; postgres: dsn (TLS
//	            with its sslmode), table; fs: a directory shared by
//	            processes on one host), read the lease key, probe
//	            conditional writes (G6). While that fails with a transient
//	            error (StoreUnavailable: refused, reset, DNS, timeouts, 5xx,
//	            throttling) the process waits and tries again, 1 s doubling
//	            to 30 s (storewait.go), logging each attempt ("durable
//	            store not reachable; waiting", attempt, err) and answering
//	            with "waiting for the durable store ...: <err>" as the
//	            reason it does not serve; a supervisor's restart backoff
//	            would delay recovery long after the store is back. A
//	            permanent error (credentials, access denied, a missing
//	            bucket, database or table permission) or a store that
//	            ignores conditional writes exits 1 at once; a DSN or table
//	            name that cannot work is a configuration error (exit 2,
//	            CheckServeConfig). Keys: wal.NewLayout(prefix,
//	            nodeId), prefix = storage.s3.prefix for s3, none otherwise.
//	standby     cold (S2): idle, no local store open, nothing followed.
//	            lease.Acquire re-reads a held lease every
//	            standby.heldLeasePollInterval (250 ms) and at its expiry.
//	            With lease.failIfHeld a held lease fails startup instead,
//	            naming the holder (L14, exit 1).
//	            hot (S3, hot.go): opens its local store at once (an empty
//	            one is first restored from the node's newest snapshot:
//	            bootstrapping, snapshot.go) and
//	            follows the log with a wal.Follower from Applied()+1,
//	            applying each batch with the replay's apply (no effects);
//	            without a next batch it waits heldLeasePollInterval (one
//	            GET per poll, G8). States (S10): following; behind when
//	            the lag (time since the follower last reached the end of
//	            the log) exceeds behindLagThreshold; restarting after an
//	            error (backoff 1 s doubling to 30 s, then a new follower
//	            from Applied()+1); bootstrapping again when its next batch
//	            was truncated away (the local store is rebuilt from the
//	            newest snapshot, then following goes on from there);
//	            failed when a restore lost the local store.
//	            dex.HotStandby is SERVING only while following (H3).
//	            It waits for the lease in lease.Acquire, the one waiting
//	            loop, with its own policy (hot.go acquire): it reads the
//	            lease every heldLeasePollInterval and, once it is released
//	            or expired (Record.AvailableAt: expiry + 1 s, L13), waits a
//	            random 0-50 ms when following, laggingTakeoverDelay
//	            otherwise (S8; Config.BeforeWrite), then writes it. A write
//	            lost to another process goes back to waiting; any other
//	            failure before the lease is held is retried after a backoff
//	            of 1 s doubling to 30 s, following meanwhile (S9). Holding the
//	            lease it stops the follower and hands the open local store
//	            to the lease period, whose replay covers only what the
//	            follower had not applied yet.
//	acquiring   a released lease is taken at the next read (L12); an
//	            unreleased one at renewedAt + lease.duration + 1 s, the
//	            earliest moment a crashed holder's lease counts as expired
//	            (L13). The conditional write decides races (L3).
//	recovering  renew the lease from here on (every lease.duration/3,
//	            L2; a hot standby first stops its follower, a cancelled
//	            GET or the batch in hand); open the local store, replay
//	            the log from its applied position, write the fence (T1,
//	            G2); an empty local store, or one behind the start of a
//	            truncated log, is first restored from the newest snapshot
//	            (snapshot.go); writer under Supervise; Recover (T2-T5);
//	            the gate opens and Ready is called only with a valid lease
//	            (H2). The recovery may last longer than lease.duration. A
//	            lease lost or not renewed in time meanwhile ends it at
//	            once (at the next batch of a replay): exit 1, with nothing
//	            released and nothing served (L7, L9, L11). Any other
//	            failure here releases the lease and exits 1 (S9).
//	serving     as dev; SIGTERM drains, releases and exits 0 (K2, L12);
//	            a lost lease, the log write limit or a fence exits 1 (L11).
//	stepping    AdminService.StepDown (stepdown.go; A3, A4): public calls
//	down        answer UNAVAILABLE "stepped down", Describe and StepDown
//	            FAILED_PRECONDITION (A8); workers get Drain(STEP_DOWN), no
//	            new task is handed out, and running attempts have up to
//	            lifecycle.attemptDrainTimeout to send their results (the
//	            lease is renewed and results commit meanwhile); then the
//	            instance's streams end, the writer flushes and the lease is
//	            released. The local store closes in the background.
//	hold-off    (lifecycle.go holdOff; A5-A7) a new standby phase, still
//	            answering "stepped down" and FAILED_PRECONDITION; a hot
//	            process reopens its local store, once the old period has
//	            closed it, and follows the log. The process waits in
//	            lease.Acquire with the hold-off's rules in Config.Decide
//	            (holdOffPolicy), which reads the lease every
//	            heldLeasePollInterval (and at the hold-off's end, and when
//	            the old store closes): once another process holds it the
//	            step down answers takenOverByAnotherProcess and the process
//	            is a standby again; from standby.stepDownHoldOff after the
//	            release, with the old store closed and the lease not held
//	            by another process, Acquire takes it back (new epoch; a
//	            write lost to another process reads again) and the step
//	            down answers takenBackByThisProcess once the new period
//	            serves. A read failing after the hold-off, or a failed
//	            take-back write, answers unknown with the reason, and the
//	            process is a standby again; a read failing before it is
//	            read again at the next poll.
//	            If the old period's local store is still open
//	            DefaultStuckStoreBound (64 s) after the release (a stuck
//	            task), the step down answers INTERNAL unless another
//	            process took over, and the process exits 1 without taking
//	            the lease (A7). dev and local step down the same way (a
//	            take-back: dev.lock keeps other processes out).
//
// What callers see while the process does not serve: public FlowService
// calls and WorkerTaskService streams answer UNAVAILABLE, on a standby with
// the message "this process is a cold (or hot) standby of node ...; retry
// on the active process" (S6, P3), so that the SDK moves to its next
// address (P5); the readiness names ("", dex.FlowService,
// dex.WorkerTaskService) answer NOT_SERVING, and dex.HotStandby SERVING
// only on a hot standby that is following (H2, H3). AdminService.
// Describe answers UNAVAILABLE on a standby: it is not the active process,
// and A8 keeps FAILED_PRECONDITION for a step down or its hold-off in
// progress. The gate consults the lease on every call
// (serving.Core.Serving: Holder.Valid), so a process whose lease ran out
// (a freeze longer than the lease) answers UNAVAILABLE and NOT_SERVING at
// once, before its renewal loop notices and it exits 1 (L15, L11).
//
// Serving instances and connections (H5, H6, A6): every phase of the
// process (standby, serving instance, hold-off, serving instance after a
// take-back, ...) has an apiPhase of its own: a server.Server, whose gate
// its handlers, worker streams and health answers all consult, and a
// grpc.Server. A phaseListener (phaselisten.go) accepts on the API listener
// and hands each connection to the current phase; a connection stays with
// the phase that accepted it. So a connection opened to a serving instance
// that stepped down answers NOT_SERVING and "stepped down" for as long as
// it lives, even after a take-back re-armed the lease (H6): the new
// instance has a gate of its own. A StepDown that reaches a standby's
// connection finds no serving instance there and answers
// FAILED_PRECONDITION, even if the process has just taken over (A6).
// Standby phases' grpc.Servers are created with
// server.StandbyGRPCOptions: GOAWAY to each connection after
// server.StandbyConnectionAge (3 s, +/-10% jitter), closed 1 s later at the
// latest, so that a client that reached a standby reconnects and reaches
// the active process; a retired serving instance gets GOAWAY on its
// connections the same 3 s after its step down. dev and local start in a
// serving instance.
//
// A process that starts serving ends its standby phases' connections at
// once (apiSurface.endStandbyPhases, called as the gate opens, before
// "serving" is logged): their long-lived streams end, each connection gets
// GOAWAY, calls in flight finish within server.StandbyConnectionAgeGrace.
// A client that reached the process as a standby (or during a hold-off)
// reconnects, and the phaseListener hands the new connection to the
// serving instance: it is answered within milliseconds of "serving",
// where it used to be refused as by a standby for up to the 3 s age. The
// alternative, a standby phase's gate forwarding to the next serving
// instance, was not chosen: every answer on a connection would then come
// from one of two gates, a gate would have to tell a standby phase (may
// forward) from a retired serving instance (must never forward, H6), and
// a StepDown on a standby's connection would reach the new instance (A6
// wants FAILED_PRECONDITION). Ending the connection keeps "one connection,
// one gate, never reopened" as it is. What this does not cover: a
// retired serving instance's connections keep their closed gate until
// their own GOAWAY 3 s after the step down, even when a take-back serves
// sooner (stepDownHoldOff below 3 s): H6 requires such a connection to go
// on answering NOT_SERVING, and its public calls say "stepped down", so
// the SDK moves to its next address.
//
// Failover times follow: after SIGTERM of the active, one poll interval
// plus the standby's recovery; after a crash, up to lease.duration + 1 s
// after the last renewal (between 2/3 of the duration + 1 s and the
// duration + 1 s after the crash), plus the recovery. A cold standby's
// recovery replays the whole log into an empty local store (one GET per
// batch), so it grows with the log, and may outlast the lease, which is
// renewed throughout; a hot standby (S3) keeps up instead and replays only
// the fence and the batches of its last poll (S7).
//
// # Snapshots (snapshot.go)
//
// The active writes a snapshot of its local store (localstore.Checkpoint,
// one consistent Pebble snapshot, streamed into the durable store in parts
// of wal.SnapshotPartBytes, so never held in memory whole) when
// one is due (snapshotDue): after snapshots.everyBatches log batches at the
// latest (default 10000; 0 disables), and after 1000 once the log since
// the last snapshot holds half as many bytes as that snapshot. It records
// it in the manifest, which keeps the newest snapshots.keep (default 2),
// and deletes the log batches below the newest kept snapshot and the
// snapshots no longer kept, each request after a lease check (G7). A
// failure is logged and the log is kept until the next attempt. In serve
// the Pebble store lives in localStore.dir/state, so that a restore can
// replace it under the locked localStore.dir.
//
// # Metrics
//
// The process's metrics are package metrics'; this package feeds them and
// serves them: it wraps the durable store (Metrics.MeterStore) and the
// lease's store (Metrics.MeterLease) right after opening them, hands the
// core and the writer their hooks (serving.CoreConfig.Metrics,
// Metrics.WriterHook), reports each lease period's epoch, writer and
// serving instance, the standby state or the hot standby (hot.go), the
// snapshots, and what /readyz says while the process does not serve; and
// it serves Metrics.Handler on metrics.listen (apisurface.go,
// startMetrics).
//
// # Web UI (webui.go)
//
// With web.listen set the process serves package web's UI beside the
// metrics listener, from the same point of startup (before the durable
// store is open in serve, so a process waiting for its store already
// shows its node page). webView is the UI's view of the process: the
// current API phase's server.Local and authorizer (so the UI's calls meet
// the same gate, admission and roles as a gRPC call on that phase),
// metrics.Status, the lease record read from the durable store on each
// node page request, and the takeovers and step downs the lifecycle
// records (the last 20).
package node
