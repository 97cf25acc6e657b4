package localstore

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dexzd/dexzd/internal/engine"
)

// Page sizes of ListFlows.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// ListQuery filters and pages ListFlows. Zero fields do not filter.
type ListQuery struct {
	FlowType  string          // exact flow type
	Statuses  []engine.Status // any of these statuses
	StartFrom time.Time       // started at or after
	StartTo   time.Time       // started before
	// PageSize is the most runs to return: 0 means DefaultPageSize, more
	// than MaxPageSize means MaxPageSize.
	PageSize int
	// PageToken continues from an earlier answer with the same filters
	// (PageSize may change); another token is ErrBadPageToken.
	PageToken string
}

// pageTokenVersion is the first byte of a decoded page token.
const pageTokenVersion byte = 1

// ListFlows returns runs of every flow ID (older runs too), newest start
// time first, ties by flow ID then run ID, filtered by q, and a token for
// the next page ("" on the last page). It reads the committed state: a run
// whose batch Apply returned is listed. Times are in UTC.
//
// Flow type and status filters are evaluated on the index entries, which
// are scanned from the time range's newest end: a rare type or status in a
// large time range costs a long scan.
func (s *Store) ListFlows(q ListQuery) ([]engine.Summary, string, error) {
	if err := s.enter(); err != nil {
		return nil, "", err
	}
	defer s.leave()
	size := q.PageSize
	if size <= 0 {
		size = DefaultPageSize
	}
	size = min(size, MaxPageSize)

	lower, upper := []byte{prefixList}, []byte{prefixList + 1}
	if !q.StartTo.IsZero() {
		// Runs started before StartTo sort after StartTo's keys.
		lower = prefixEnd(appendTimeDesc([]byte{prefixList}, q.StartTo))
	}
	if !q.StartFrom.IsZero() {
		upper = prefixEnd(appendTimeDesc([]byte{prefixList}, q.StartFrom))
	}
	hash := q.filterHash()
	if q.PageToken != "" {
		after, err := decodePageToken(q.PageToken, hash)
		if err != nil {
			return nil, "", err
		}
		// Continue just after the last key returned.
		next := make([]byte, len(after)+1) // after + 0x00: the next possible key
		copy(next, after)
		if bytes.Compare(next, lower) > 0 {
			lower = next
		}
	}
	if bytes.Compare(lower, upper) >= 0 {
		return nil, "", nil
	}

	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, "", fmt.Errorf("list flows: %w", err)
	}
	defer it.Close()
	var out []engine.Summary
	var last []byte
	more := false
	for ok := it.First(); ok; ok = it.Next() {
		sum, rest, err := decodeSummary(it.Value())
		if err != nil || len(rest) != 0 {
			return nil, "", fmt.Errorf("list flows: index entry %x: %w", it.Key(), ErrCorrupt)
		}
		if !q.matches(&sum) {
			continue
		}
		if len(out) == size {
			more = true
			break
		}
		out = append(out, sum)
		last = append(last[:0], it.Key()...)
	}
	if err := it.Error(); err != nil {
		return nil, "", fmt.Errorf("list flows: %w", err)
	}
	if !more {
		return out, "", nil
	}
	return out, encodePageToken(last, hash), nil
}

func (q *ListQuery) matches(s *engine.Summary) bool {
	if q.FlowType != "" && s.FlowType != q.FlowType {
		return false
	}
	return len(q.Statuses) == 0 || slices.Contains(q.Statuses, s.Status)
}

// filterHash identifies the filters a page token was issued for.
func (q *ListQuery) filterHash() uint64 {
	h := fnv.New64a()
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(q.FlowType)))
	b = append(b, q.FlowType...)
	statuses := slices.Clone(q.Statuses)
	slices.Sort(statuses)
	statuses = slices.Compact(statuses)
	b = binary.AppendUvarint(b, uint64(len(statuses)))
	for _, st := range statuses {
		b = binary.AppendUvarint(b, uint64(len(st)))
		b = append(b, st...)
	}
	for _, t := range [...]time.Time{q.StartFrom, q.StartTo} {
		b = binary.AppendVarint(b, t.Unix())
		b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	}
	_, _ = h.Write(b)
	return h.Sum64()
}

// A page token is base64url (unpadded) of: version (1 byte), the filter
// hash (8 bytes, big-endian), the index key of the last run returned.
func encodePageToken(lastKey []byte, hash uint64) string {
	b := make([]byte, 0, 9+len(lastKey))
	b = append(b, pageTokenVersion)
	b = binary.BigEndian.AppendUint64(b, hash)
	return base64.RawURLEncoding.EncodeToString(append(b, lastKey...))
}

func decodePageToken(tok string, hash uint64) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 10 || b[0] != pageTokenVersion || b[9] != prefixList {
		return nil, fmt.Errorf("%w: malformed", ErrBadPageToken)
	}
	if binary.BigEndian.Uint64(b[1:9]) != hash {
		return nil, fmt.Errorf("%w: issued for other filters", ErrBadPageToken)
	}
	return b[9:], nil
}
