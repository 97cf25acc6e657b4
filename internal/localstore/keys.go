package localstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
)

// Key prefixes: the first byte of every key names its kind (see doc.go).
const (
	prefixMeta    byte = 0x00 // store metadata: format version, applied position
	prefixFlow    byte = 'f'  // f<flowID>: the flow ID's latest run
	prefixRun     byte = 'r'  // r<esc flowID><runID>: an older run of a flow ID
	prefixList    byte = 'l'  // l<time><esc flowID><runID>: ListFlows index
	prefixRunning byte = 'x'  // x<flowID>: the latest run is RUNNING
	prefixType    byte = 't'  // t<flowType>: the run holding the type's latest declaration
	prefixHistory byte = 'h'  // h<esc flowID><esc runID><u32 event ID>: one history event of a run
	prefixBig     byte = 'b'  // b<key>: the bytes of a large value stored out of line (bigKey)
	prefixIndex   byte = 'i'  // i<esc key><type><value><esc flowID><runID>: search index entry (E36)
)

var (
	keyFormat  = []byte{prefixMeta, 'f'}
	keyApplied = []byte{prefixMeta, 'a'}
)

// storeFormat is the version of the key layout and value encodings. Open
// refuses a directory written under another version, except formats 1
// and 3, which it restamps (see doc.go); Restore accepts streams of all
// three. Format 2 was the same layout while it was being built
// (unreleased builds with JSON states and without out-of-line values):
// refused.
const storeFormat uint32 = 4

// storeFormatNoIndex is format 4 without search indexes ('i' keys) and
// without version 4 and 5 flow values: no run of it indexes anything, so
// it is a format 4 store as it is.
const storeFormatNoIndex uint32 = 3

// storeFormatInline is the format before history keys: every flow value
// is version 1 (history inline). Open and Restore upgrade it in place.
const storeFormatInline uint32 = 1

// The first byte of every flow value ('f' and 'r' keys). PutFlow writes
// version 2; version 1 values (store format 1) still decode.
const (
	flowValueInline  byte = 1 // summary, then the whole state, history included
	flowValueHistory byte = 2 // summary, event count, the state without history
	flowValueBig     byte = 3 // summary, event count; the state is under bigKey(key)
	// Versions 4 and 5 are 2 and 3 with the run's indexed values after the
	// event count (E36); a run without indexed values is written as 2 or 3.
	flowValueIndexed    byte = 4
	flowValueIndexedBig byte = 5
)

// bigValueBytes is the size above which a state or a history event is
// stored out of line, under bigKey of its key: Pebble puts a value in one
// data block, so a 4 MiB state beside the small ones would make every read
// of its neighbours decompress 4 MiB (issue 11), and every PutFlow read
// it back for the header.
const bigValueBytes = 16 << 10

// bigKey is the key holding the out-of-line bytes of the value at key.
func bigKey(key []byte) []byte {
	k := make([]byte, 0, 1+len(key))
	return append(append(k, prefixBig), key...)
}

// eventOutOfLine is a history key's whole value when its event is stored
// under bigKey(history key). engine.MarshalHistoryEvent's bytes never start
// with it (they start with their format byte, 0x02 or '{').
const eventOutOfLine byte = 0x00

func flowKey(flowID string) []byte {
	k := make([]byte, 0, 1+len(flowID))
	return append(append(k, prefixFlow), flowID...)
}

func runKey(flowID, runID string) []byte {
	k := make([]byte, 0, 3+len(flowID)+len(runID))
	k = appendEscaped(append(k, prefixRun), flowID)
	return append(k, runID...)
}

// historyPrefix is the prefix of every history event key of one run. Both
// IDs are escaped, so no run's prefix is a prefix of another's.
func historyPrefix(flowID, runID string) []byte {
	k := make([]byte, 0, 5+len(flowID)+len(runID)+4)
	k = appendEscaped(append(k, prefixHistory), flowID)
	return appendEscaped(k, runID)
}

// historyKey is the key of event id of the run whose historyPrefix is
// prefix: the prefix and the ID as a big-endian u32, so that a run's
// events sort by ID.
func historyKey(prefix []byte, id uint32) []byte {
	k := make([]byte, 0, len(prefix)+4)
	return binary.BigEndian.AppendUint32(append(k, prefix...), id)
}

