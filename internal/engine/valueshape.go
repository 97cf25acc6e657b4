package engine

import (
	"encoding/json"
	"errors"
	"fmt"
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

// JSONShape describes the JSON values that decode as a type.
type JSONShape struct {
	Kind JSONKind `json:"kind,omitempty"`
	// Bits is a number's or an integer's size (0: 64).
	Bits int `json:"bits,omitempty"`
	// Unsigned: an integer must not be negative.
	Unsigned bool `json:"unsigned,omitempty"`
	// Elements is the shape of an array's elements or a map object's
	// values; nil: any.
	Elements *JSONShape `json:"elements,omitempty"`
	// Fields are a record object's checked members by JSON name; a member
	// matches a field exactly, else case-insensitively when only one field
	// folds to it.
	Fields map[string]*JSONShape `json:"fields,omitempty"`
}

// ValueType is a declared value type.
type ValueType struct {
	// Encoding is the values' encoding ("json"); empty: any.
	Encoding string `json:"encoding,omitempty"`
	// Type names the type for people; never compared.
	Type string `json:"type,omitempty"`
	// Shape is what a "json" value must look like; nil: any JSON.
	Shape *JSONShape `json:"shape,omitempty"`
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
// encoding, and that its shape is well formed and within MaxShapeDepth and
// MaxShapeNodes.
func ValidateValueType(field string, vt *ValueType) error {
	if vt == nil {
		return nil
	}
	if strings.Contains(vt.Encoding, ":") {
		return invalidArg(field+".encoding", "%q must not contain ':'", vt.Encoding)
	}
	nodes := 0
	return vt.Shape.validate(field+".shape", 1, &nodes)
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (s *JSONShape) validate(field string, depth int, nodes *int) error {
	if s == nil {
		return nil
	}
	*nodes++
	if *nodes > MaxShapeNodes {
		return invalidArg(field, "has more than %d shapes", MaxShapeNodes)
	}
	if depth > MaxShapeDepth {
		return invalidArg(field, "is more than %d levels deep", MaxShapeDepth)
	}
	switch s.Kind {
	case JSONAny, JSONBoolean, JSONString, JSONArray, JSONObject:
		if s.Bits != 0 || s.Unsigned {
			return invalidArg(field, "bits and unsigned are for numbers and integers, not %q", s.Kind)
		}
	case JSONNumber:
		if s.Bits != 0 && s.Bits != 32 && s.Bits != 64 || s.Unsigned {
			return invalidArg(field+".bits", "a number has 32 or 64 bits and no sign flag, not %d", s.Bits)
		}
	case JSONInteger:
		if s.Bits != 0 && s.Bits != 8 && s.Bits != 16 && s.Bits != 32 && s.Bits != 64 {
			return invalidArg(field+".bits", "an integer has 8, 16, 32 or 64 bits, not %d", s.Bits)
		}
	default:
		return invalidArg(field+".kind", "unknown kind %q", s.Kind)
	}
	if s.Elements != nil && s.Kind != JSONArray && s.Kind != JSONObject {
		return invalidArg(field+".elements", "only an array or an object has elements, not %q", s.Kind)
	}
	if len(s.Fields) > 0 && (s.Kind != JSONObject || s.Elements != nil) {
		return invalidArg(field+".fields", "only an object without elements has fields")
	}
	if err := s.Elements.validate(field+".elements", depth+1, nodes); err != nil {
		return err
	}
	for name, fs := range s.Fields {
		if err := fs.validate(field+".fields["+name+"]", depth+1, nodes); err != nil {
			return err
		}
	}
	return nil
}

// Check reports why v does not match vt, or nil. An unset value, and any
// value for a nil vt, match.
func (vt *ValueType) Check(v Value) error {
	if vt == nil || v.IsZero() {
		return nil
	}
	enc, _, _ := strings.Cut(v.Type, ":")
	if vt.Encoding != "" && enc != vt.Encoding {
		return fmt.Errorf("the value's encoding is %q, the declared type %s has %q", enc, vt.describe(), vt.Encoding)
	}
	if enc != "json" || vt.Shape == nil {
		return nil
	}
	if !json.Valid(v.Data) {
		return errors.New("the value is not valid JSON")
	}
	dec := json.NewDecoder(strings.NewReader(string(v.Data))) // the engine imports no bytes or io
	dec.UseNumber()
	if err := vt.Shape.match(dec, ""); err != nil {
		var m *shapeMismatch
		if errors.As(err, &m) {
			return fmt.Errorf("the value does not decode as the declared type %s: %w", vt.describe(), m)
		}
		return fmt.Errorf("the value is not valid JSON: %w", err)
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

// match reads one JSON value from dec and checks it against s (nil: any).
func (s *JSONShape) match(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil // null decodes as anything
	}
	if s == nil || s.Kind == JSONAny {
		return skipValue(dec, tok)
	}
	mismatch := func(want string) error { return &shapeMismatch{path: path, got: describeToken(tok), want: want} }
	switch s.Kind {
	case JSONBoolean:
		if _, ok := tok.(bool); !ok {
			return mismatch("a boolean")
		}
	case JSONString:
		if _, ok := tok.(string); !ok {
			return mismatch("a string")
		}
	case JSONNumber:
		n, ok := tok.(json.Number)
		if !ok {
			return mismatch("a number")
		}
		if _, err := strconv.ParseFloat(string(n), bitsOr64(s.Bits)); err != nil {
			return mismatch(fmt.Sprintf("a %d-bit float", bitsOr64(s.Bits)))
		}
	case JSONInteger:
		n, ok := tok.(json.Number)
		if !ok {
			return mismatch("an integer")
		}
		if s.Unsigned {
			_, err = strconv.ParseUint(string(n), 10, bitsOr64(s.Bits))
		} else {
			_, err = strconv.ParseInt(string(n), 10, bitsOr64(s.Bits))
		}
		if err != nil {
			sign := ""
			if s.Unsigned {
				sign = "un"
			}
			return mismatch(fmt.Sprintf("an integer (%ssigned, %d bits)", sign, bitsOr64(s.Bits)))
		}
	case JSONArray:
		if tok != json.Delim('[') {
			return mismatch("an array")
		}
		for i := 0; dec.More(); i++ {
			if err := s.Elements.match(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	case JSONObject:
		if tok != json.Delim('{') {
			return mismatch("an object")
		}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			sub := s.Elements
			if s.Fields != nil {
				sub = s.field(key)
			}
			if err := sub.match(dec, path+"."+key); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
		return err
	}
	return nil
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

// skipValue reads the rest of the value that tok starts.
func skipValue(dec *json.Decoder, tok json.Token) error {
	if tok != json.Delim('{') && tok != json.Delim('[') {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

func describeToken(tok json.Token) string {
	switch t := tok.(type) {
	case bool:
		return fmt.Sprintf("the boolean %t", t)
	case json.Number:
		return "the number " + string(t)
	case string:
		return "a string"
	case json.Delim:
		if t == '{' {
			return "an object"
		}
		return "an array"
	}
	return "a value"
}
