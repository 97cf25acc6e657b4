package localstore

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/query"
)

// candidate is a run a source yields: its IDs, and its summary when the
// source read it (the list index).
type candidate struct {
	flowID, runID string
	sum           *engine.Summary
}

// source yields the candidate runs of a condition (maybe more, maybe
// twice: every candidate is checked against the whole query).
type source interface {
	each(r reader, fn func(candidate) error) error
	// estimate counts the candidates, stopping at limit.
	estimate(r reader, limit int) (int, error)
}

// plan returns the source that drives a search of e and its estimate
// (capped at estimateCap), or nil when no index answers e.
func plan(r reader, e query.Expr) (source, int, error) {
	switch e := e.(type) {
	case *query.Pred:
		src := predSource(e)
		if src == nil {
			return nil, 0, nil
		}
		n, err := src.estimate(r, estimateCap)
		return src, n, err
	case *query.And:
		var best source
		bestN := 0
		for _, t := range e.Terms {
			src, n, err := plan(r, t)
			if err != nil {
				return nil, 0, err
			}
			if src != nil && (best == nil || n < bestN) {
				best, bestN = src, n
			}
		}
		return best, bestN, nil
	case *query.Or:
		var u union
		total := 0
		for _, t := range e.Terms {
			src, n, err := plan(r, t)
			if err != nil || src == nil {
				return nil, 0, err
			}
			u = append(u, src)
			total += n
		}
		return u, min(total, estimateCap), nil
	}
	return nil, 0, nil
}

// predSource is the index source of one predicate, nil when none answers
// it.
func predSource(p *query.Pred) source {
	switch p.Field {
	case query.FieldFlowID:
		if p.Op == query.OpEq || p.Op == query.OpIn {
			ids := make([]string, len(p.Values))
			for i, v := range p.Values {
				ids[i] = v.Str
			}
			return flowIDs(ids)
		}
		return nil
	case query.FieldStatus:
		if (p.Op == query.OpEq || p.Op == query.OpIn) && len(p.Values) == 1 && p.Values[0].Str == string(engine.StatusRunning) {
			return running{}
		}
		return nil
	case query.FieldStartTime:
		lo, hi, ok := startRange(p)
		if !ok {
			return nil
		}
		return listRange{lo, hi}
	}
	if _, builtin := query.Builtins[p.Field]; builtin {
		return nil
	}
	prefix := indexPrefix(p.Field, p.Type)
	switch p.Op {
	case query.OpEq, query.OpIn:
		vals := p.Values
		if p.Type == query.Text {
			vals = vals[:1] // every token must be there: one drives, the query checks the rest
		}
		var u union
		for _, v := range vals {
			k := appendIndexValue(slices.Clip(prefix), v)
			u = append(u, indexRange{pred: p, prefix: prefix, lower: k, upper: prefixEnd(k)})
		}
		if len(u) == 1 {
			return u[0]
		}
		return u
	case query.OpLt, query.OpLe, query.OpGt, query.OpGe, query.OpBetween:
		at := func(v query.Value) []byte { return appendIndexValue(slices.Clip(prefix), v) }
		ir := indexRange{pred: p, prefix: prefix, lower: prefix, upper: prefixEnd(prefix)}
		v := p.Values[0]
		switch p.Op {
		case query.OpLt:
			ir.upper = at(v)
		case query.OpLe:
			ir.upper = prefixEnd(at(v))
		case query.OpGt:
			ir.lower = prefixEnd(at(v))
		case query.OpGe:
			ir.lower = at(v)
		case query.OpBetween:
			ir.lower, ir.upper = at(v), prefixEnd(at(p.Values[1]))
		}
		return ir
	case query.OpStartsWith:
		// The escaped prefix without its terminator: every value that
		// starts with it.
		k := appendEscaped(slices.Clip(prefix), p.Values[0].Str)
		k = k[:len(k)-2]
		return indexRange{pred: p, prefix: prefix, lower: k, upper: prefixEnd(k)}
	}
	return nil
}

