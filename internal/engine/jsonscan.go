package engine

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A single-pass JSON reader for the checks of declared JSON values: at the
// API boundary (every value declared "json" must be JSON, ValidJSON) and
// against a declared value type (ValueType.Check). encoding/json's Valid
// and Decoder.Token step a state machine per byte and allocate per token
// (about 200 MB/s on the reference VM): a 4 MiB start input was read three
// times on its way in, about 60 ms of CPU, and a worker's 4 MiB result held
// up every other result of its stream while it was checked. This reader
// accepts exactly what json.Valid accepts (FuzzValidJSON compares them:
// the RFC 8259 grammar, any byte >= 0x20 but '"' and '\' inside strings,
// invalid UTF-8 included, nesting up to encoding/json's 10,000 levels) and
// matches a shape as the Decoder-based reader did (FuzzCheckShape compares
// them), reading a string's contents with one comparison per byte.

// maxJSONDepth is encoding/json's nesting limit: deeper values are invalid.
const maxJSONDepth = 10000

// ValidJSON reports whether data is one JSON value (surrounded by
// whitespace only), as json.Valid does.
func ValidJSON(data []byte) bool {
	valid, _ := scanJSON(data, nil)
	return valid
}

// scanJSON reads data as one JSON value and matches it against s (nil:
// any). valid is false when data is not JSON; else mis is the first place,
// in document order, where the value breaks s (nil: none).
func scanJSON(data []byte, s *JSONShape) (valid bool, mis *shapeMismatch) {
	r := jsonReader{data: data}
	r.space()
	r.value(s)
	if !r.bad {
		r.space()
		r.bad = r.pos != len(data)
	}
	return !r.bad, r.mis
}

// jsonReader reads one JSON text. A syntax error sets bad and ends the
// read; a shape mismatch is kept in mis (the first one) and the rest is
// only read for validity, as the shape check answers "not JSON" before
// "wrong shape".
type jsonReader struct {
	data  []byte
	pos   int
	depth int
	bad   bool
	mis   *shapeMismatch
	path  []pathPart // of the value being matched, built into text on a mismatch only
}

// pathPart is one step of a path: an object member (key) or an array
// element (index >= 0).
type pathPart struct {
	key   string
	index int
}

func (r *jsonReader) space() {
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// mismatch records that the value at the current path is got where want
// is expected, unless an earlier mismatch was recorded.
func (r *jsonReader) mismatch(got, want string) {
	if r.mis != nil {
		return
	}
	var b strings.Builder
	for _, p := range r.path {
		if p.index >= 0 {
			fmt.Fprintf(&b, "[%d]", p.index)
		} else {
			b.WriteString(".")
			b.WriteString(p.key)
		}
	}
	r.mis = &shapeMismatch{path: b.String(), got: got, want: want}
}

// value reads the value at r.pos and matches it against s.
func (r *jsonReader) value(s *JSONShape) {
	if r.pos >= len(r.data) {
		r.bad = true
		return
	}
	if r.mis != nil || (s != nil && s.Kind == JSONAny) {
		s = nil
	}
	switch c := r.data[r.pos]; {
	case c == '{':
		r.object(s)
	case c == '[':
		r.array(s)
	case c == '"':
		if _, _, ok := r.str(); ok && s != nil && s.Kind != JSONString {
			r.mismatch("a string", s.kindWant())
		}
	case c == 't' || c == 'f':
		lit := "true"
		if c == 'f' {
			lit = "false"
		}
		if !r.literal(lit) {
			return
		}
		if s != nil && s.Kind != JSONBoolean {
			r.mismatch("the boolean "+lit, s.kindWant())
		}
	case c == 'n':
		r.literal("null") // null decodes as anything
	case c == '-' || ('0' <= c && c <= '9'):
		start := r.pos
		if r.number() && s != nil {
			r.matchNumber(s, string(r.data[start:r.pos]))
		}
	default:
		r.bad = true
	}
}

// kindWant says what a value of s's kind is, for a mismatch.
func (s *JSONShape) kindWant() string {
	switch s.Kind {
	case JSONBoolean:
		return "a boolean"
	case JSONString:
		return "a string"
	case JSONNumber:
		return "a number"
	case JSONInteger:
		return "an integer"
	case JSONArray:
		return "an array"
	case JSONObject:
		return "an object"
	}
	return "a value"
}

func (r *jsonReader) matchNumber(s *JSONShape, text string) {
	got := "the number " + text
	switch s.Kind {
	case JSONNumber:
		if _, err := strconv.ParseFloat(text, bitsOr64(s.Bits)); err != nil {
			r.mismatch(got, fmt.Sprintf("a %d-bit float", bitsOr64(s.Bits)))
		}
	case JSONInteger:
		var err error
		sign := ""
		if s.Unsigned {
			sign = "un"
			_, err = strconv.ParseUint(text, 10, bitsOr64(s.Bits))
		} else {
			_, err = strconv.ParseInt(text, 10, bitsOr64(s.Bits))
		}
		if err != nil {
			r.mismatch(got, fmt.Sprintf("an integer (%ssigned, %d bits)", sign, bitsOr64(s.Bits)))
		}
	default:
		r.mismatch(got, s.kindWant())
	}
}

func (r *jsonReader) literal(lit string) bool {
	if len(r.data)-r.pos < len(lit) || string(r.data[r.pos:r.pos+len(lit)]) != lit {
		r.bad = true
		return false
	}
	r.pos += len(lit)
	return true
}

// number reads a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (r *jsonReader) number() bool {
	if r.data[r.pos] == '-' {
		r.pos++
	}
	switch {
	case r.pos < len(r.data) && r.data[r.pos] == '0':
		r.pos++
	case !r.digits():
		r.bad = true
		return false
	}
	if r.pos < len(r.data) && r.data[r.pos] == '.' {
		r.pos++
		if !r.digits() {
			r.bad = true
			return false
		}
	}
	if r.pos < len(r.data) && (r.data[r.pos] == 'e' || r.data[r.pos] == 'E') {
		r.pos++
		if r.pos < len(r.data) && (r.data[r.pos] == '+' || r.data[r.pos] == '-') {
			r.pos++
		}
		if !r.digits() {
			r.bad = true
			return false
		}
	}
	return true
}

