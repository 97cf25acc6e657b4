package localstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/query"
)

// Search indexes (E36; see doc.go, "Search indexes").

// IndexedValue is one indexed attribute's value of a run: its index key,
// type and JSON.
type IndexedValue struct {
	Key  string
	Type query.Type
	JSON []byte
}

// The type byte of an index key, one per query.Type.
var indexTypeCode = map[query.Type]byte{
	query.Keyword: 'k', query.KeywordArray: 'a', query.Text: 't', query.Int: 'i',
	query.Double: 'd', query.Bool: 'b', query.Datetime: 'm',
}

// runIndexed returns st's indexed values, sorted by key: the attributes its
// definition indexes that have a plain JSON value other than null. nil
// when the run's definition indexes nothing (the cost of a flow without
// indexed attributes is this check).
func runIndexed(st *engine.FlowState) []IndexedValue {
	if st.Definition == nil || len(st.Definition.Indexed) == 0 || len(st.Attributes) == 0 {
		return nil
	}
	var out []IndexedValue
	for name, ia := range st.Definition.Indexed {
		v, ok := st.Attributes[name]
		if !ok || v.Data == nil || !strings.HasPrefix(v.Type, "json:") {
			continue // no value, or a value object or an encoded value: not indexed
		}
		if d := bytes.TrimSpace(v.Data); len(d) == 0 || string(d) == "null" {
			continue
		}
		out = append(out, IndexedValue{Key: ia.Key, Type: query.Type(ia.Type), JSON: v.Data})
	}
	slices.SortFunc(out, func(a, b IndexedValue) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// appendIndexed encodes a run's indexed values (the index section of a
// version 4 or 5 flow value): uvarint count, then per value its key, type
// and JSON, each a uvarint length and the bytes.
func appendIndexed(b []byte, vals []IndexedValue) []byte {
	b = binary.AppendUvarint(b, uint64(len(vals)))
	for _, v := range vals {
		for _, s := range [...][]byte{[]byte(v.Key), []byte(v.Type), v.JSON} {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
	}
	return b
}

// decodeIndexed decodes an index section; the values are copies.
func decodeIndexed(b []byte) ([]IndexedValue, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)) {
		return nil, errShort
	}
	b = b[w:]
	out := make([]IndexedValue, 0, n)
	for range n {
		var f [3][]byte
		for i := range f {
			l, w := binary.Uvarint(b)
			if w <= 0 || l > uint64(len(b)-w) {
				return nil, errShort
			}
			f[i] = bytes.Clone(b[w : w+int(l)])
			b = b[w+int(l):]
		}
		out = append(out, IndexedValue{Key: string(f[0]), Type: query.Type(f[1]), JSON: f[2]})
	}
	if len(b) != 0 {
		return nil, errors.New("bytes after the index section")
	}
	return out, nil
}

// indexPrefix is the prefix of every index entry of key under type t.
func indexPrefix(key string, t query.Type) []byte {
	p := make([]byte, 0, 4+len(key))
	p = appendEscaped(append(p, prefixIndex), key)
	return append(p, indexTypeCode[t])
}

// appendIndexValue appends v so that index entries sort by value: strings
// escaped (appendEscaped), INT as a u64 with the sign bit flipped, DOUBLE
// as its bits ordered (sign flipped, negatives inverted; -0 as 0), BOOL as
// one byte, DATETIME as Unix seconds (sign flipped, u64) and nanoseconds
// (u32), all big-endian.
func appendIndexValue(b []byte, v query.Value) []byte {
	switch v.Type {
	case query.Int:
		return binary.BigEndian.AppendUint64(b, uint64(v.Int)^(1<<63))
	case query.Double:
		f := v.Float
		if f == 0 {
			f = 0 // -0 sorts and compares as 0
		}
		bits := math.Float64bits(f)
		if bits&(1<<63) != 0 {
			bits = ^bits
		} else {
			bits ^= 1 << 63
		}
		return binary.BigEndian.AppendUint64(b, bits)
	case query.Bool:
		if v.Bool {
			return append(b, 1)
		}
		return append(b, 0)
	case query.Datetime:
		b = binary.BigEndian.AppendUint64(b, uint64(v.Time.Unix())^(1<<63))
		return binary.BigEndian.AppendUint32(b, uint32(v.Time.Nanosecond()))
	}
	return appendEscaped(b, v.Str)
}

// decodeIndexValue decodes a value of type t that appendIndexValue wrote
// at the start of b, and returns the bytes after it.
func decodeIndexValue(t query.Type, b []byte) (query.Value, []byte, error) {
	v := query.Value{Type: t}
	switch t {
	case query.Int, query.Double:
		if len(b) < 8 {
			return v, nil, errShort
		}
		u := binary.BigEndian.Uint64(b)
		if t == query.Int {
			v.Int = int64(u ^ (1 << 63))
		} else {
			if u&(1<<63) != 0 {
				u ^= 1 << 63
			} else {
				u = ^u
			}
			v.Float = math.Float64frombits(u)
		}
		return v, b[8:], nil
	case query.Bool:
		if len(b) < 1 {
			return v, nil, errShort
		}
		v.Bool = b[0] == 1
		return v, b[1:], nil
	case query.Datetime:
		if len(b) < 12 {
			return v, nil, errShort
		}
		sec := int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
		v.Time = time.Unix(sec, int64(binary.BigEndian.Uint32(b[8:]))).UTC()
		return v, b[12:], nil
	}
	s, rest, err := cutEscaped(b)
	v.Str = s
	return v, rest, err
}

// cutEscaped decodes a string appendEscaped wrote at the start of b.
func cutEscaped(b []byte) (string, []byte, error) {
	var sb []byte
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			continue
		}
		if i+1 >= len(b) {
			return "", nil, errShort
		}
		switch b[i+1] {
		case 1:
			if sb == nil {
				return string(b[:i]), b[i+2:], nil
			}
			return string(append(sb, b[:i]...)), b[i+2:], nil
		case 0xFF:
			sb = append(append(sb, b[:i]...), 0)
			b = b[i+2:]
			i = -1
		default:
			return "", nil, errors.New("bad escape")
		}
	}
	return "", nil, errShort
}

