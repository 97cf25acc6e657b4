package server

import (
	"fmt"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// valueTypesIn converts the declared value types of a flow type's
// attributes or channels (FlowTypeDeclaration.attribute_types,
// channel_types) and checks them (names declared, shapes well formed and
// within bounds), so that a bad Hello is refused at once, naming the field.
func valueTypesIn(field string, in map[string]*dexpb.ValueType, declared []string) (map[string]*engine.ValueType, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]*engine.ValueType, len(in))
	for name, vt := range in {
		shape, err := shapeIn(fmt.Sprintf("%s[%s].jsonShape", field, name), vt.GetJsonShape())
		if err != nil {
			return nil, err
		}
		out[name] = &engine.ValueType{Encoding: vt.GetEncoding(), Type: vt.GetType(), Shape: shapeText(shape)}
	}
	if err := engine.ValidateValueTypes(field, out, declared); err != nil {
		return nil, err
	}
	return out, nil
}

// valueTypeIn converts and checks one declared type; nil when unset.
func valueTypeIn(field string, vt *dexpb.ValueType) (*engine.ValueType, error) {
	if vt == nil {
		return nil, nil
	}
	shape, err := shapeIn(field+".jsonShape", vt.GetJsonShape())
	if err != nil {
		return nil, err
	}
	out := &engine.ValueType{Encoding: vt.GetEncoding(), Type: vt.GetType(), Shape: shapeText(shape)}
	if err := engine.ValidateValueType(field, out); err != nil {
		return nil, err
	}
	return out, nil
}

// shapeText is a shape's compact text, "" for any JSON.
func shapeText(s *engine.JSONShape) string {
	if s == nil {
		return ""
	}
	return s.String()
}

// shapeIn converts a shape; the engine checks it (protobuf bounds its
// depth at 100 while decoding).
func shapeIn(field string, s *dexpb.JsonShape) (*engine.JSONShape, error) {
	if s == nil {
		return nil, nil
	}
	out := &engine.JSONShape{Bits: int(s.GetBits()), Unsigned: s.GetUnsigned()}
	switch s.GetKind() {
	case dexpb.JsonKind_JSON_KIND_UNSPECIFIED:
		out.Kind = engine.JSONAny
	case dexpb.JsonKind_JSON_KIND_BOOLEAN:
		out.Kind = engine.JSONBoolean
	case dexpb.JsonKind_JSON_KIND_NUMBER:
		out.Kind = engine.JSONNumber
	case dexpb.JsonKind_JSON_KIND_INTEGER:
		out.Kind = engine.JSONInteger
	case dexpb.JsonKind_JSON_KIND_STRING:
		out.Kind = engine.JSONString
	case dexpb.JsonKind_JSON_KIND_ARRAY:
		out.Kind = engine.JSONArray
	case dexpb.JsonKind_JSON_KIND_OBJECT:
		out.Kind = engine.JSONObject
	default:
		return nil, argError(field+".kind", "unknown kind %d", s.GetKind())
	}
	var err error
	if out.Elements, err = shapeIn(field+".elements", s.GetElements()); err != nil {
		return nil, err
	}
	for name, fs := range s.GetFields() {
		sub, err := shapeIn(fmt.Sprintf("%s.fields[%s]", field, name), fs)
		if err != nil {
			return nil, err
		}
		if out.Fields == nil {
			out.Fields = map[string]*engine.JSONShape{}
		}
		out.Fields[name] = sub
	}
	return out, nil
}
