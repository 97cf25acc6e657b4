// Package lease implements the node lease: the single object in a node's
// durable store (blob.Store) that says which process of the node is active.
// The node computes the key, <prefix>nodes/<nodeId>/lease, and passes it in
// Config.Key.
//
// # Safety
//
// Safety comes from two things only: the epoch and conditional writes. Every
// write of the lease is a create-if-absent or a replace-if-unchanged of the
// version the writer read, so of two processes writing at once exactly one
// wins. Every acquisition raises the epoch by exactly one, and every log
// write carries the writer's epoch and is itself conditional, so a process
// that lost the lease is fenced off by the new holder's first log write no
// matter what its clock says. Clocks decide only when a process tries: when
// a standby may take an unreleased lease, and when the holder gives up on
// renewing. A wrong clock can cost availability, never data.
//
// # The record
//
// The lease object is JSON with a format version:
//
//	{"version":1,"nodeId":"n1","epoch":7,"holder":"host-a/4711/9f2c01d3e8aa",
//	 "durationMs":10000,"renewedAt":"2030-01-02T03:04:05.123456789Z",
//	 "released":false,"write":12}
//
// Its fields:
//
//   - epoch: raised by one on every acquisition, never by a renewal.
//   - holder: the process ID of the writer, unique per process start
//     (NewProcessID: hostname/pid/random).
//   - durationMs: the holder's lease duration. Readers compute the expiry from
//     this value, not from their own configuration.
//   - renewedAt: the holder's wall clock when it sent this write.
//   - released: set by a graceful release.
//   - write: numbers the holder's writes (1 = acquisition, then one per
//     renewal or release attempt). With holder and epoch it identifies one
//     write, so a holder recognises its own write when the reply was lost.
//
// An object that does not decode, has another version, or lacks a field is
// malformed: Read returns an error matching blob.ErrPermanent that names the
// key, and whoever meets it stops.
//
// # States, as a reader sees them
//
//   - absent: no object. An acquirer creates it with epoch 1 (create-if-absent).
//   - held: not released and the reader's wall clock is before
//     renewedAt + duration + 1 s. An acquirer waits (or, with FailIfHeld,
//     fails with a *HeldError naming holder, epoch and renewal time).
//   - released: released is set. An acquirer replaces it at once with
//     epoch + 1 (replace-if-unchanged).
//   - expired: not released, and the reader's wall clock is at or after
//     renewedAt + duration + 1 s (Record.ExpiresAt). An acquirer replaces it
//     with epoch + 1. The extra second covers clock differences between
//     hosts, which are assumed NTP-synced to well under a second.
//
// Two exceptions take a held lease at once with epoch + 1: Config.TakeOverHeld
// (a dev or local node holding dev.lock knows any holder is a stopped process
// of its own directory), and a lease that names this very process ID (an
// acquisition write of this process that landed although its reply was lost).
//
// A waiting acquirer re-reads the lease every PollInterval and at the
// computed expiry, whichever is sooner, so after a crash it acquires at
// renewedAt + duration + 1 s, at most duration + 1 s after the last renewal.
// After a graceful release it acquires at its next poll. An acquirer whose
// conditional write loses learns that another process acquired and goes
// back to waiting. Acquire is the one loop that waits for the lease, with
// the waiter's policy in its Config: a starting process and a cold standby
// use the defaults; a hot standby waits its 0-50 ms jitter (or its lagging
// delay) in Config.BeforeWrite, backs off 1 s to 30 s (RetryStart,
// RetryMax) and retries even permanent store errors (RetryPermanent) while
// it follows the log. A process holding off after a step down puts its
// rules in Config.Decide, which sees every read of the lease (and every
// failed acquisition write) before Acquire's own rules, as an
// Observation: it stops the wait once a read finds the lease held by
// another process (Observation.Held), makes Acquire wait and read again
// until its hold-off has ended, and then leaves the read to Acquire,
// which takes the lease back with epoch + 1; a failure after the
// hold-off stops the wait too. The node states those rules (package node,
// the hold-off phase).
//
// # Validity, as the holder sees it
//
// The holder measures time on its own monotonic clock. Its lease is valid
// until the moment it sent its last successful write (acquisition or
// renewal) plus the duration: Holder.ValidUntil. Counting from the send, not
// from the reply, keeps the holder's period inside what any reader computes
// from renewedAt. Holder.Valid is also false once Release begins or Run
// stopped with an error. A process frozen past its lease finds Valid false on
// resume before any timer of Run fires; the node's serving gate must consult
// Valid, not only Lost. A suspended host is a freeze the monotonic clock
// does not see (it stops with the host), so Valid also requires the wall
// clock to be within the duration of the same write's wall time: after a
// suspend longer than the lease, Valid is false at once. Only the stricter
// of the two clocks counts, so a wall clock stepped back never extends a
// lease; one stepped forward may end it early, which is safe.
//
// # Renewal
//
// Renewal is Holder.Run. The holder starts it right after the acquisition
// and keeps it running through everything it does before it serves
// (restoring a snapshot, replaying the log, fencing it) and while it
// serves: the first renewal is due d/3 after the acquisition write was
// sent, whatever the holder is busy with, and a Run started after the
// renewal cutoff returns ErrRenewalTimeout at once. Package node runs one
// Run per lease period, from the acquisition to the release or the stop.
//
// With d the duration and S the send time of the last successful write:
//
//	renewal due          S + d/3
//	lease period ends    S + d          (ValidUntil)
//	renewal cutoff       S + d - 100 ms
//	attempt cut-off      T = clamp(d/6, 1 s, 5 s)   (AttemptTimeout)
//	backoff              100 ms, 200 ms, 400 ms, 800 ms, then 1 s each
//
// Each renewal is one replace-if-unchanged write of the version last
// written. An attempt starting at t is cut off at t + T if another attempt
// could still start before the cutoff after it, that is if t + T + the next
// backoff is before the cutoff; otherwise it is the last attempt and may run
// until the cutoff (up to T + 1 s, so more than 5 s with a long lease). After
// a transient failure (5xx, throttling, 409 conflict, timeout, reset) the
// next attempt starts after the backoff, but only if the backoff ends before
// the cutoff; otherwise, or when the cutoff comes during an attempt, Run
// returns ErrRenewalTimeout. The process thus stops before its lease period
// ends, and about 1.1 s (less any clock difference between the hosts)
// before a standby may take over.
//
// An attempt whose write fails its precondition reads the lease. If the lease
// shows a write of this holder that is still unresolved (same holder and
// epoch, one of the write numbers it sent since its last success), an
// earlier attempt landed after it was cut off: the holder adopts it, with
// validity counted from when that attempt was sent, but only if the read
// returns before the cutoff. Anything else (another holder, a higher epoch,
// the lease gone) is ErrLost at once. A permanent store error (permission
// denied, missing bucket, malformed lease) stops Run at once too. Run
// returns a *StopError for every stop; the node exits with status 1.
//
// # Release
//
// Release writes the same epoch with released set, conditional on the last
// version, so that a successor acquires at once without waiting for the
// expiry. It first stops Run (waiting for a renewal attempt in flight) and
// makes Valid false. If it meets a late renewal of its own it adopts it and
// writes the release over it; if another holder has the lease it returns
// ErrLost and leaves that lease alone.
//
// # Durations and write counts
//
// Each renewal is one conditional write, made every d/3: 10,800/d writes an
// hour with d in seconds:
//
//	duration  renew every  attempt cut-off  cutoff   standby expiry  writes/hour
//	3 s       1 s          1 s              2.9 s    4 s             3,600
//	10 s      3.333 s      1.667 s          9.9 s    11 s            1,080
//	30 s      10 s         5 s              29.9 s   31 s            360
//	60 s      20 s         5 s              59.9 s   61 s            180
//	120 s     40 s         5 s              119.9 s  121 s           90
//
// A holder makes no reads while renewals succeed; acquisition costs one read
// and one write, a release one write. For a single replica 60 s is the
// recommended duration (about 180 writes an hour instead of about 1,080);
// keep it at or below about 120 s, since the wait after a crash grows with
// the duration while the savings shrink. With a standby, keep the 10 s
// default: the duration bounds the failover time after a crash.
//
// # Worked timeline: 10 s lease, a 3 s store stall
//
// The holder acquired at 0.000 s (renewedAt 0). The store stops answering
// from 3.000 s to 6.000 s and answers the requests it queued at 6.000 s.
//
//	0.000  acquisition write sent and confirmed; valid until 10.000,
//	       renewal cutoff 9.900, T = 1.667, renewal due 3.333
//	3.333  attempt 1 sent (write 2); another attempt fits, so its
//	       cut-off is 3.333 + 1.667 = 5.000
//	5.000  attempt 1 cut off (transient); backoff 100 ms ends 5.100 < 9.900
//	5.100  attempt 2 sent (write 3), cut-off 6.767
//	6.000  the store recovers. Either:
//	       (a) write 2 was dropped: attempt 2 succeeds. Valid until
//	           5.100 + 10 = 15.100, next renewal due 8.433.
//	       (b) write 2 lands first: attempt 2 fails its precondition,
//	           reads the lease, finds write 2 and adopts it (6.000 is before
//	           the cutoff). Valid until 3.333 + 10 = 13.333, next renewal
//	           due 6.667.
//
// Had the stall lasted past the cutoff instead:
//
//	3.333 - 5.000  attempt 1, cut off at T
//	5.100 - 6.767  attempt 2, cut off at T (backoff 100 ms)
//	6.967 - 8.633  attempt 3, cut off at T (backoff 200 ms)
//	9.033 - 9.900  attempt 4 (backoff 400 ms): 9.033 + 1.667 + 0.800 is past
//	               the cutoff, so it is the last and runs to the cutoff
//	9.900          Run returns ErrRenewalTimeout, Valid is false; the process
//	               exits 1, 100 ms before its own period would have ended
//	11.000         renewedAt 0 + 10 s + 1 s: a standby may acquire (epoch + 1)
//
// The holder's last valid moment (10.000 at most) thus comes before the
// earliest takeover (11.000). That ordering is for availability and clean
// hand-overs only: if a pause or a clock jump broke it, the new holder's
// epoch would still fence every log write of the old one.
//
// # Worked timeline: 10 s lease, a takeover that recovers for 31 s
//
// A standby acquires epoch 2 at 0.000 after its predecessor crashed, and
// its recovery (a cold replay of the whole log, or a snapshot restored
// from object storage, then the fence) lasts 31 s. Another standby waits
// for the lease meanwhile.
//
//	 0.000  acquisition write (write 1) sent and confirmed; Run starts, and
//	        the recovery with it; valid until 10.000
//	 3.333  renewal (write 2); valid until 13.333, cutoff 13.233
//	 6.667  renewal (write 3); and so on every 3.333 s
//	30.000  renewal (write 10); valid until 40.000
//	31.000  recovery done, fence of epoch 2 written; Valid is true: the
//	        node opens its gate and reports ready, still epoch 2
//
// The waiting standby reads renewedAt moving every 3.333 s and never finds
// the lease expired: one acquisition, one epoch. Had Run started only at
// 31.000, once the recovery was done, the period would have ended at
// 10.000, the waiting standby would have acquired epoch 3 at 11.000
// (renewedAt 0 + 10 s + 1 s) and started a recovery of its own, and at
// 31.000 Run would have returned ErrRenewalTimeout at once (cutoff 9.900):
// exit 1 after 31 s of work, and the same again for every takeover whose
// recovery outlasts the lease.
//
// A lease lost during the recovery stops Run exactly as while serving:
// another holder's write is found at the next renewal (ErrLost), a store
// that accepts no renewal stops it at the cutoff (ErrRenewalTimeout). The
// node then ends the recovery at once and exits 1 without serving and
// without a release.
package lease
