package query

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Schema gives the type of every indexed key a query may name (besides
// the built-in fields).
type Schema map[string]Type

// maxDepth bounds the nesting of parentheses and NOTs, and so the stack
// of the parser and of evaluation.
const maxDepth = 64

// maxInValues bounds the list of one IN.
const maxInValues = 1000

// Parse parses and type-checks q against the built-in fields and schema.
// A malformed query is an *Error.
func Parse(q string, schema Schema) (*Query, error) {
	toks, err := lex(q)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, schema: schema}
	out := &Query{}
	if !p.peek().keyword("ORDER") && p.peek().kind != tokEOF {
		if out.Where, err = p.or(0); err != nil {
			return nil, err
		}
	}
	if p.peek().keyword("ORDER") {
		p.next()
		if t := p.next(); !t.keyword("BY") {
			return nil, errAt(t.pos, "expected BY after ORDER, found %s", t.describe())
		}
		name, pos, err := p.field()
		if err != nil {
			return nil, err
		}
		typ, err := p.typeOf(name, pos)
		if err != nil {
			return nil, err
		}
		if typ.multi() {
			return nil, errAt(pos, "cannot ORDER BY %s: it is %s, which has several values", name, typ)
		}
		out.OrderBy, out.OrderByType = name, typ
		switch t := p.peek(); {
		case t.keyword("DESC"):
			out.Desc = true
			p.next()
		case t.keyword("ASC"):
			p.next()
		}
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, errAt(t.pos, "unexpected %s", t.describe())
	}
	return out, nil
}

type parser struct {
	toks   []token
	i      int
	schema Schema
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) or(depth int) (Expr, error) {
	return p.chain(depth, "OR", p.and, func(t []Expr) Expr { return &Or{Terms: t} })
}

func (p *parser) and(depth int) (Expr, error) {
	return p.chain(depth, "AND", p.unary, func(t []Expr) Expr { return &And{Terms: t} })
}

// chain parses term { kw term } and builds the node of several terms.
func (p *parser) chain(depth int, kw string, term func(int) (Expr, error), build func([]Expr) Expr) (Expr, error) {
	first, err := term(depth)
	if err != nil {
		return nil, err
	}
	terms := []Expr{first}
	for p.peek().keyword(kw) {
		p.next()
		e, err := term(depth)
		if err != nil {
			return nil, err
		}
		terms = append(terms, e)
	}
	if len(terms) == 1 {
		return first, nil
	}
	return build(terms), nil
}

func (p *parser) unary(depth int) (Expr, error) {
	t := p.peek()
	if depth >= maxDepth {
		return nil, errAt(t.pos, "nested more than %d deep", maxDepth)
	}
	switch {
	case t.keyword("NOT"):
		p.next()
		e, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return &Not{Term: e}, nil
	case t.kind == tokLParen:
		p.next()
		e, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tokRParen {
			return nil, errAt(c.pos, "expected ')' to close the '(' at position %d, found %s", t.pos+1, c.describe())
		}
		return e, nil
	}
	return p.predicate()
}

// reserved are the keywords that cannot be an unquoted field name.
var reserved = []string{"AND", "OR", "NOT", "IN", "BETWEEN", "STARTS_WITH", "ORDER", "BY", "ASC", "DESC", "TRUE", "FALSE"}

func (p *parser) field() (string, int, error) {
	t := p.next()
	switch t.kind {
	case tokQuoted:
		return t.text, t.pos, nil
	case tokIdent:
		for _, kw := range reserved {
			if t.keyword(kw) {
				return "", t.pos, errAt(t.pos, "expected a field name, found the keyword %s", strings.ToUpper(t.text))
			}
		}
		return t.text, t.pos, nil
	}
	return "", t.pos, errAt(t.pos, "expected a field name, found %s", t.describe())
}

func (p *parser) typeOf(name string, pos int) (Type, error) {
	if t, ok := Builtins[name]; ok {
		return t, nil
	}
	if t, ok := p.schema[name]; ok {
		return t, nil
	}
	for b := range Builtins {
		if strings.EqualFold(b, name) {
			return "", errAt(pos, "unknown field %s (did you mean %s?)", name, b)
		}
	}
	return "", errAt(pos, "unknown field %s: not a built-in field nor an indexed key", name)
}

