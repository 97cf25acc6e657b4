package localstore

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/query"
)

// SearchQuery is a parsed query of SearchFlows and its page.
type SearchQuery struct {
	Query *query.Query
	// PageSize is the most runs to return: 0 means DefaultPageSize, more
	// than MaxPageSize means MaxPageSize.
	PageSize int
	// PageToken continues from an earlier answer to the same query;
	// another query's token is ErrBadPageToken.
	PageToken string
}

// SearchResult is one run a search found: its summary and its indexed
// values.
type SearchResult struct {
	Summary engine.Summary
	Indexed []IndexedValue
}

// ErrQueryTooBroad: a query sorted by another field than StartTime
// matched more runs than a search sorts (MaxSortedRuns).
var ErrQueryTooBroad = errors.New("localstore: the query matches too many runs to sort")

// MaxSortedRuns is the most matching runs a search collects and sorts: a
// query whose runs come in another order than the list index's (an ORDER
// BY other than StartTime, or an indexed key selective enough to drive it)
// holds its matches in memory.
const MaxSortedRuns = 100_000

// estimateCap bounds the index entries counted to choose which condition
// of an AND drives a search; a condition with at least this many is
// "broad", and a broad search in start order scans the list index instead.
const estimateCap = 1000

// SearchFlows returns the runs (latest and older) that match q, in q's
// order (newest start first without ORDER BY; ties by flow ID then run
// ID), their indexed values, and the token of the next page ("" on the
// last). It reads one Pebble snapshot: the committed state as of the call.
//
// Plan: an equality, IN, range or STARTS_WITH on an indexed key, FlowId =
// or IN, Status = 'RUNNING' and a StartTime range are answered from an
// index; an AND is driven by its most selective such condition (counted
// up to estimateCap entries), an OR by the union of its terms when each
// has one. Every candidate is then checked against the whole query. A
// query without such a condition, or whose best one is broad, scans the
// list index in start order (bounded by a StartTime range of its top
// AND) and stops after a page of matches.
func (s *Store) SearchFlows(q SearchQuery) ([]SearchResult, string, error) {
	if err := s.enter(); err != nil {
		return nil, "", err
	}
	defer s.leave()
	if q.Query == nil {
		q.Query = &query.Query{}
	}
	size := q.PageSize
	if size <= 0 {
		size = DefaultPageSize
	}
	size = min(size, MaxPageSize)
	snap := s.db.NewSnapshot()
	defer snap.Close()
	hash := queryHash(q.Query)
	var tok []byte
	mode := byte(0)
	if q.PageToken != "" {
		var err error
		if mode, tok, err = decodeSearchToken(q.PageToken, hash); err != nil {
			return nil, "", err
		}
	}
	startOrder := q.Query.OrderBy == "" || q.Query.OrderBy == query.FieldStartTime
	if mode == 0 {
		mode = tokenScan
		if src, n, err := plan(snap, q.Query.Where); err != nil {
			return nil, "", err
		} else if !startOrder || (src != nil && n < estimateCap) {
			mode = tokenSorted
		}
	}
	if mode == tokenScan && !startOrder {
		return nil, "", fmt.Errorf("%w: a scan token for a query in another order", ErrBadPageToken)
	}
	if mode == tokenScan {
		return s.scanSearch(snap, q.Query, size, tok, hash)
	}
	src, _, err := plan(snap, q.Query.Where)
	if err != nil {
		return nil, "", err
	}
	if src == nil { // another order than start order, and no index: every run in the StartTime range
		lo, hi := startBounds(q.Query.Where)
		src = listRange{lo, hi}
	}
	return sortedSearch(snap, q.Query, src, size, tok, hash)
}

// The first byte of a search token after its version and hash: how the
// search that issued it ran, which the next pages keep.
const (
	tokenScan   byte = 's' // the list index key of the last run returned follows
	tokenSorted byte = 'o' // the sort key of the last run returned follows
)

const searchTokenVersion byte = 1

// A search page token is base64url (unpadded) of: version (1 byte), the
// query hash (8 bytes, big-endian), the mode byte, then the position.
func encodeSearchToken(mode byte, pos []byte, hash uint64) string {
	b := make([]byte, 0, 10+len(pos))
	b = append(b, searchTokenVersion)
	b = binary.BigEndian.AppendUint64(b, hash)
	b = append(b, mode)
	return base64.RawURLEncoding.EncodeToString(append(b, pos...))
}

