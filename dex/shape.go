package dex

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/dexzd/dexzd/api/dexpb"
)

// The worker declares the type of each attribute's, channel's and step
// input's values (FlowTypeDeclaration.attribute_types, channel_types,
// StepDeclaration.input_type): encoding "json", the Go type's name, and
// the shape of the JSON that decodes as the type, so that the server
// refuses a client's value that would not decode (a SetAttributes, a
// PublishToChannel, a StartFlow's input and attributes), naming the
// attribute, channel or step, instead of letting a handler fail on it
// later.
//
// The shape follows encoding/json, and describes less where it must, so
// that the server never refuses a value the worker decodes: a type with
// its own UnmarshalJSON, an interface, []byte (a base64 string or an
// array), a field with the ",string" option, a type met again inside
// itself, and whatever lies deeper than maxShapeDepth or beyond
// maxShapeNodes accept any JSON; a type with UnmarshalText takes a
// string; a struct's checked members are its fields as encoding/json
// names them, less any name two fields share (even case-insensitively);
// a JSON null matches everything.

const (
	maxShapeDepth = 32  // the server allows 32
	maxShapeNodes = 500 // the server allows 1,000
)

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// valueTypeOf declares the values of Go type t.
func valueTypeOf(t reflect.Type) *dexpb.ValueType {
	b := &shapeBuilder{visiting: map[reflect.Type]bool{}}
	return &dexpb.ValueType{Encoding: EncodingJSON, Type: t.String(), JsonShape: b.shape(t, 1)}
}

type shapeBuilder struct {
	visiting map[reflect.Type]bool
	nodes    int
}

func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(iface))
}

// shape is the JSON shape of t; nil accepts any JSON.
func (b *shapeBuilder) shape(t reflect.Type, depth int) *dexpb.JsonShape {
	for t.Kind() == reflect.Pointer {
		if implements(t, jsonUnmarshaler) || implements(t, textUnmarshaler) {
			break
		}
		t = t.Elem()
	}
	if depth > maxShapeDepth || b.nodes >= maxShapeNodes || b.visiting[t] || implements(t, jsonUnmarshaler) {
		return nil
	}
	if implements(t, textUnmarshaler) {
		b.nodes++
		return &dexpb.JsonShape{Kind: dexpb.JsonKind_JSON_KIND_STRING}
	}
	s := &dexpb.JsonShape{}
	switch t.Kind() {
	case reflect.Bool:
		s.Kind = dexpb.JsonKind_JSON_KIND_BOOLEAN
	case reflect.Int, reflect.Int64:
		s.Kind, s.Bits = dexpb.JsonKind_JSON_KIND_INTEGER, 64
	case reflect.Int8, reflect.Int16, reflect.Int32:
		s.Kind, s.Bits = dexpb.JsonKind_JSON_KIND_INTEGER, uint32(t.Bits()) //nolint:gosec // 8 to 32
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		s.Kind, s.Bits, s.Unsigned = dexpb.JsonKind_JSON_KIND_INTEGER, 64, true
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		s.Kind, s.Bits, s.Unsigned = dexpb.JsonKind_JSON_KIND_INTEGER, uint32(t.Bits()), true //nolint:gosec // 8 to 32
	case reflect.Float32, reflect.Float64:
		s.Kind, s.Bits = dexpb.JsonKind_JSON_KIND_NUMBER, uint32(t.Bits()) //nolint:gosec // 32 or 64
	case reflect.String:
		s.Kind = dexpb.JsonKind_JSON_KIND_STRING
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte: a base64 string, or an array of numbers
		}
		s.Kind = dexpb.JsonKind_JSON_KIND_ARRAY
		b.nodes++
		b.visiting[t] = true
		s.Elements = b.shape(t.Elem(), depth+1)
		delete(b.visiting, t)
		return s
	case reflect.Map:
		switch t.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		default:
			if !implements(t.Key(), textUnmarshaler) {
				return nil
			}
		}
		s.Kind = dexpb.JsonKind_JSON_KIND_OBJECT
		b.nodes++
		b.visiting[t] = true
		s.Elements = b.shape(t.Elem(), depth+1)
		delete(b.visiting, t)
		return s
	case reflect.Struct:
		s.Kind = dexpb.JsonKind_JSON_KIND_OBJECT
		b.nodes++
		b.visiting[t] = true
		for _, f := range jsonFields(t) {
			fs := (*dexpb.JsonShape)(nil)
			if !f.quoted {
				fs = b.shape(f.typ, depth+1)
			}
			if s.Fields == nil {
				s.Fields = map[string]*dexpb.JsonShape{}
			}
			s.Fields[f.name] = fs
		}
		delete(b.visiting, t)
		return s
	default: // interfaces, and what encoding/json cannot decode
		return nil
	}
	b.nodes++
	return s
}

type jsonField struct {
	name   string
	typ    reflect.Type
	quoted bool // the ",string" option: a JSON string holds the value
}

// jsonFields are the fields of struct t that encoding/json decodes into,
// by JSON name, embedded structs' fields included; a name that two fields
// share, even case-insensitively, is left out (encoding/json picks one of
// them by rules not worth copying: not checking it is safe).
func jsonFields(t reflect.Type) []jsonField {
	var all []jsonField
	var walk func(t reflect.Type, seen map[reflect.Type]bool)
	walk = func(t reflect.Type, seen map[reflect.Type]bool) {
		if seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := f.Type
			if f.Anonymous {
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if !f.IsExported() && ft.Kind() != reflect.Struct {
					continue
				}
				if name == "" && ft.Kind() == reflect.Struct {
					walk(ft, seen)
					continue
				}
			} else if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if !plainTagName(name) {
				continue
			}
			quoted := false
			for o := range strings.SplitSeq(opts, ",") {
				quoted = quoted || o == "string"
			}
			all = append(all, jsonField{name: name, typ: f.Type, quoted: quoted})
		}
		delete(seen, t)
	}
	walk(t, map[reflect.Type]bool{})
	var out []jsonField
	for i, f := range all {
		shared := false
		for j, g := range all {
			if i != j && strings.EqualFold(f.name, g.name) {
				shared = true
				break
			}
		}
		if !shared {
			out = append(out, f)
		}
	}
	return out
}

// plainTagName reports whether encoding/json takes name as it is: letters,
// digits and the punctuation it allows. Other names are not checked.
func plainTagName(name string) bool {
	for _, c := range name {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return name != ""
}