func (p *parser) predicate() (Expr, error) {
	name, pos, err := p.field()
	if err != nil {
		return nil, err
	}
	typ, err := p.typeOf(name, pos)
	if err != nil {
		return nil, err
	}
	pred := &Pred{Pos: pos, Field: name, Type: typ}
	t := p.next()
	negate := false
	if t.keyword("NOT") {
		negate = true
		t = p.next()
		if !t.keyword("IN") && !t.keyword("BETWEEN") {
			return nil, errAt(t.pos, "expected IN or BETWEEN after NOT, found %s", t.describe())
		}
	}
	switch {
	case t.kind == tokOp:
		pred.Op = Op(t.text)
		v, err := p.literal(pred)
		if err != nil {
			return nil, err
		}
		pred.Values = v
	case t.keyword("IN"):
		pred.Op = OpIn
		if l := p.next(); l.kind != tokLParen {
			return nil, errAt(l.pos, "expected '(' after IN, found %s", l.describe())
		}
		for {
			if len(pred.Values) == maxInValues {
				return nil, errAt(p.peek().pos, "more than %d values in IN", maxInValues)
			}
			v, err := p.literal(pred)
			if err != nil {
				return nil, err
			}
			pred.Values = append(pred.Values, v...)
			c := p.next()
			if c.kind == tokRParen {
				break
			}
			if c.kind != tokComma {
				return nil, errAt(c.pos, "expected ',' or ')' in the IN list, found %s", c.describe())
			}
		}
	case t.keyword("BETWEEN"):
		pred.Op = OpBetween
		lo, err := p.literal(pred)
		if err != nil {
			return nil, err
		}
		if a := p.next(); !a.keyword("AND") {
			return nil, errAt(a.pos, "expected AND in BETWEEN, found %s", a.describe())
		}
		hi, err := p.literal(pred)
		if err != nil {
			return nil, err
		}
		pred.Values = []Value{lo[0], hi[0]}
	case t.keyword("STARTS_WITH"):
		pred.Op = OpStartsWith
		v, err := p.literal(pred)
		if err != nil {
			return nil, err
		}
		pred.Values = v
	default:
		return nil, errAt(t.pos, "expected an operator after %s, found %s", name, t.describe())
	}
	if !allowed(typ, pred.Op) {
		return nil, errAt(t.pos, "%s is %s, which does not take %s", name, typ, pred.Op)
	}
	if negate {
		return &Not{Term: pred}, nil
	}
	return pred, nil
}

func allowed(t Type, op Op) bool {
	switch t {
	case Keyword:
		return true
	case Int, Double, Datetime:
		return op != OpStartsWith
	case Bool, Text:
		return op == OpEq || op == OpNe
	case KeywordArray:
		return op == OpEq || op == OpNe || op == OpIn
	}
	return false
}

// literal reads one literal for pred's field and converts it to the
// field's type (a TEXT literal gives its tokens).
func (p *parser) literal(pred *Pred) ([]Value, error) {
	t := p.next()
	bad := func(want string) error {
		return errAt(t.pos, "%s is %s: expected %s, found %s", pred.Field, pred.Type, want, t.describe())
	}
	switch pred.Type {
	case Keyword, KeywordArray:
		if t.kind != tokString {
			return nil, bad("a quoted string")
		}
		if pred.Field == FieldStatus && pred.Op != OpStartsWith && !isStatus(t.text) {
			return nil, errAt(t.pos, "unknown status %s: one of %s", t.describe(), strings.Join(Statuses, ", "))
		}
		return []Value{{Type: pred.Type, Str: t.text}}, nil
	case Text:
		if t.kind != tokString {
			return nil, bad("a quoted string")
		}
		toks := Tokens(t.text)
		if len(toks) == 0 {
			return nil, errAt(t.pos, "%s is TEXT: the string has no word to search for", pred.Field)
		}
		out := make([]Value, len(toks))
		for i, s := range toks {
			out[i] = Value{Type: Text, Str: s}
		}
		return out, nil
	case Int:
		if t.kind != tokNumber {
			return nil, bad("an integer")
		}
		n, err := strconv.ParseInt(strings.TrimPrefix(t.text, "+"), 10, 64)
		if err != nil {
			return nil, bad("an integer within 64 bits")
		}
		return []Value{{Type: Int, Int: n}}, nil
	case Double:
		if t.kind != tokNumber {
			return nil, bad("a number")
		}
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, bad("a number within 64 bits")
		}
		return []Value{{Type: Double, Float: f}}, nil
	case Bool:
		switch {
		case t.keyword("TRUE"):
			return []Value{{Type: Bool, Bool: true}}, nil
		case t.keyword("FALSE"):
			return []Value{{Type: Bool}}, nil
		}
		return nil, bad("TRUE or FALSE")
	case Datetime:
		if t.kind != tokString {
			return nil, bad("an RFC 3339 time in quotes")
		}
		tm, err := time.Parse(time.RFC3339Nano, t.text)
		if err != nil {
			return nil, bad("an RFC 3339 time such as '2026-11-01T00:00:00Z'")
		}
		return []Value{{Type: Datetime, Time: tm.UTC()}}, nil
	}
	return nil, bad("a value")
}

func isStatus(s string) bool {
	for _, x := range Statuses {
		if s == x {
			return true
		}
	}
	return false
}
