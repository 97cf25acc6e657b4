// Package seglog is a blob.Store for one process on local disk whose log
// batches are appended to segment files instead of being a file each.
//
// The fs store makes every object a file of its own: in strict mode a new
// file, fsynced, moved into place, and its directory fsynced, about 1.5 ms
// per log batch on an ordinary disk, which is most of a single caller's
// latency in dev and local. Here the keys that name log batches
// (<prefix>nodes/<node>/log/<20 digits>, wal.Layout.LogKey) are records
// appended to the active segment file, made durable with one fsync of that
// file in strict mode (its directory entry was made durable when the
// segment was started, D5), while every other key (the lease, the
// manifest, snapshots, probes) goes to the fs store unchanged.
//
// Batches written as files before a data directory used segments stay
// readable (and deletable) through the fs store: a key is looked up in the
// segments first, then as a file, and a put finds either taken.
//
// Several processes may share the directory, as with the fs store: every
// operation on a log key runs under an exclusive flock on DIR/.lock and
// first catches up with what other processes appended (new records at the
// end of the newest segment; a changed set of segments reloads all), so a
// create-if-absent of a log key fails for every process but the first, and
// fencing (G1, G4) holds. dev and local use it only on a filesystem whose
// flock works (they hold dev.lock); elsewhere they keep the fs store.
//
// # Records
//
// A segment is a sequence of records: length (u32) and CRC-32C (u32) of the
// body, then the body: kind (1 byte: put or delete), the sequence number
// (u64) and, for a put, the data. Open reads every segment, oldest first,
// and rebuilds the index; a later put of a key supersedes an earlier one
// (relocation, below, writes such copies).
//
// # Torn tails and corruption
//
// A record that cannot be read (cut short, an impossible length, a failed
// checksum) is a torn tail, a write that never completed, only if it runs
// to the end of the file:
//
//   - its header is cut short by the end of the file; or
//   - the extent its length claims (offset+8+length) reaches or passes the
//     end of the file, and the length is at most the record limit (1 GiB:
//     no append writes more, and a torn write leaves the bytes it was
//     writing or zeros, never a larger length); or
//   - every byte from the end of the extent its length claims (or from its
//     offset, when the length is above the limit) to the end of the file
//     is zero: an unfinished write leaves zeros where it did not reach,
//     in preallocated space or past a sector that was not written, and
//     such zeros in the length field only make it claim less.
//
// Anything else (a bad record followed by more of the file that is not all
// zeros, or a complete record of an unknown kind) is corruption: Open
// returns an error naming the segment file and the record's offset and
// changes nothing on disk, and the node refuses to start. A torn tail
// cannot be told from damage to the length field of a record whose
// claimed extent then passes the end of the file; that case is cut.
//
// Where a torn tail may be, and what it costs:
//
//   - In the newest segment, in both modes, it is cut off (the file is
//     truncated at the record's offset). In strict mode (D5) it was never
//     acknowledged: a put returns after its fsync.
//   - In an older segment with sync (strict, D5) it is corruption: a
//     segment's unsynced tombstones are fsynced before the next segment is
//     started, so every older segment is complete on disk.
//   - In an older segment without sync (processCrashSafe, D6) a host crash
//     wrote the page cache back out of order: everything after the tear is
//     lost from the consistent prefix of the log. The later segments are
//     removed (their records would leave a gap in the log), newest first,
//     the directory is fsynced, then the torn segment is truncated at the
//     tear and fsynced, in that order so that a crash during the repair
//     leaves the tear to be found again. The node starts having lost only
//     writes that were never fsynced.
//
// Every cut is reported to the WithLogger logger as "seglog: cut torn
// tail" with the file, the offset, the reason and segmentsDropped.
//
// # Deletes, removal and relocation
//
// A delete appends a tombstone (not synced: a delete lost in a crash only
// keeps a batch that truncation removes again). A segment that is not the
// active one and none of whose puts are live any more is removed.
//
// Some records are kept forever (fence batches, one per lease takeover),
// and one such record must not pin a 64 MiB segment. The store counts the
// live bytes of every segment (the records of its live puts); when a
// segment that is not the active one holds live bytes of at most 1/8 of
// its size (after a delete in it, when it stops being the active one, and
// at Open), its live puts are copied forward into the active segment as
// ordinary put records (same key, same data), and the segment is removed.
// A copy of at most an eighth frees at least seven times as much, and the
// segments other than the active one never hold more than eight times
// their live bytes. Before the copies, every segment with unsynced writes
// is fsynced (so that no tear, and no D6 cut, can come before a copy);
// after them, the copies' segment and the directory are fsynced, in both
// modes (relocated records are old writes, not recent ones); then the old
// segment is removed. A crash between the copy and the removal is
// harmless: at Open the copy, being later, supersedes the original, and
// the old segment, with no live puts left, is removed, but only after
// every segment that may hold unsynced writes (at Open: all of them) is
// fsynced, so that a power loss cannot take the copy after the original
// is gone. A moved record
// gets a new version; its key and bytes are unchanged, and a put of its
// key still fails with ErrPrecondition.
package seglog
