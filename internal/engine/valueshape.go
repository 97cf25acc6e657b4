package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Value types: what a worker declares of an attribute's, a channel's or a
// step input's values (FlowDefinition.AttributeTypes, ChannelTypes,
// StepDef.Input), so that a client's value that the worker could not
// decode is refused at the call (SetAttributes, PublishToChannel,
// StartFlow's input and attributes) instead of failing a handler later. A shape describes less than the type where that
// is safer: a check must never refuse a value the worker would decode.
//
// Checked: the value's encoding equals the declared one; for "json", that
// the JSON matches the shape (kinds, integer literals and ranges, array
// elements, map values, the record fields the shape lists; null matches
// everything, as Go's encoding/json leaves the target unchanged). Not
// checked: the value's type name (a program in another package or
// language names the same shape differently), members a record shape does
// not list, map keys, the content of strings, and a handler's own writes
// and movements.

// JSONKind is the kind of JSON value a shape accepts.
type JSONKind string

// The JSON kinds. JSONAny accepts every value.
const (
	JSONAny     JSONKind = ""
	JSONBoolean JSONKind = "boolean"
	JSONNumber  JSONKind = "number"
	JSONInteger JSONKind = "integer"
	JSONString  JSONKind = "string"
	JSONArray   JSONKind = "array"
	JSONObject  JSONKind = "object"
)

// Bounds of a declared value type.
const (
	MaxShapeDepth = 32
	MaxShapeNodes = 1000
)

// JSONShape describes the JSON values that decode as a type. It is the
// parsed form of a shape; a run's definition stores its compact text
// (String, ParseShape).
type JSONShape struct {
	Kind JSONKind
	// Bits is a number's or an integer's size (0: 64).
	Bits int
	// Unsigned: an integer must not be negative.
	Unsigned bool
	// Elements is the shape of an array's elements or a map object's
	// values; nil: any.
	Elements *JSONShape
	// Fields are a record object's checked members by JSON name; a member
	// matches a field exactly, else case-insensitively when only one field
	// folds to it.
	Fields map[string]*JSONShape
}

// ValueType is a declared value type, as a run's definition stores it.
type ValueType struct {
	// Encoding is the values' encoding ("json"); empty: any.
	Encoding string `json:"encoding,omitempty"`
	// Type names the type for people; never compared.
	Type string `json:"type,omitempty"`
	// Shape is what a "json" value must look like, in the compact text of
	// JSONShape.String; empty: any JSON. Text rather than a tree because
	// every run stores its definition: the order example's input shape is
	// 29 bytes.
	Shape string `json:"shape,omitempty"`
}

// ValidateValueTypes checks the declared types of one kind of names
// (attributes or channels): each names a declared one, and its shape is
// well formed and within MaxShapeDepth and MaxShapeNodes. The error is an
// INVALID_ARGUMENT *Error naming the field.
func ValidateValueTypes(field string, types map[string]*ValueType, declared []string) error {
	for name, vt := range types {
		f := field + "[" + name + "]"
		if !containsString(declared, name) {
			return invalidArg(f, "%q is not declared", name)
		}
		if vt == nil {
			return invalidArg(f, "must be set")
		}
		if err := ValidateValueType(f, vt); err != nil {
			return err
		}
	}
	return nil
}

