package query

import "strings"

// Row is what a query is evaluated on: one run's values by field.
type Row interface {
	// Values returns the run's values of field: none when it has none,
	// one for a single-valued type, the elements of a KEYWORD_ARRAY or the
	// tokens of a TEXT (Tokens). t is the field's type in the query: a
	// run whose value has another type (an indexed key that changed type)
	// has none.
	Values(field string, t Type) []Value
}

// Match reports whether r satisfies q's filter.
func (q *Query) Match(r Row) bool { return q.Where == nil || Match(q.Where, r) }

// Match reports whether r satisfies e (a nil e matches every row).
func Match(e Expr, r Row) bool {
	switch e := e.(type) {
	case nil:
		return true
	case *And:
		for _, t := range e.Terms {
			if !Match(t, r) {
				return false
			}
		}
		return true
	case *Or:
		for _, t := range e.Terms {
			if Match(t, r) {
				return true
			}
		}
		return false
	case *Not:
		return !Match(e.Term, r)
	case *Pred:
		return e.Holds(r.Values(e.Field, e.Type))
	}
	return false
}

// Holds reports whether the predicate holds of a field's values (see Row);
// no value makes every predicate false.
func (p *Pred) Holds(vals []Value) bool {
	if len(vals) == 0 {
		return false
	}
	switch p.Type {
	case Text:
		all := true
		for _, want := range p.Values {
			if !containsValue(vals, want) {
				all = false
				break
			}
		}
		return all == (p.Op == OpEq)
	case KeywordArray:
		switch p.Op {
		case OpEq:
			return containsValue(vals, p.Values[0])
		case OpNe:
			return !containsValue(vals, p.Values[0])
		case OpIn:
			for _, v := range vals {
				if containsValue(p.Values, v) {
					return true
				}
			}
		}
		return false
	}
	return p.holdsOne(vals[0])
}

// HoldsOne reports whether the predicate holds of one value: for a
// single-valued field, whether it holds of the field; for a KEYWORD_ARRAY,
// whether the element is one the predicate looks for (=, IN). The index
// scans of the local store use it on the value of each index entry.
func (p *Pred) HoldsOne(v Value) bool {
	switch p.Type {
	case Text:
		return p.Op == OpEq && containsValue(p.Values, v)
	case KeywordArray:
		return (p.Op == OpEq || p.Op == OpIn) && containsValue(p.Values, v)
	}
	return p.holdsOne(v)
}

func (p *Pred) holdsOne(v Value) bool {
	switch p.Op {
	case OpEq:
		return Compare(v, p.Values[0]) == 0
	case OpNe:
		return Compare(v, p.Values[0]) != 0
	case OpLt:
		return Compare(v, p.Values[0]) < 0
	case OpLe:
		return Compare(v, p.Values[0]) <= 0
	case OpGt:
		return Compare(v, p.Values[0]) > 0
	case OpGe:
		return Compare(v, p.Values[0]) >= 0
	case OpIn:
		return containsValue(p.Values, v)
	case OpBetween:
		return Compare(v, p.Values[0]) >= 0 && Compare(v, p.Values[1]) <= 0
	case OpStartsWith:
		return strings.HasPrefix(v.Str, p.Values[0].Str)
	}
	return false
}

func containsValue(vals []Value, want Value) bool {
	for _, v := range vals {
		if Compare(v, want) == 0 {
			return true
		}
	}
	return false
}

// Fields returns the fields e names, each once, in order of appearance.
func Fields(e Expr) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(Expr)
	walk = func(e Expr) {
		switch e := e.(type) {
		case *And:
			for _, t := range e.Terms {
				walk(t)
			}
		case *Or:
			for _, t := range e.Terms {
				walk(t)
			}
		case *Not:
			walk(e.Term)
		case *Pred:
			if !seen[e.Field] {
				seen[e.Field] = true
				out = append(out, e.Field)
			}
		}
	}
	walk(e)
	return out
}
