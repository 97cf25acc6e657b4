// Package wal is the node's fenced batch log in the durable store: the batch
// format, the fence a new lease holder writes, the group-commit writer, the
// follower a hot standby uses, snapshots with log truncation, and the
// startup probe that the store enforces conditional writes.
//
// # Key layout
//
// Every object of a node lives under a configurable prefix (Layout):
//
//	<prefix>nodes/<nodeId>/lease                     the lease (package lease)
//	<prefix>nodes/<nodeId>/log/<seq>                 one batch per sequence number
//	<prefix>nodes/<nodeId>/snapshots/<nextSeq>       snapshots of the local store
//	<prefix>nodes/<nodeId>/manifest                  kept snapshots, log start
//	<prefix>nodes/<nodeId>/probe/<random>            the startup probe, deleted after
//
// Sequence numbers are written as 20 decimal digits, zero-padded, so that key
// order is numeric order: log/00000000000000000042 is batch 42. The first
// batch of a new node is 0. A snapshot's number is the first sequence number
// it does not cover: snapshots/00000000000000000100 reflects batches 0..99,
// and a restore continues at batch 100.
//
// # Batch format (version 1)
//
// All integers are big-endian. Offsets in bytes:
//
//	0   4  magic "DXWB"
//	4   1  format version, 1
//	5   1  kind: 1 records, 2 fence (a fence carries no records)
//	6   8  sequence number (u64); must equal the one in the key
//	14  8  writer epoch (u64)
//	22  4  record count n (u32), at most MaxRecordsPerBatch
//	26  …  n records, each: length (u32), then that many payload bytes
//	…   4  CRC-32C (Castagnoli) of every byte before it
//
// An empty records batch is 30 bytes. Decode accepts exactly this shape and
// nothing else: a short or truncated batch, a bad magic, version or kind, a
// record count that cannot fit, bytes after the last record, or a checksum
// mismatch is a *CorruptError naming the key. Readers also check that the
// sequence number inside matches the key they asked for, and that epochs do
// not go backwards along the log. Corruption is reported, never skipped.
// Because the shape is canonical, a decoded batch re-encodes to the same
// bytes; the writer relies on this when it compares a batch it finds with
// the one it wrote (G5).
//
// # Snapshot and manifest format
//
// A snapshot object is: magic "DXSN", version 1 (1 byte), nextSeq (u64),
// data length (u64), the data, and a CRC-32C of everything before it
// (still read, no longer written). Version 2
// (WriteSnapshotFrom and WriteSnapshot) keeps
// the data out of it, in parts of SnapshotPartBytes at
// snapshots/<nextSeq>.<attempt>.<part, 6 digits>: the object (the head) is
// magic, version 2, nextSeq (u64), the attempt's 8 random bytes (hex in the
// part keys), the part count (u32), the total size (u64), the CRC-32C of
// the whole data (u32), and a CRC-32C of the head. The parts are written
// first and the head last, create-if-absent, so a snapshot exists only
// whole; a reader checks size and checksum when it reaches the end. The
// manifest is JSON, {"version":2,"logStart":N,"snapshots":[…],"fences":[…]},
// listing the kept snapshots by nextSeq in ascending order (the newest
// DefaultKeepSnapshots by default). logStart is the newest kept snapshot's
// nextSeq; batches below it may be deleted, except those at the positions
// in fences (see Fencing, timeline (d)). logStart never decreases, and it
// is written before any deletion, so a reader that misses a batch and then
// reads the manifest can tell "truncated" (logStart above the batch) from
// "not written yet". Version 1, without fences, is still read; a binary
// that predates version 2 refuses a version 2 manifest by name.
//
// # Writing: group commit
//
// One Writer per serving lease holder. Submitters hand it records; while one
// batch write is in flight, new records gather into the next batch (up to
// MaxBatchRecords and MaxBatchBytes), so the batch size follows the store's
// latency and throughput comes from batching, not from parallel writes. Each
// batch is written with PutIfAbsent at the next sequence number and carries
// the writer's epoch (G1, L4). Once the write is confirmed the writer calls
// OnDurable (the node applies the batch to its local store), and only then
// are the batch's submitters told (G3).
//
// Batch size. A batch must be accepted within one AttemptTimeout (2 s) on
// the slowest supported store, or it is retried, and within LogWriteLimit
// or the process exits; a successor would meet the same batch. So group
// commit stops a batch at MaxBatchBytes (DefaultMaxBatchBytes, 8 MiB:
// 4 MiB/s of upload writes it within the attempt timeout; README: Bounded
// load has the measured write times). A single record above MaxBatchBytes,
// up to MaxRecordBytes, is written in a batch of its own: the node sizes
// MaxRecordBytes from the request limits, so such a record is one request
// of the largest legal size. The queue of records waiting for a batch has
// no bound of its own (every submitted record was decided and must be
// written); QueuedBytes lets the node refuse new work while it is long, so
// back-pressure reaches clients and never stops the writer.
//
// Outcomes of one batch write:
//
//   - success: the batch is durable; go on with the next sequence number.
//   - transient (5xx, throttling, 409 ConditionalRequestConflict, timeouts,
//     resets): the request may or may not have landed. Retry the same bytes
//     after a backoff (50 ms doubling to 1 s), each attempt cut off after
//     AttemptTimeout. If the batch is not accepted within LogWriteLimit
//     (10 s) of its first attempt, the writer stops with
//     ErrLogWriteTimeout (L10).
//   - precondition failed: the key is taken. Read it back. If it holds our
//     exact bytes (same epoch, same checksum), an earlier attempt landed
//     and its reply was lost: the write counts as done (G5). If it holds a
//     higher epoch, we are fenced: stop at once with ErrFenced (G4). Anything
//     else (a lower epoch, another batch of our epoch, corrupt bytes) is
//     ErrLogConflict or a *CorruptError and also stops the writer.
//   - permanent: stop.
//
// A stop is sticky: the batch in flight and every pending and later submit
// fail with the error, nothing further is written or acknowledged, Done is
// closed and Err returns it. The node exits 1 (L11).
//
// # Fencing
//
// Safety rests on the epoch and on conditional writes, never on clocks
// (L4). A process that acquires the lease with epoch E replays the log from
// its local position and writes a fence batch stamped E at the first free
// sequence number before it serves (Fence, G2, T1). Batches that an older
// epoch landed before the fence are applied, so no acknowledged write is
// lost. The old writer, still believing it holds the lease, can only write
// at a sequence number it has not written yet; the fence occupies exactly
// the next one, so its next write fails and it reads the fence's higher
// epoch and stops. In the timelines below the old holder has epoch 7, the
// new one epoch 8, and both aim at batch 42 (keys shortened to log/…0042).
//
// (a) The old writer loses the race.
//
//	t1  new (8)  GET log/…0042                     -> not found
//	t2  new (8)  GET manifest                      -> logStart <= 42, not truncated
//	t3  new (8)  PutIfAbsent log/…0042 fence E=8   -> ok; serves from 43
//	t4  old (7)  PutIfAbsent log/…0042 batch E=7   -> precondition failed
//	t5  old (7)  GET log/…0042                     -> fence, epoch 8 > 7
//	t6  old (7)  ErrFenced: fail all pending submits, acknowledge nothing, exit 1
//
// (b) The old writer's batch lands before the fence.
//
//	t1  new (8)  GET log/…0042                     -> not found
//	t2  old (7)  PutIfAbsent log/…0042 batch E=7   -> ok; old acknowledges its submitters
//	t3  new (8)  PutIfAbsent log/…0042 fence E=8   -> precondition failed
//	t4  new (8)  GET log/…0042                     -> records batch, epoch 7: apply it
//	t5  new (8)  GET log/…0043                     -> not found (then manifest check)
//	t6  new (8)  PutIfAbsent log/…0043 fence E=8   -> ok; serves from 44
//	t7  old (7)  PutIfAbsent log/…0043 batch E=7   -> precondition failed
//	t8  old (7)  GET log/…0043                     -> fence, epoch 8 > 7: ErrFenced
//
// The write the old holder acknowledged at t2 is in the new holder's state.
//
// (c) The reply is lost and the retry finds its own batch.
//
//	t1  w (7)    PutIfAbsent log/…0042 batch E=7   -> lands, reply lost (timeout)
//	t2  w (7)    backoff 50 ms, then PutIfAbsent log/…0042 with the same bytes
//	                                               -> precondition failed
//	t3  w (7)    GET log/…0042                     -> byte-identical to ours
//	t4  w (7)    counts as written; OnDurable, then acknowledge; next is 43
//
// Had the GET at t3 shown a fence of epoch 8, case (a) would apply; the
// submitters of the lost-reply batch are then told it failed although it
// may be in the log (the new holder applies it): an unacknowledged write
// may survive, an acknowledged one is never lost.
//
// (d) The fence outlives truncation. A writer's next sequence number is
// always the position of the fence that ended its epoch (the new holder
// fences at the first free position, which is exactly where the old writer
// goes next), so that fence must exist for as long as the old writer may
// wake up, which is forever: a frozen process or a suspended host resumes
// with its lease still valid by its own monotonic clock. Before it writes
// its fence, the new holder records the position in the manifest, and
// truncation never deletes a position the manifest lists.
//
//	t1  old (7)  frozen with a batch on its way to log/…0042
//	t2  new (8)  GET log/…0042 -> not found; GET manifest -> logStart <= 42
//	t3  new (8)  PutIfMatch manifest fences += 42
//	t4  new (8)  PutIfAbsent log/…0042 fence E=8 -> ok; writes 43 … 99
//	t5  new (8)  snapshot 100; manifest logStart = 100; delete log/…0000 …
//	             log/…0099 except the listed fences, so log/…0042 stays
//	t6  old (7)  resumes: PutIfAbsent log/…0042 batch E=7 -> precondition
//	             failed; GET -> fence, epoch 8 > 7: ErrFenced, nothing acked
//
// Had truncation deleted the fence at t5, the write at t6 would succeed
// below logStart, be acknowledged, and be read by nobody, and so would
// every later write of the old writer. Recording before writing means a
// crash between t3 and t4 leaves a listed position whose batch, if an old
// writer's batch lands there first, is simply kept. The list grows by one
// position per takeover (a few bytes each in the manifest, one small batch
// each in the log).
//
// # Following
//
// A hot standby's Follower GETs exactly the key of its next sequence number
// (never a List), so an idle standby costs one GET per poll (G8). A missing
// batch is ErrNoBatch; on the first miss and then every
// TruncationCheckEvery-th consecutive miss it also reads the manifest and
// reports ErrTruncated if truncation passed it, so that the node restores
// from the newest snapshot.
//
// # Snapshots and truncation
//
// Only the active process writes snapshots and truncates, and every delete
// is preceded by a LeaseCheck that re-reads the lease and confirms the same
// epoch still holds it (G7): a standby or a fenced process never deletes.
// WriteSnapshotFrom stores the snapshot create-if-absent and then records it in
// the manifest with a conditional write; Truncate deletes log batches below
// the manifest's logStart, except the fence positions it lists, and
// snapshots the manifest no longer keeps.
// Truncate removes snapshot parts with their snapshot, and the parts of
// attempts that never wrote a head once a newer snapshot is kept. Restore is
// OpenLatest (newest snapshot, streamed) plus the log from its nextSeq.
//
// # Startup probe
//
// ProbeConditionalWrites refuses a store that accepts a create-if-absent
// of an existing key or a replace-if-unchanged with a stale version (G6);
// some S3-compatible stores ignore If-None-Match and If-Match, and fencing
// is impossible on them.
package wal