// maxHistoryEvents is the most events a run's history can hold: event IDs
// are u32 in keys.
const maxHistoryEvents = math.MaxUint32

func runningKey(flowID string) []byte {
	k := make([]byte, 0, 1+len(flowID))
	return append(append(k, prefixRunning), flowID...)
}

func typeKey(flowType string) []byte {
	k := make([]byte, 0, 1+len(flowType))
	return append(append(k, prefixType), flowType...)
}

// listKey orders runs by start time, newest first, then flow ID, then run
// ID (both ascending).
func listKey(s *engine.Summary) []byte {
	k := make([]byte, 0, 1+timeKeyLen+2+len(s.FlowID)+len(s.RunID))
	k = appendTimeDesc(append(k, prefixList), s.StartedAt)
	k = appendEscaped(k, s.FlowID)
	return append(k, s.RunID...)
}

// timeKeyLen is the length of an encoded start time in a list key.
const timeKeyLen = 12

// appendTimeDesc appends t so that later times sort first: the Unix seconds
// with the sign bit flipped (8 bytes) and the nanoseconds (4 bytes), both
// big-endian and bitwise inverted. Every time.Time value is representable.
func appendTimeDesc(b []byte, t time.Time) []byte {
	sec := uint64(t.Unix()) ^ (1 << 63)
	b = binary.BigEndian.AppendUint64(b, ^sec)
	return binary.BigEndian.AppendUint32(b, ^uint32(t.Nanosecond()))
}

// appendEscaped appends s so that it sorts as s and ends unambiguously:
// 0x00 becomes 0x00 0xFF and the string ends with 0x00 0x01.
func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			b = append(b, 0, 0xFF)
			continue
		}
		b = append(b, s[i])
	}
	return append(b, 0, 1)
}

// prefixEnd returns the smallest key greater than every key with prefix p,
// or nil when there is none (p is all 0xFF).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// errShort reports a value that ends early.
var errShort = errors.New("truncated value")

// appendSummary encodes a run summary (the value of a list index entry and
// the header of a flow value):
//
//	uvarint length + bytes: FlowID, RunID, FlowType, Status
//	StartedAt, ClosedAt: varint Unix seconds, uvarint nanoseconds
func appendSummary(b []byte, s *engine.Summary) []byte {
	for _, str := range [...]string{s.FlowID, s.RunID, s.FlowType, string(s.Status)} {
		b = binary.AppendUvarint(b, uint64(len(str)))
		b = append(b, str...)
	}
	for _, t := range [...]time.Time{s.StartedAt, s.ClosedAt} {
		b = binary.AppendVarint(b, t.Unix())
		b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	}
	return b
}

// decodeSummary decodes what appendSummary encoded; times come back in UTC
// (a zero time stays zero). It returns the bytes after the summary.
func decodeSummary(b []byte) (engine.Summary, []byte, error) {
	var s engine.Summary
	var strs [4]string
	for i := range strs {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return s, nil, errShort
		}
		strs[i] = string(b[w : w+int(n)])
		b = b[w+int(n):]
	}
	var times [2]time.Time
	for i := range times {
		sec, w := binary.Varint(b)
		if w <= 0 {
			return s, nil, errShort
		}
		b = b[w:]
		nsec, w := binary.Uvarint(b)
		if w <= 0 || nsec >= uint64(time.Second) {
			return s, nil, errShort
		}
		b = b[w:]
		times[i] = time.Unix(sec, int64(nsec)).UTC()
	}
	s.FlowID, s.RunID, s.FlowType, s.Status = strs[0], strs[1], strs[2], engine.Status(strs[3])
	s.StartedAt, s.ClosedAt = times[0], times[1]
	return s, b, nil
}

// flowHeader is a decoded flow value without its state.
type flowHeader struct {
	sum     engine.Summary
	version byte // flowValueInline, flowValueHistory or flowValueBig (4 and 5 read as 2 and 3)
	// indexed is the run's index section (appendIndexed; nil when none),
	// in the value's memory.
	indexed []byte
	// events is the number of history events stored under the run's
	// history keys (always 0 for flowValueInline: its history is inline).
	events uint64
	state  []byte // engine.MarshalState's bytes (the value's own memory)
}

