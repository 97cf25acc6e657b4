// Package localstore is the materialised state of one node on local disk,
// in Pebble: the latest run of every flow ID, its older runs, and the
// indexes that ListFlows and recovery read.
//
// # A cache of the log
//
// The durable truth is the node's batch log (package wal); this store is
// rebuilt by replaying it, so its writes are not synced (pebble.NoSync;
// Pebble's own write-ahead log still makes each batch atomic across a
// process or host crash). What makes replay exact is that each log batch is
// applied as one Pebble batch that also stores the batch's sequence
// number:
//
//	Apply(seq, fn)   fn's writes + applied=seq, committed together or not at all
//	Applied()        the last seq committed (ok=false: none yet)
//
// After any crash the store holds exactly the batches up to Applied(), and
// the node replays from Applied()+1. Apply refuses a seq at or below
// Applied() (ErrAlreadyApplied); replay skips those batches.
//
// # Key layout (format version 3)
//
// The first byte of a key names its kind. <esc s> is s with 0x00 written
// as 0x00 0xFF, followed by 0x00 0x01, so that it sorts as s and ends
// unambiguously; a trailing run ID or flow ID is written as is.
//
//	0x00 'f'                        format version (u32, big-endian)
//	0x00 'a'                        applied sequence number (u64, big-endian)
//	'b' <key>                       the bytes of the large value of key, an
//	                                'f', 'r' or 'h' key (see "Large values")
//	'f' <flowID>                    the flow ID's latest run: flow value
//	'h' <esc flowID> <esc runID> <id>
//	                                history event id of a run (the latest or
//	                                an older one): engine.MarshalHistoryEvent's
//	                                bytes, or the one byte 0x00 when they are
//	                                under 'b' <this key>; id is the event ID,
//	                                u32 big-endian, so a run's events sort by ID
//	'r' <esc flowID> <runID>        an older run of the flow ID: flow value
//	'l' <time> <esc flowID> <runID> ListFlows entry of every run: summary
//	'x' <flowID>                    the flow ID's latest run is RUNNING (empty)
//	't' <flowType>                  the run with the type's latest declaration:
//	                                flow ID and run ID, each a uvarint length
//	                                and the bytes (Tx.PutFlowType)
//
// <time> is the run's start time as 12 bytes that sort newest first: the
// Unix seconds with the sign bit flipped (u64) and the nanoseconds (u32),
// both big-endian and bitwise inverted. So the list index is ordered by
// start time descending, then flow ID, then run ID.
//
// A summary is: FlowID, RunID, FlowType, Status, each a uvarint length and
// the bytes; then StartedAt and ClosedAt, each varint Unix seconds and
// uvarint nanoseconds (times decode in UTC; the zero time round-trips).
//
// A flow value ('f' and 'r' keys) starts with a version byte:
//
//	2   the summary's length (uvarint), the summary, the number n of the
//	    run's history events stored under its 'h' keys (uvarint), then
//	    engine.MarshalState's bytes of the state with History nil. The
//	    run's history is events 1..n of its 'h' keys.
//	3   as 2 without the state: it is under 'b' <this key>.
//	1   the summary's length (uvarint), the summary, then
//	    engine.MarshalState's bytes of the whole state, history inline
//	    (store format 1). Still read; never written.
//
// The summary header lets PutFlow maintain the indexes and Summary answer
// without decoding the state or reading the history.
//
// # Large values
//
// Pebble keeps a value in one data block, and a read decompresses the
// whole block: a 4 MiB state stored among the small ones made every read
// of its neighbours (each PutFlow reads the latest run's header) cost
// 4 MiB of decompression, and the bench's ordinary flows lost 96 % of their
// throughput beside 1 % of large ones (issue 11). So a flow value or an event
// above bigValueBytes (16 KiB) is stored under its own 'b' key, and the
// keys other flows read ('f', 'r', 'h', 'l', 'x', 't') hold at most
// 16 KiB each. PutFlow writes a large state's bytes at 'b' <'f' key> with
// a version 3 value, and deletes them when the state is small again; a
// run that becomes an older run takes them to 'b' <'r' key>. A large
// event's bytes go to 'b' <'h' key>, written once like the event. Store
// reads that may meet a version 3 value (Flow, Run, RunningFlows) read
// through a Pebble snapshot, as 'b' <'f' key> is rewritten in place; a
// missing 'b' key that a value names is ErrCorrupt. Every level has a
// Bloom filter (10 bits per key), so a point read does not read a data
// block of each table that cannot hold its key. Values of at least
// bigValueBytes go to Pebble blob files (value separation) when a memtable
// is flushed; compactions then move references instead of rewriting the
// bytes, and a blob file is rewritten once a fifth of it is garbage
// (BenchmarkApply_LargeStates compares with the values kept inline).
//
// # History keys
//
// A run's history is append-only (events never change once appended, and
// event i has ID i, from 1, without gaps), so each event is written once:
// PutFlow writes the events whose ID is above the count in the stored value
// of the same run (every event of a new run), in the same batch as the new
// value, and refuses a history shorter than the stored one, a nil event or
// an event whose ID is not its position. A step thus writes the state
// without history plus the new events, whatever the history's length,
// where format 1 rewrote the whole history (issue 11). Reads that return a
// state (Tx.Flow, Store.Flow, Store.Run, RunningFlows) read events 1..n
// with one iterator over the run's 'h' prefix, bounded by n (a later
// batch's events are not read); a missing or
// misnumbered event is ErrCorrupt. Summary and ListFlows read no history.
// A run's 'h' keys never move: when it becomes an older run, only its flow
// value moves to its 'r' key. Nothing deletes them (nothing deletes runs).
//
// PutFlow keeps the indexes in the same batch: it rewrites the run's list
// entry when its summary changed (deleting the old entry when the start
// time moved), sets or deletes the running entry when the status crosses
// RUNNING, and when a new run replaces the latest one it copies the old
// run's value, whatever its version, to its run key (its list entry stays:
// ListFlows lists every run). The replaced run must be closed by then
// (ErrRunConflict otherwise): under TERMINATE_IF_RUNNING the node puts the
// terminated run's state before the new run's, in the same Apply.
//
// # Compatibility
//
// Format 1 is format 3 without 'h' and 'b' keys and with version 1 flow
// values only. Open restamps a format 1 directory as format 3 (synced, before any
// write) and uses it as is: its values decode, and the first PutFlow of a
// run stored as version 1 writes all the run's events as 'h' keys and a
// version 2 value; an older run stored as version 1 stays so (older runs
// are never written again) and reads as before. The restamp is one-way: a format 1 build then refuses the
// directory with ErrIncompatible, as it refuses a format 3 snapshot stream;
// to go back, rebuild the store from the log (delete the directory) or
// restore an older snapshot. Opening a directory stamped with any other
// format version (format 2 included: the unreleased builds that wrote it
// stored states in JSON and large values inline), or holding keys without
// a format stamp, is
// ErrIncompatible naming the directory.
//
// # Reads
//
// Tx.Flow reads through the batch being built (it sees the Tx's own
// writes). Store reads see committed batches only: after Apply returns,
// ListFlows, Flow, Run and Summary reflect it (E27: no lag on one node).
// Not found is ErrNotFound everywhere. ListFlows pages with opaque tokens
// (base64url of a version byte, a hash of the filters, and the last index
// key returned); a token used with other filters is ErrBadPageToken.
//
// # Snapshot stream (version 1)
//
// Checkpoint iterates a Pebble snapshot of every non-metadata key ('h' keys
// included) in key order and writes (integers big-endian):
//
//	"DXLS"                    magic (4 bytes)
//	1                         stream version (1 byte)
//	storeFormat               format version of the keys and values (u32): 2
//	applied                   the applied sequence number it covers (u64)
//	entries                   uvarint key length (> 0), key, uvarint value length, value
//	0                         uvarint 0: end of entries
//	count                     number of entries (u64)
//	CRC-32C                   Castagnoli, of every byte before it (u32)
//
// Restore reads it into a sibling directory (<dir>.restoring), checks the
// magic, versions, key order, lengths, count, checksum and that nothing
// follows, writes the metadata last and renames the directory into place.
// It accepts store format 1 and 2 (a format 1 stream's entries load as
// they are) and stamps the store format 3. A bad stream is ErrCorrupt
// (ErrIncompatible for another store format), and leaves nothing behind. The stream does not depend on Pebble's file
// format, so a snapshot survives a Pebble upgrade. The wal package stores
// the stream in parts (WriteSnapshotFrom, snapshot format version 2; see
// wal's doc) with the number of the first batch it does not cover:
// applied+1.
//
// # A full disk
//
// Pebble panics when a WAL write fails, and retries a failed flush for
// ever, logging each attempt. So the store never lets Pebble meet a full
// disk when it can help it: Open refuses a directory whose file system has
// less than a memtable plus 4 MiB free, Apply checks the same reserve plus
// the batch before each commit, and a background flush or compaction that
// hits ENOSPC makes every later Apply fail. All three return a
// *diskfull.Error (matching syscall.ENOSPC) naming the directory and the
// free space; the process stops with exit status 1 on it. A Restore
// checks the reserve before each batch it loads. Pebble's fatal errors
// must not return: one caused by ENOSPC (a MANIFEST write) exits with
// status 1 and the same line; others panic. Pebble's error lines are
// rate-limited to one a second. A write the check let through that still
// meets ENOSPC (another process filled the disk in between) can make
// Pebble panic on its WAL: the reserve makes that window small, it cannot
// close it.
package localstore