// digits reads one or more decimal digits.
func (r *jsonReader) digits() bool {
	start := r.pos
	for r.pos < len(r.data) && '0' <= r.data[r.pos] && r.data[r.pos] <= '9' {
		r.pos++
	}
	return r.pos > start
}

// str reads the string at r.pos (its '"') and returns its raw contents
// (between the quotes) and whether they hold an escape or a byte above
// 0x7f (so that the raw bytes may differ from the decoded string).
func (r *jsonReader) str() (raw []byte, decode bool, ok bool) {
	d := r.data
	i := r.pos + 1
	for i < len(d) {
		if i+8 <= len(d) && plainWord(binary.LittleEndian.Uint64(d[i:])) {
			i += 8
			continue
		}
		c := d[i]
		if plainASCII[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			raw = d[r.pos+1 : i]
			r.pos = i + 1
			return raw, decode, true
		case c >= 0x80:
			decode = true
			i++
		case c == '\\':
			decode = true
			if i+1 >= len(d) {
				r.bad = true
				return nil, false, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(d)-(i+2) < 4 || !isHex(d[i+2]) || !isHex(d[i+3]) || !isHex(d[i+4]) || !isHex(d[i+5]) {
					r.bad = true
					return nil, false, false
				}
				i += 6
			default:
				r.bad = true
				return nil, false, false
			}
		default: // a control character
			r.bad = true
			return nil, false, false
		}
	}
	r.bad = true // unterminated
	return nil, false, false
}

// plainWord reports whether all 8 bytes of w are plainASCII, comparing all
// of them at once: w has no byte >= 0x80, none below 0x20 ((b - 0x20)
// borrows into the top bit), none equal to '"' or '\' (b ^ c is zero).
func plainWord(w uint64) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	q, bs := w^('"'*ones), w^('\\'*ones)
	return (w|(w-0x20*ones)&^w|(q-ones)&^q|(bs-ones)&^bs)&tops == 0
}

// plainASCII holds the bytes a string holds as themselves: 0x20-0x7f but
// '"' and '\'.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// enter counts one more level of nesting: false (bad) beyond maxJSONDepth.
func (r *jsonReader) enter() bool {
	r.depth++
	if r.depth > maxJSONDepth {
		r.bad = true
		return false
	}
	r.pos++ // '{' or '['
	r.space()
	return true
}

// end reads the ',' between members or elements (true: another follows)
// or the closing delimiter (false).
func (r *jsonReader) end(closing byte) (more bool) {
	r.space()
	if r.pos >= len(r.data) {
		r.bad = true
		return false
	}
	switch r.data[r.pos] {
	case ',':
		r.pos++
		r.space()
		return true
	case closing:
		r.pos++
		r.depth--
		return false
	}
	r.bad = true
	return false
}

func (r *jsonReader) array(s *JSONShape) {
	if s != nil && s.Kind != JSONArray {
		r.mismatch("an array", s.kindWant())
		s = nil
	}
	if !r.enter() {
		return
	}
	if r.pos < len(r.data) && r.data[r.pos] == ']' {
		r.pos++
		r.depth--
		return
	}
	for i := 0; ; i++ {
		if s != nil && r.mis == nil {
			r.path = append(r.path, pathPart{index: i})
			r.value(s.Elements)
			r.path = r.path[:len(r.path)-1]
		} else {
			r.value(nil)
		}
		if r.bad || !r.end(']') {
			return
		}
	}
}

func (r *jsonReader) object(s *JSONShape) {
	if s != nil && s.Kind != JSONObject {
		r.mismatch("an object", s.kindWant())
		s = nil
	}
	if !r.enter() {
		return
	}
	if r.pos < len(r.data) && r.data[r.pos] == '}' {
		r.pos++
		r.depth--
		return
	}
	for {
		if r.pos >= len(r.data) || r.data[r.pos] != '"' {
			r.bad = true
			return
		}
		raw, decode, ok := r.str()
		if !ok {
			return
		}
		r.space()
		if r.pos >= len(r.data) || r.data[r.pos] != ':' {
			r.bad = true
			return
		}
		r.pos++
		r.space()
		if s != nil && r.mis == nil {
			key := memberName(raw, decode)
			sub := s.Elements
			if s.Fields != nil {
				sub = s.field(key)
			}
			r.path = append(r.path, pathPart{key: key, index: -1})
			r.value(sub)
			r.path = r.path[:len(r.path)-1]
		} else {
			r.value(nil)
		}
		if r.bad || !r.end('}') {
			return
		}
	}
}

// memberName is a member's name as encoding/json decodes it (escapes
// resolved, invalid UTF-8 replaced); raw holds no control character.
func memberName(raw []byte, decode bool) string {
	if !decode {
		return string(raw)
	}
	var name string
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	if err := json.Unmarshal(quoted, &name); err != nil {
		return string(raw) // unreachable: str accepted it
	}
	return name
}