// indexRange is a range of the index entries of one key and type; each
// entry whose value satisfies pred is a candidate.
type indexRange struct {
	pred         *query.Pred
	prefix       []byte
	lower, upper []byte
}

func (ir indexRange) scan(r reader, fn func(candidate) error) error {
	if ir.upper == nil {
		ir.upper = []byte{prefixIndex + 1}
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: ir.lower, UpperBound: ir.upper})
	if err != nil {
		return fmt.Errorf("search flows: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, flowID, runID, err := decodeIndexEntry(ir.pred.Type, ir.prefix, it.Key())
		if err != nil {
			return fmt.Errorf("search flows: index entry %x: %w: %w", it.Key(), ErrCorrupt, err)
		}
		if !ir.pred.HoldsOne(v) {
			continue
		}
		if err := fn(candidate{flowID: flowID, runID: runID}); err != nil {
			return err
		}
	}
	return it.Error()
}

func (ir indexRange) each(r reader, fn func(candidate) error) error { return ir.scan(r, fn) }

var errEnough = errors.New("enough")

func (ir indexRange) estimate(r reader, limit int) (int, error) { return countUpTo(ir.each, r, limit) }

// countUpTo counts the candidates each yields, stopping at limit.
func countUpTo(each func(reader, func(candidate) error) error, r reader, limit int) (int, error) {
	n := 0
	err := each(r, func(candidate) error {
		n++
		if n >= limit {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return n, err
}

// union yields the candidates of each of its sources.
type union []source

func (u union) each(r reader, fn func(candidate) error) error {
	for _, s := range u {
		if err := s.each(r, fn); err != nil {
			return err
		}
	}
	return nil
}

func (u union) estimate(r reader, limit int) (int, error) {
	total := 0
	for _, s := range u {
		n, err := s.estimate(r, limit-total)
		if err != nil {
			return 0, err
		}
		if total += n; total >= limit {
			break
		}
	}
	return total, nil
}

// flowIDs yields every run (latest and older) of some flow IDs.
type flowIDs []string

func (f flowIDs) each(r reader, fn func(candidate) error) error {
	for _, id := range f {
		h, err := readHeader(r, flowKey(id))
		if err != nil {
			return fmt.Errorf("search flows: flow %q: %w", id, err)
		}
		if h == nil {
			continue
		}
		if err := fn(candidate{flowID: id, runID: h.sum.RunID}); err != nil {
			return err
		}
		p := appendEscaped([]byte{prefixRun}, id)
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return fmt.Errorf("search flows: %w", err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			if err := fn(candidate{flowID: id, runID: string(it.Key()[len(p):])}); err != nil {
				_ = it.Close()
				return err
			}
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("search flows: %w", err)
		}
	}
	return nil
}

func (f flowIDs) estimate(_ reader, limit int) (int, error) { return min(len(f), limit), nil }

// running yields the latest run of every RUNNING flow ID.
type running struct{}

func (running) each(r reader, fn func(candidate) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixRunning}, UpperBound: []byte{prefixRunning + 1}})
	if err != nil {
		return fmt.Errorf("search flows: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := fn(candidate{flowID: string(it.Key()[1:])}); err != nil {
			return err
		}
	}
	return it.Error()
}

func (x running) estimate(r reader, limit int) (int, error) { return countUpTo(x.each, r, limit) }

// listRange yields the runs of a range of the list index (a StartTime
// range), with their summaries.
type listRange struct{ lower, upper []byte }

func (l listRange) each(r reader, fn func(candidate) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: l.lower, UpperBound: l.upper})
	if err != nil {
		return fmt.Errorf("search flows: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		sum, rest, err := decodeSummary(it.Value())
		if err != nil || len(rest) != 0 {
			return fmt.Errorf("search flows: index entry %x: %w", it.Key(), ErrCorrupt)
		}
		if err := fn(candidate{flowID: sum.FlowID, runID: sum.RunID, sum: &sum}); err != nil {
			return err
		}
	}
	return it.Error()
}

func (l listRange) estimate(r reader, limit int) (int, error) { return countUpTo(l.each, r, limit) }