// indexKeys returns the index entries of run (flowID, runID) for vals.
// A value that does not convert (query.FromJSON) has none.
func indexKeys(flowID, runID string, vals []IndexedValue) [][]byte {
	var out [][]byte
	for _, iv := range vals {
		if _, ok := indexTypeCode[iv.Type]; !ok {
			continue
		}
		qv, err := query.FromJSON(iv.Type, iv.JSON)
		if err != nil {
			continue
		}
		p := indexPrefix(iv.Key, iv.Type)
		for _, v := range qv {
			k := appendIndexValue(slices.Clip(p), v)
			k = appendEscaped(k, flowID)
			out = append(out, append(k, runID...))
		}
	}
	return out
}

// decodeIndexEntry decodes the value, flow ID and run ID of an index key
// with prefix p (indexPrefix) of type t.
func decodeIndexEntry(t query.Type, p, key []byte) (query.Value, string, string, error) {
	if !bytes.HasPrefix(key, p) {
		return query.Value{}, "", "", errors.New("index key outside its prefix")
	}
	v, rest, err := decodeIndexValue(t, key[len(p):])
	if err != nil {
		return v, "", "", err
	}
	flowID, runID, err := cutEscaped(rest)
	if err != nil {
		return v, "", "", err
	}
	return v, flowID, string(runID), nil
}

// putIndexes writes the index entries of a run whose indexed values go
// from old to cur: it deletes the entries only old has and sets those only
// cur has.
func (tx *Tx) putIndexes(flowID, runID string, old, cur []IndexedValue) error {
	if sameIndexed(old, cur) {
		return nil
	}
	oldKeys, curKeys := indexKeys(flowID, runID, old), indexKeys(flowID, runID, cur)
	has := func(keys [][]byte, k []byte) bool {
		return slices.ContainsFunc(keys, func(x []byte) bool { return bytes.Equal(x, k) })
	}
	for _, k := range oldKeys {
		if !has(curKeys, k) {
			if err := tx.b.Delete(k, nil); err != nil {
				return err
			}
		}
	}
	for _, k := range curKeys {
		if !has(oldKeys, k) {
			if err := tx.b.Set(k, nil, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func sameIndexed(a, b []IndexedValue) bool {
	return slices.EqualFunc(a, b, func(x, y IndexedValue) bool {
		return x.Key == y.Key && x.Type == y.Type && bytes.Equal(x.JSON, y.JSON)
	})
}

// checkIndexed refuses indexed values the index section cannot hold.
func checkIndexed(st *engine.FlowState, vals []IndexedValue) error {
	for _, v := range vals {
		if v.Key == "" {
			return fmt.Errorf("localstore: put flow %s run %s: an indexed attribute without a key", st.FlowID, st.RunID)
		}
	}
	return nil
}
