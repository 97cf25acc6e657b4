package query

import (
	"fmt"
	"strings"
)

// Error is a malformed query: Pos is the byte offset (from 0) of the token
// where parsing or checking failed.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("query: at position %d: %s", e.Pos+1, e.Msg) }

func errAt(pos int, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokQuoted // a backquoted field name
	tokString
	tokNumber
	tokOp     // = != <> < <= > >=
	tokLParen // (
	tokRParen // )
	tokComma  // ,
)

type token struct {
	kind tokKind
	pos  int
	text string // the identifier, the string's value, the number or the operator
}

// describe names a token in an error message.
func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "the end of the query"
	case tokString:
		return fmt.Sprintf("'%s'", strings.ReplaceAll(t.text, "'", "''"))
	case tokQuoted:
		return "`" + t.text + "`"
	default:
		return fmt.Sprintf("%q", t.text)
	}
}

// keyword reports whether t is the keyword kw (case-insensitive).
func (t token) keyword(kw string) bool { return t.kind == tokIdent && strings.EqualFold(t.text, kw) }

// maxQueryBytes bounds a query's length, and so the work of parsing it.
const maxQueryBytes = 16 << 10

// lex splits q into tokens, ending with tokEOF.
func lex(q string) ([]token, error) {
	if len(q) > maxQueryBytes {
		return nil, errAt(maxQueryBytes, "the query is longer than %d bytes", maxQueryBytes)
	}
	var out []token
	i := 0
	for i < len(q) {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			out = append(out, token{tokLParen, i, "("})
			i++
		case c == ')':
			out = append(out, token{tokRParen, i, ")"})
			i++
		case c == ',':
			out = append(out, token{tokComma, i, ","})
			i++
		case c == '=':
			out = append(out, token{tokOp, i, "="})
			i++
		case c == '!':
			if i+1 < len(q) && q[i+1] == '=' {
				out = append(out, token{tokOp, i, "!="})
				i += 2
				continue
			}
			return nil, errAt(i, "unexpected '!' (did you mean '!='?)")
		case c == '<':
			switch {
			case i+1 < len(q) && q[i+1] == '=':
				out = append(out, token{tokOp, i, "<="})
				i += 2
			case i+1 < len(q) && q[i+1] == '>':
				out = append(out, token{tokOp, i, "!="})
				i += 2
			default:
				out = append(out, token{tokOp, i, "<"})
				i++
			}
		case c == '>':
			if i+1 < len(q) && q[i+1] == '=' {
				out = append(out, token{tokOp, i, ">="})
				i += 2
				continue
			}
			out = append(out, token{tokOp, i, ">"})
			i++
		case c == '\'':
			start := i
			var b strings.Builder
			i++
			for {
				if i >= len(q) {
					return nil, errAt(start, "unterminated string")
				}
				if q[i] == '\'' {
					if i+1 < len(q) && q[i+1] == '\'' {
						b.WriteByte('\'')
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(q[i])
				i++
			}
			out = append(out, token{tokString, start, b.String()})
		case c == '`':
			end := strings.IndexByte(q[i+1:], '`')
			if end < 0 {
				return nil, errAt(i, "unterminated `field name`")
			}
			if end == 0 {
				return nil, errAt(i, "empty `field name`")
			}
			out = append(out, token{tokQuoted, i, q[i+1 : i+1+end]})
			i += end + 2
		case isDigit(c) || c == '-' || c == '+' || c == '.':
			start := i
			if c == '-' || c == '+' {
				i++
			}
			digits := 0
			for i < len(q) && isDigit(q[i]) {
				i++
				digits++
			}
			if i < len(q) && q[i] == '.' {
				i++
				for i < len(q) && isDigit(q[i]) {
					i++
					digits++
				}
			}
			if digits == 0 {
				return nil, errAt(start, "malformed number")
			}
			if i < len(q) && (q[i] == 'e' || q[i] == 'E') {
				i++
				if i < len(q) && (q[i] == '-' || q[i] == '+') {
					i++
				}
				exp := 0
				for i < len(q) && isDigit(q[i]) {
					i++
					exp++
				}
				if exp == 0 {
					return nil, errAt(start, "malformed number")
				}
			}
			if i < len(q) && isIdentByte(q[i]) {
				return nil, errAt(start, "malformed number")
			}
			out = append(out, token{tokNumber, start, q[start:i]})
		case isIdentStart(c):
			start := i
			for i < len(q) && isIdentByte(q[i]) {
				i++
			}
			out = append(out, token{tokIdent, start, q[start:i]})
		default:
			return nil, errAt(i, "unexpected character %q", rune(c))
		}
	}
	return append(out, token{tokEOF, len(q), ""}), nil
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdentByte(c byte) bool  { return isIdentStart(c) || isDigit(c) || c == '-' }