// ValidateValueType checks one declared type (nil: none declared): its
// encoding, and that its shape parses, within MaxShapeDepth and
// MaxShapeNodes.
func ValidateValueType(field string, vt *ValueType) error {
	if vt == nil {
		return nil
	}
	if strings.Contains(vt.Encoding, ":") {
		return invalidArg(field+".encoding", "%q must not contain ':'", vt.Encoding)
	}
	if _, err := ParseShape(vt.Shape); err != nil {
		return invalidArg(field+".shape", "%v", err)
	}
	return nil
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// The compact text of a shape:
//
//	shape = "*"                               any
//	      | "b"                               boolean
//	      | "s"                               string
//	      | "n32" | "n64"                     number (a float of those bits)
//	      | "i8" | "i16" | "i32" | "i64"      integer
//	      | "u8" | "u16" | "u32" | "u64"      unsigned integer
//	      | "[" shape "]"                     array
//	      | "{:" shape "}"                    map object: each member's value
//	      | "{" [ field { "," field } ] "}"   record object
//	field = name ":" shape                    name: a JSON string literal
//
// The empty text is "*". For example {"cents":i64,"id":s,"tags":[s]}.

// String renders s in the compact text, record fields sorted by name; nil
// is "*".
func (s *JSONShape) String() string {
	var b strings.Builder
	s.write(&b)
	return b.String()
}

func (s *JSONShape) write(b *strings.Builder) {
	if s == nil {
		b.WriteByte('*')
		return
	}
	switch s.Kind {
	case JSONBoolean:
		b.WriteByte('b')
	case JSONString:
		b.WriteByte('s')
	case JSONNumber:
		b.WriteString("n" + strconv.Itoa(bitsOr64(s.Bits)))
	case JSONInteger:
		if s.Unsigned {
			b.WriteByte('u')
		} else {
			b.WriteByte('i')
		}
		b.WriteString(strconv.Itoa(bitsOr64(s.Bits)))
	case JSONArray:
		b.WriteByte('[')
		s.Elements.write(b)
		b.WriteByte(']')
	case JSONObject:
		b.WriteByte('{')
		if s.Elements != nil {
			b.WriteByte(':')
			s.Elements.write(b)
		} else {
			names := slices.Sorted(maps.Keys(s.Fields))
			for i, n := range names {
				if i > 0 {
					b.WriteByte(',')
				}
				q, _ := json.Marshal(n) // a JSON string literal; a string always marshals
				b.Write(q)
				b.WriteByte(':')
				s.Fields[n].write(b)
			}
		}
		b.WriteByte('}')
	default:
		b.WriteByte('*')
	}
}

// ParseShape parses the compact text of a shape (String); "" and "*" are
// nil: any JSON. It refuses a shape deeper than MaxShapeDepth or with more
// than MaxShapeNodes shapes.
func ParseShape(text string) (*JSONShape, error) {
	if text == "" {
		return nil, nil
	}
	p := &shapeParser{text: text}
	s, err := p.shape(1)
	if err != nil {
		return nil, err
	}
	if p.pos != len(text) {
		return nil, p.errorf("unexpected %q", text[p.pos:])
	}
	return s, nil
}

type shapeParser struct {
	text  string
	pos   int
	nodes int
}

func (p *shapeParser) errorf(format string, args ...any) error {
	return fmt.Errorf("shape %q at byte %d: %s", p.text, p.pos, fmt.Sprintf(format, args...))
}

func (p *shapeParser) shape(depth int) (*JSONShape, error) {
	if depth > MaxShapeDepth {
		return nil, p.errorf("more than %d levels deep", MaxShapeDepth)
	}
	if p.nodes++; p.nodes > MaxShapeNodes {
		return nil, p.errorf("more than %d shapes", MaxShapeNodes)
	}
	if p.pos >= len(p.text) {
		return nil, p.errorf("a shape expected")
	}
	c := p.text[p.pos]
	p.pos++
	switch c {
	case '*':
		return nil, nil
	case 'b':
		return &JSONShape{Kind: JSONBoolean}, nil
	case 's':
		return &JSONShape{Kind: JSONString}, nil
	case 'n', 'i', 'u':
		start := p.pos
		for p.pos < len(p.text) && p.text[p.pos] >= '0' && p.text[p.pos] <= '9' {
			p.pos++
		}
		bits := p.text[start:p.pos]
		if c == 'n' {
			if bits != "32" && bits != "64" {
				return nil, p.errorf("a number has 32 or 64 bits, not %q", bits)
			}
			n, _ := strconv.Atoi(bits)
			return &JSONShape{Kind: JSONNumber, Bits: n}, nil
		}
		if bits != "8" && bits != "16" && bits != "32" && bits != "64" {
			return nil, p.errorf("an integer has 8, 16, 32 or 64 bits, not %q", bits)
		}
		n, _ := strconv.Atoi(bits)
		return &JSONShape{Kind: JSONInteger, Bits: n, Unsigned: c == 'u'}, nil
	case '[':
		el, err := p.shape(depth + 1)
		if err != nil {
			return nil, err
		}
		if err := p.expect(']'); err != nil {
			return nil, err
		}
		return &JSONShape{Kind: JSONArray, Elements: el}, nil
	case '{':
		return p.object(depth)
	}
	p.pos--
	return nil, p.errorf("unknown shape %q", c)
}

// object parses the rest of an object shape, after its "{".
func (p *shapeParser) object(depth int) (*JSONShape, error) {
	s := &JSONShape{Kind: JSONObject}
	if p.peek(':') {
		p.pos++
		el, err := p.shape(depth + 1)
		if err != nil {
			return nil, err
		}
		s.Elements = el
		return s, p.expect('}')
	}
	for i := 0; !p.peek('}'); i++ {
		if i > 0 {
			if err := p.expect(','); err != nil {
				return nil, err
			}
		}
		name, err := p.name()
		if err != nil {
			return nil, err
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		f, err := p.shape(depth + 1)
		if err != nil {
			return nil, err
		}
		if s.Fields == nil {
			s.Fields = map[string]*JSONShape{}
		}
		if _, dup := s.Fields[name]; dup {
			return nil, p.errorf("field %q twice", name)
		}
		s.Fields[name] = f
	}
	p.pos++
	return s, nil
}

func (p *shapeParser) peek(c byte) bool { return p.pos < len(p.text) && p.text[p.pos] == c }

func (p *shapeParser) expect(c byte) error {
	if !p.peek(c) {
		return p.errorf("%q expected", c)
	}
	p.pos++
	return nil
}

// name reads a field name: a JSON string literal.
func (p *shapeParser) name() (string, error) {
	if !p.peek('"') {
		return "", p.errorf("a quoted field name expected")
	}
	end := p.pos + 1
	for end < len(p.text) && p.text[end] != '"' {
		if p.text[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(p.text) {
		return "", p.errorf("unterminated field name")
	}
	var name string
	if err := json.Unmarshal([]byte(p.text[p.pos:end+1]), &name); err != nil {
		return "", p.errorf("field name: %v", err)
	}
	p.pos = end + 1
	return name, nil
}

// Check reports why v does not match vt, or nil. An unset value, and any
// value for a nil vt, match.
func (vt *ValueType) Check(v Value) error {
	if vt == nil || v.IsZero() || (v.Ref != "" && v.Data == nil) {
		// A value object without its bytes is a durable value: it was
		// checked when it arrived, with its bytes.
		return nil
	}
	enc, _, _ := strings.Cut(v.Type, ":")
	if vt.Encoding != "" && enc != vt.Encoding {
		return fmt.Errorf("the value's encoding is %q, the declared type %s has %q", enc, vt.describe(), vt.Encoding)
	}
	if enc != "json" || vt.Shape == "" || vt.Shape == "*" {
		return nil
	}
	shape, err := ParseShape(vt.Shape)
	if err != nil {
		return nil // checked when the definition was taken; never refuse on it
	}
	valid, mis := scanJSON(v.Data, shape)
	if !valid {
		return errors.New("the value is not valid JSON")
	}
	if mis != nil {
		return fmt.Errorf("the value does not decode as the declared type %s: %w", vt.describe(), mis)
	}
	return nil
}

func (vt *ValueType) describe() string {
	if vt.Type == "" {
		return "(unnamed)"
	}
	return strconv.Quote(vt.Type)
}

// shapeMismatch says where and how a JSON value breaks its shape.
type shapeMismatch struct {
	path, got, want string
}

func (m *shapeMismatch) Error() string {
	if m.path == "" {
		return fmt.Sprintf("%s where %s is expected", m.got, m.want)
	}
	return fmt.Sprintf("at %s: %s where %s is expected", m.path, m.got, m.want)
}

// field is the shape of member key of a record: the field of that name,
// else the one field whose name folds to it (Go's encoding/json matches
// case-insensitively), else nil (any: the member is ignored).
func (s *JSONShape) field(key string) *JSONShape {
	if f, ok := s.Fields[key]; ok {
		return f
	}
	var found *JSONShape
	n := 0
	for name, f := range s.Fields {
		if strings.EqualFold(name, key) {
			found = f
			n++
		}
	}
	if n != 1 {
		return nil
	}
	return found
}

func bitsOr64(b int) int {
	if b == 0 {
		return 64
	}
	return b
}