// encodeFlowValue builds a version 2 flow value: the version byte, the
// uvarint length of the summary, the summary, the uvarint number of
// history events stored under the run's history keys, then
// engine.MarshalState's bytes of the state without its history. The
// summary lets PutFlow, Summary and the indexes read a run's identity and
// status without decoding the whole state.
//
// With big, the state is not in the value (version 3): the caller stores
// it under bigKey of the value's key.
//
// With indexed values (an index section, appendIndexed), the version is 4
// (5 out of line) and the section follows the event count, after its
// uvarint length.
func encodeFlowValue(s *engine.Summary, events uint64, indexed, state []byte, big bool) []byte {
	sum := appendSummary(make([]byte, 0, 96), s)
	version := flowValueHistory
	if big {
		version, state = flowValueBig, nil
	}
	if indexed != nil {
		version += flowValueIndexed - flowValueHistory
	}
	b := make([]byte, 0, 1+3*binary.MaxVarintLen64+len(sum)+len(indexed)+len(state))
	b = append(b, version)
	b = binary.AppendUvarint(b, uint64(len(sum)))
	b = append(b, sum...)
	b = binary.AppendUvarint(b, events)
	if indexed != nil {
		b = binary.AppendUvarint(b, uint64(len(indexed)))
		b = append(b, indexed...)
	}
	return append(b, state...)
}

// decodeFlowHeader decodes a flow value of version 1 (summary, whole
// state), 2 (summary, event count, state without history) or 3 (summary,
// event count; the state out of line).
func decodeFlowHeader(v []byte) (flowHeader, error) {
	var h flowHeader
	if len(v) == 0 || v[0] < flowValueInline || v[0] > flowValueIndexedBig {
		return h, errors.New("unknown flow value version")
	}
	h.version = v[0]
	withIndex := h.version >= flowValueIndexed
	if withIndex {
		h.version -= flowValueIndexed - flowValueHistory
	}
	n, w := binary.Uvarint(v[1:])
	if w <= 0 || n > uint64(len(v)-1-w) {
		return h, errShort
	}
	start := 1 + w
	s, rest, err := decodeSummary(v[start : start+int(n)])
	if err != nil {
		return h, err
	}
	if len(rest) != 0 {
		return h, errors.New("bytes after the summary")
	}
	h.sum, h.state = s, v[start+int(n):]
	if h.version != flowValueInline {
		c, w := binary.Uvarint(h.state)
		if w <= 0 {
			return h, errShort
		}
		if c > maxHistoryEvents {
			return h, fmt.Errorf("history event count %d out of range", c)
		}
		h.events, h.state = c, h.state[w:]
		if withIndex {
			n, w := binary.Uvarint(h.state)
			if w <= 0 || n == 0 || n > uint64(len(h.state)-w) {
				return h, errShort
			}
			h.indexed, h.state = h.state[w:w+int(n)], h.state[w+int(n):]
		}
		if h.version == flowValueBig && len(h.state) != 0 {
			return h, errors.New("bytes after the header of an out-of-line flow value")
		}
	}
	return h, nil
}

// decodeFlowValue decodes a flow value into a state, checking that the
// header agrees with it. The history of a version 2 value is not in it:
// the state comes back with History nil and the header says how many
// events to read (readHistory).
//
// A version 3 value's state is not in v: big gives it (read from bigKey).
func decodeFlowValue(v, big []byte) (*engine.FlowState, flowHeader, error) {
	h, err := decodeFlowHeader(v)
	if err != nil {
		return nil, h, err
	}
	if h.version == flowValueBig {
		if big == nil {
			return nil, h, errors.New("out-of-line flow value without its state")
		}
		h.state = big
	}
	st, err := engine.UnmarshalState(h.state)
	if err != nil {
		return nil, h, err
	}
	if st.FlowID != h.sum.FlowID || st.RunID != h.sum.RunID {
		return nil, h, fmt.Errorf("header names run %s/%s, state %s/%s", h.sum.FlowID, h.sum.RunID, st.FlowID, st.RunID)
	}
	if h.version != flowValueInline && len(st.History) != 0 {
		return nil, h, fmt.Errorf("version %d flow value with history inline", h.version)
	}
	return st, h, nil
}

// sameSummary compares two summaries as the store encodes them.
func sameSummary(a, b *engine.Summary) bool {
	return a.FlowID == b.FlowID && a.RunID == b.RunID && a.FlowType == b.FlowType &&
		a.Status == b.Status && a.StartedAt.Equal(b.StartedAt) && a.ClosedAt.Equal(b.ClosedAt)
}