func decodeSearchToken(tok string, hash uint64) (byte, []byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 10 || b[0] != searchTokenVersion || (b[9] != tokenScan && b[9] != tokenSorted) {
		return 0, nil, fmt.Errorf("%w: malformed", ErrBadPageToken)
	}
	if binary.BigEndian.Uint64(b[1:9]) != hash {
		return 0, nil, fmt.Errorf("%w: issued for another query", ErrBadPageToken)
	}
	return b[9], b[10:], nil
}

// queryHash identifies the query a page token was issued for.
func queryHash(q *query.Query) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(query.String(q.Where)))
	_, _ = fmt.Fprintf(h, "\x00%s\x00%v", q.OrderBy, q.Desc)
	return h.Sum64()
}

// scanSearch reads the list index in start order (DESC: its own order;
// ORDER BY StartTime ASC: backwards) from the token, and returns the first
// size matches.
func (s *Store) scanSearch(snap *pebble.Snapshot, q *query.Query, size int, after []byte, hash uint64) ([]SearchResult, string, error) {
	lower, upper := startBounds(q.Where)
	asc := q.OrderBy == query.FieldStartTime && !q.Desc
	if after != nil {
		if len(after) == 0 || after[0] != prefixList {
			return nil, "", fmt.Errorf("%w: malformed", ErrBadPageToken)
		}
		if asc {
			if bytes.Compare(after, upper) < 0 {
				upper = after
			}
		} else if next := append(bytes.Clone(after), 0); bytes.Compare(next, lower) > 0 {
			lower = next
		}
	}
	if bytes.Compare(lower, upper) >= 0 {
		return nil, "", nil
	}
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, "", fmt.Errorf("search flows: %w", err)
	}
	defer it.Close()
	first, next := it.First, it.Next
	if asc {
		first, next = it.Last, it.Prev
	}
	var out []SearchResult
	var last []byte
	for ok := first(); ok; ok = next() {
		sum, rest, err := decodeSummary(it.Value())
		if err != nil || len(rest) != 0 {
			return nil, "", fmt.Errorf("search flows: index entry %x: %w", it.Key(), ErrCorrupt)
		}
		row := &searchRow{r: snap, sum: sum}
		if !q.Match(row) {
			if row.err != nil {
				return nil, "", row.err
			}
			continue
		}
		if len(out) == size {
			return out, encodeSearchToken(tokenScan, last, hash), nil
		}
		res, err := row.result()
		if err != nil {
			return nil, "", err
		}
		out = append(out, res)
		last = append(last[:0], it.Key()...)
	}
	if err := it.Error(); err != nil {
		return nil, "", fmt.Errorf("search flows: %w", err)
	}
	return out, "", nil
}

// startBounds returns the list index range that a StartTime condition of
// e (alone or a term of its top AND) allows.
func startBounds(e query.Expr) (lower, upper []byte) {
	lower, upper = []byte{prefixList}, []byte{prefixList + 1}
	terms := []query.Expr{e}
	if a, ok := e.(*query.And); ok {
		terms = a.Terms
	}
	for _, t := range terms {
		p, ok := t.(*query.Pred)
		if !ok || p.Field != query.FieldStartTime {
			continue
		}
		lo, hi, ok := startRange(p)
		if !ok {
			continue
		}
		if bytes.Compare(lo, lower) > 0 {
			lower = lo
		}
		if bytes.Compare(hi, upper) < 0 {
			upper = hi
		}
	}
	return lower, upper
}

// startRange is the list index range of a StartTime predicate (newest
// first: a later time is a smaller key). ok is false for an operator
// without one (!=, IN of several).
func startRange(p *query.Pred) (lo, hi []byte, ok bool) {
	at := func(t time.Time) []byte { return appendTimeDesc([]byte{prefixList}, t) }
	lo, hi = []byte{prefixList}, []byte{prefixList + 1}
	v := p.Values[0].Time
	switch p.Op {
	case query.OpEq:
		return at(v), prefixEnd(at(v)), true
	case query.OpGt: // later than v: keys before v's
		return lo, at(v), true
	case query.OpGe:
		return lo, prefixEnd(at(v)), true
	case query.OpLt:
		return prefixEnd(at(v)), hi, true
	case query.OpLe:
		return at(v), hi, true
	case query.OpBetween:
		return at(p.Values[1].Time), prefixEnd(at(v)), true
	}
	return nil, nil, false
}

