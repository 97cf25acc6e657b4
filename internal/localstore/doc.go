// Package localstore is the materialised state of one node on local disk,
// in Pebble: the latest run of every flow ID, its older runs, and the
// indexes that ListFlows, SearchFlows and recovery read.
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
// # Key layout (format version 4)
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
//	'i' <esc key> <type> <value> <esc flowID> <runID>
//	                                search index entry of a run (E36): empty;
//	                                see "Search indexes"
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
//	4   as 2, with the run's indexed values after the event count: the
//	    section's length (uvarint, > 0) and the section (see "Search
//	    indexes"). Written only for a run with indexed values.
//	5   as 3, with the same section after the event count.
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
// # Search indexes
//
// A run whose definition indexes attributes (engine.FlowDefinition.Indexed)
// has the indexed values that hold plain JSON other than null in its
// flow value (version 4 or 5): the index section is a uvarint count, then
// per value, sorted by index key, its key, its type name and its JSON,
// each a uvarint length and the bytes. A run without indexed values is
// written as version 2 or 3, as before: a flow that indexes nothing pays
// one check of its definition.
//
// Each indexed value has index entries, one per value query.FromJSON gives
// (one; the distinct elements of a KEYWORD_ARRAY; the tokens of a TEXT;
// none for a value that does not convert): 'i', the escaped key, the type
// byte (k KEYWORD, a KEYWORD_ARRAY, t TEXT, i INT, d DOUBLE, b BOOL, m
// DATETIME), the value so that entries sort by it (strings escaped; INT a
// u64 with the sign bit flipped; DOUBLE its IEEE bits with the sign bit
// flipped, negatives inverted, -0 as 0; BOOL one byte; DATETIME Unix
// seconds with the sign bit flipped, u64, then nanoseconds, u32, all
// big-endian), then the escaped flow ID and the run ID. PutFlow compares
// the section with the stored run's and, when it changed, deletes the
// entries only the old values have and sets those only the new ones have,
// in the same batch: search answers as of the applied log position, and
// replay (which runs the same PutFlows) and Restore (the stream holds the
// 'i' keys) rebuild the indexes with the rest. When a run becomes an older
// run its entries stay, naming it (a search finds older runs too);
// nothing deletes them, as nothing deletes runs.
//
// SearchFlows (search.go) answers a parsed query (package query) from one
// Pebble snapshot. It drives the search from an index when it can: a
// condition =, IN, <, <=, >, >=, BETWEEN or STARTS_WITH on an indexed key
// (a range of 'i' entries), FlowId = or IN (the 'f' and 'r' keys), Status
// = 'RUNNING' (the 'x' keys) or a StartTime range (the 'l' keys); an AND
// by its condition with the fewest entries (counted up to 1000), an OR by
// the union of its terms when each has one. Each candidate run is read
// (its header, and its state only for ActiveStepTypes) and checked
// against the whole query; the matches are sorted in the query's order
// (at most MaxSortedRuns, else ErrQueryTooBroad) and paged by a token
// holding the last result's sort key. A query without such a condition,
// or whose best one has 1000 entries or more, in start order, scans the
// list index (from the StartTime bounds of its top AND) and stops after a
// page of matches; its token holds the last list key, and its next pages
// scan too. Page tokens are base64url of a version byte, a hash of the
// query, the mode ('s' scan, 'o' sorted) and the position; a token of
// another query is ErrBadPageToken.
//
// # Compatibility
//
// Format 3 is format 4 without 'i' keys and without version 4 and 5 flow
// values (no build before it indexed anything): Open restamps a format 3
// directory as format 4 (synced, before any write) and uses it as is, and
// Restore loads a format 3 stream as it is and stamps it format 4 (its
// runs' definitions declare no indexed attribute, so there is nothing to
// build). A format 3 build refuses a format 4 directory or
// stream with ErrIncompatible.
//
// Format 1 is format 3 without 'h' and 'b' keys and with version 1 flow
// values only. Open restamps a format 1 directory as format 4 (synced, before any
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
//	storeFormat               format version of the keys and values (u32): 4
//	applied                   the applied sequence number it covers (u64)
//	entries                   uvarint key length (> 0), key, uvarint value length, value
//	0                         uvarint 0: end of entries
//	count                     number of entries (u64)
//	CRC-32C                   Castagnoli, of every byte before it (u32)
//
// Restore reads it into a sibling directory (<dir>.restoring), checks the
// magic, versions, key order, lengths, count, checksum and that nothing
// follows, writes the metadata last and renames the directory into place.
// It accepts store formats 1, 3 and 4 (a format 1 or 3 stream's entries
// load as they are) and stamps the store format 4. A bad stream is ErrCorrupt
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
