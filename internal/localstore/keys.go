package localstore

import (
	"encoding/binary"
	"errors"
	"fmt"
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
)

var (
	keyFormat  = []byte{prefixMeta, 'f'}
	keyApplied = []byte{prefixMeta, 'a'}
)

// storeFormat is the version of the key layout and value encodings. Open
// refuses a directory written under another version.
const storeFormat uint32 = 1

// flowValueVersion is the first byte of every flow value ('f' and 'r' keys).
const flowValueVersion byte = 1

func flowKey(flowID string) []byte {
	k := make([]byte, 0, 1+len(flowID))
	return append(append(k, prefixFlow), flowID...)
}

func runKey(flowID, runID string) []byte {
	k := make([]byte, 0, 3+len(flowID)+len(runID))
	k = appendEscaped(append(k, prefixRun), flowID)
	return append(k, runID...)
}

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

// encodeFlowValue builds a flow value: a version byte, the uvarint length
// of the summary, the summary, then engine.MarshalState's bytes. The
// summary lets PutFlow, Summary and the indexes read a run's identity and
// status without decoding the whole state.
func encodeFlowValue(s *engine.Summary, state []byte) []byte {
	sum := appendSummary(make([]byte, 0, 96), s)
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(sum)+len(state))
	b = append(b, flowValueVersion)
	b = binary.AppendUvarint(b, uint64(len(sum)))
	b = append(b, sum...)
	return append(b, state...)
}

// decodeFlowHeader returns a flow value's summary and its state bytes.
func decodeFlowHeader(v []byte) (engine.Summary, []byte, error) {
	if len(v) == 0 || v[0] != flowValueVersion {
		return engine.Summary{}, nil, errors.New("unknown flow value version")
	}
	n, w := binary.Uvarint(v[1:])
	if w <= 0 || n > uint64(len(v)-1-w) {
		return engine.Summary{}, nil, errShort
	}
	start := 1 + w
	s, rest, err := decodeSummary(v[start : start+int(n)])
	if err != nil {
		return engine.Summary{}, nil, err
	}
	if len(rest) != 0 {
		return engine.Summary{}, nil, errors.New("bytes after the summary")
	}
	return s, v[start+int(n):], nil
}

// decodeFlowValue decodes a flow value into a state, checking that the
// header agrees with it.
func decodeFlowValue(v []byte) (*engine.FlowState, error) {
	sum, state, err := decodeFlowHeader(v)
	if err != nil {
		return nil, err
	}
	st, err := engine.UnmarshalState(state)
	if err != nil {
		return nil, err
	}
	if st.FlowID != sum.FlowID || st.RunID != sum.RunID {
		return nil, fmt.Errorf("header names run %s/%s, state %s/%s", sum.FlowID, sum.RunID, st.FlowID, st.RunID)
	}
	return st, nil
}

// sameSummary compares two summaries as the store encodes them.
func sameSummary(a, b *engine.Summary) bool {
	return a.FlowID == b.FlowID && a.RunID == b.RunID && a.FlowType == b.FlowType &&
		a.Status == b.Status && a.StartedAt.Equal(b.StartedAt) && a.ClosedAt.Equal(b.ClosedAt)
}