// sortedSearch collects every match of the candidates src yields, sorts
// them in q's order and returns the page after the token's sort key.
func sortedSearch(snap *pebble.Snapshot, q *query.Query, src source, size int, after []byte, hash uint64) ([]SearchResult, string, error) {
	orderBy, orderType := q.OrderBy, q.OrderByType
	desc := q.Desc
	if orderBy == "" {
		orderBy, orderType, desc = query.FieldStartTime, query.Datetime, true
	}
	var rows []*searchRow
	seen := map[string]bool{}
	err := src.each(snap, func(c candidate) error {
		if c.runID != "" && seen[c.flowID+"\x00"+c.runID] {
			return nil
		}
		row, err := loadRow(snap, c)
		if errors.Is(err, ErrNotFound) {
			return nil // an index entry of a run it no longer describes: none are left, but never fail a search on one
		}
		if err != nil {
			return err
		}
		id := row.sum.FlowID + "\x00" + row.sum.RunID
		if seen[id] {
			return nil
		}
		seen[id] = true
		if !q.Match(row) {
			return row.err
		}
		if len(rows) == MaxSortedRuns {
			return fmt.Errorf("%w: more than %d; narrow it, or order by StartTime", ErrQueryTooBroad, MaxSortedRuns)
		}
		rows = append(rows, row)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	keys := make([]sortKey, len(rows))
	for i, r := range rows {
		keys[i] = r.sortKey(orderBy, orderType)
	}
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return compareSortKeys(keys[a], keys[b], desc) })
	start := 0
	if after != nil {
		k, err := decodeSortKey(orderType, after)
		if err != nil {
			return nil, "", fmt.Errorf("%w: malformed", ErrBadPageToken)
		}
		start, _ = slices.BinarySearchFunc(idx, k, func(i int, k sortKey) int {
			if c := compareSortKeys(keys[i], k, desc); c != 0 {
				return c
			}
			return -1 // the token's run itself comes before: start after it
		})
	}
	var out []SearchResult
	for _, i := range idx[start:] {
		if len(out) == size {
			return out, encodeSearchToken(tokenSorted, encodeSortKey(keys[idx[start+len(out)-1]]), hash), nil
		}
		res, err := rows[i].result()
		if err != nil {
			return nil, "", err
		}
		out = append(out, res)
	}
	return out, "", nil
}

// sortKey orders search results: by the ORDER BY field's value (runs
// without one last), then flow ID, then run ID.
type sortKey struct {
	has           bool
	v             query.Value
	flowID, runID string
}

func compareSortKeys(a, b sortKey, desc bool) int {
	switch {
	case a.has && !b.has:
		return -1
	case !a.has && b.has:
		return 1
	case a.has:
		c := query.Compare(a.v, b.v)
		if desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	if c := strings.Compare(a.flowID, b.flowID); c != 0 {
		return c
	}
	return strings.Compare(a.runID, b.runID)
}

// encodeSortKey: 1 and the value (appendIndexValue) or 0, then the
// escaped flow ID and the run ID.
func encodeSortKey(k sortKey) []byte {
	var b []byte
	if k.has {
		b = appendIndexValue(append(b, 1), k.v)
	} else {
		b = append(b, 0)
	}
	return append(appendEscaped(b, k.flowID), k.runID...)
}

func decodeSortKey(t query.Type, b []byte) (sortKey, error) {
	var k sortKey
	if len(b) == 0 || b[0] > 1 {
		return k, errShort
	}
	k.has, b = b[0] == 1, b[1:]
	if k.has {
		var err error
		if k.v, b, err = decodeIndexValue(t, b); err != nil {
			return k, err
		}
	}
	flowID, rest, err := cutEscaped(b)
	if err != nil {
		return k, err
	}
	k.flowID, k.runID = flowID, string(rest)
	return k, nil
}
