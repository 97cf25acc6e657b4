package query

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
)

// Type is the type of a field: of an indexed key (E36) or a built-in.
type Type string

// The index types.
const (
	Keyword      Type = "KEYWORD"
	KeywordArray Type = "KEYWORD_ARRAY"
	Text         Type = "TEXT"
	Int          Type = "INT"
	Double       Type = "DOUBLE"
	Bool         Type = "BOOL"
	Datetime     Type = "DATETIME"
)

// Types lists every Type.
var Types = []Type{Keyword, KeywordArray, Text, Int, Double, Bool, Datetime}

// Valid reports whether t is one of Types.
func (t Type) Valid() bool {
	for _, x := range Types {
		if t == x {
			return true
		}
	}
	return false
}

// multi reports whether a field of type t holds several values (the
// elements of an array, the tokens of a text).
func (t Type) multi() bool { return t == KeywordArray || t == Text }

// The built-in fields.
const (
	FieldFlowID          = "FlowId"
	FieldRunID           = "RunId"
	FieldFlowType        = "FlowType"
	FieldStatus          = "Status"
	FieldStartTime       = "StartTime"
	FieldCloseTime       = "CloseTime"
	FieldActiveStepTypes = "ActiveStepTypes"
	FieldParentFlowID    = "ParentFlowId"
)

// Builtins are the built-in fields and their types. An indexed key may not
// take one of these names.
var Builtins = map[string]Type{
	FieldFlowID: Keyword, FieldRunID: Keyword, FieldFlowType: Keyword, FieldStatus: Keyword,
	FieldStartTime: Datetime, FieldCloseTime: Datetime, FieldActiveStepTypes: KeywordArray,
	FieldParentFlowID: Keyword,
}

// Statuses are the values a Status literal may take.
var Statuses = []string{"RUNNING", "COMPLETED", "FAILED", "CANCELED", "TERMINATED", "CONTINUED_AS_NEW"}

// IsBuiltin reports whether name is a built-in field, compared without
// case so that an indexed key cannot be mistaken for one.
func IsBuiltin(name string) bool {
	for b := range Builtins {
		if strings.EqualFold(b, name) {
			return true
		}
	}
	return false
}

// Value is one typed value: a literal of a query, or one value of a
// run's field.
type Value struct {
	Type  Type
	Str   string    // Keyword, KeywordArray (one element), Text (one token)
	Int   int64     // Int
	Float float64   // Double
	Bool  bool      // Bool
	Time  time.Time // Datetime
}

// Compare orders a and b, which must have the same Type: -1, 0 or +1.
func Compare(a, b Value) int {
	switch a.Type {
	case Int:
		return cmpOrdered(a.Int, b.Int)
	case Double:
		return cmpOrdered(a.Float, b.Float)
	case Bool:
		switch {
		case a.Bool == b.Bool:
			return 0
		case !a.Bool:
			return -1
		}
		return 1
	case Datetime:
		return a.Time.Compare(b.Time)
	default:
		return strings.Compare(a.Str, b.Str)
	}
}

func cmpOrdered[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (v Value) String() string {
	switch v.Type {
	case Int:
		return fmt.Sprint(v.Int)
	case Double:
		return fmt.Sprint(v.Float)
	case Bool:
		return fmt.Sprint(v.Bool)
	case Datetime:
		return v.Time.UTC().Format(time.RFC3339Nano)
	}
	return v.Str
}

// Tokens splits a TEXT value into its tokens: the lower-cased runs of
// letters and digits, each once, in order of first appearance.
func Tokens(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		f = strings.ToLower(f)
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// finite reports whether f is a number a DOUBLE can hold (not NaN or an
// infinity).
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Op is a predicate's operator.
type Op string

// The operators.
const (
	OpEq         Op = "="
	OpNe         Op = "!="
	OpLt         Op = "<"
	OpLe         Op = "<="
	OpGt         Op = ">"
	OpGe         Op = ">="
	OpIn         Op = "IN"
	OpBetween    Op = "BETWEEN"
	OpStartsWith Op = "STARTS_WITH"
)

// Expr is a node of a parsed filter: *And, *Or, *Not or *Pred.
type Expr interface{ expr() }

// And holds when every one of its terms holds.
type And struct{ Terms []Expr }

// Or holds when one of its terms holds.
type Or struct{ Terms []Expr }

// Not holds when its term does not.
type Not struct{ Term Expr }

// Pred compares a field with literals. Values holds one literal, two for
// BETWEEN (low and high, both included), the list of IN, and for TEXT the
// literal's tokens (every one must be present). NOT IN and NOT BETWEEN
// parse as a Not of the Pred.
type Pred struct {
	Pos    int // offset of the field in the query
	Field  string
	Type   Type
	Op     Op
	Values []Value
}

func (*And) expr()  {}
func (*Or) expr()   {}
func (*Not) expr()  {}
func (*Pred) expr() {}

// Query is a parsed query.
type Query struct {
	// Where is the filter; nil matches every run.
	Where Expr
	// OrderBy is the ORDER BY field, "" when there is none (newest start
	// first); Desc says DESC.
	OrderBy     string
	OrderByType Type
	Desc        bool
}

// String renders e in the query language, fully parenthesised (tests and
// logs).
func String(e Expr) string {
	switch e := e.(type) {
	case nil:
		return ""
	case *And:
		return join(e.Terms, " AND ")
	case *Or:
		return join(e.Terms, " OR ")
	case *Not:
		return "NOT " + String(e.Term)
	case *Pred:
		vals := make([]string, len(e.Values))
		for i, v := range e.Values {
			vals[i] = literal(v)
		}
		f := fieldName(e.Field)
		switch e.Op {
		case OpIn:
			return fmt.Sprintf("%s IN (%s)", f, strings.Join(vals, ", "))
		case OpBetween:
			return fmt.Sprintf("%s BETWEEN %s AND %s", f, vals[0], vals[1])
		}
		if e.Type == Text {
			return fmt.Sprintf("%s %s '%s'", f, e.Op, strings.Join(vals, " "))
		}
		return fmt.Sprintf("%s %s %s", f, e.Op, vals[0])
	}
	return "?"
}

// fieldName is name as a query writes it: backquoted unless it is an
// identifier that is not a keyword.
func fieldName(name string) string {
	plain := name != "" && isIdentStart(name[0])
	for i := 0; plain && i < len(name); i++ {
		plain = isIdentByte(name[i])
	}
	for _, kw := range reserved {
		if strings.EqualFold(name, kw) {
			plain = false
		}
	}
	if plain {
		return name
	}
	return "`" + name + "`"
}

func join(terms []Expr, sep string) string {
	s := make([]string, len(terms))
	for i, t := range terms {
		s[i] = String(t)
	}
	return "(" + strings.Join(s, sep) + ")"
}

func literal(v Value) string {
	switch v.Type {
	case Int, Double:
		return v.String()
	case Bool:
		return strings.ToUpper(v.String())
	case Text:
		return v.Str
	}
	return "'" + strings.ReplaceAll(v.String(), "'", "''") + "'"
}
