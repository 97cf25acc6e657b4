package engine

import (
	"encoding/json"
	"testing"
)

// Check never panics, refuses no null, and refuses what is not JSON.
func FuzzValueTypeCheck(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"c"}]}`, `[1.5,-2,"x",true,null]`, `"s"`, `18446744073709551616`, `{"A":{"a":1}}`} {
		f.Add([]byte(s))
	}
	vt := &ValueType{Encoding: "json", Type: "t", Shape: &JSONShape{Kind: JSONObject, Fields: map[string]*JSONShape{
		"a": {Kind: JSONArray, Elements: &JSONShape{Kind: JSONInteger, Bits: 8, Unsigned: true}},
		"b": {Kind: JSONObject, Elements: &JSONShape{Kind: JSONNumber, Bits: 32}},
		"c": {Kind: JSONString}, "d": {Kind: JSONBoolean}, "e": nil,
	}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := vt.Check(Value{Type: "json:t", Data: data})
		if !json.Valid(data) && err == nil {
			t.Fatalf("invalid JSON %q accepted", data)
		}
		if string(data) == "null" && err != nil {
			t.Fatalf("null refused: %v", err)
		}
	})
}

// A declared type must name a declared attribute or channel and have a
// well-formed shape within bounds.
func TestValidateValueTypes(t *testing.T) {
	t.Parallel()
	deep := &JSONShape{}
	for range MaxShapeDepth {
		deep = &JSONShape{Kind: JSONArray, Elements: deep}
	}
	cases := map[string]*ValueType{
		"number with sign":     {Shape: &JSONShape{Kind: JSONNumber, Unsigned: true}},
		"string with bits":     {Shape: &JSONShape{Kind: JSONString, Bits: 8}},
		"unknown kind":         {Shape: &JSONShape{Kind: "date"}},
		"elements of a string": {Shape: &JSONShape{Kind: JSONString, Elements: &JSONShape{}}},
		"fields of an array":   {Shape: &JSONShape{Kind: JSONArray, Fields: map[string]*JSONShape{"a": nil}}},
		"too deep":             {Shape: deep},
		"colon in encoding":    {Encoding: "a:b"},
	}
	for name, vt := range cases {
		if err := ValidateValueTypes("types", map[string]*ValueType{"x": vt}, []string{"x"}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ok := map[string]*ValueType{"x": {Encoding: "json", Shape: &JSONShape{Kind: JSONInteger, Bits: 16}}}
	if err := ValidateValueTypes("types", ok, []string{"x"}); err != nil {
		t.Errorf("a valid type: %v", err)
	}
	if err := ValidateValueTypes("types", ok, []string{"y"}); err == nil {
		t.Error("a type for an undeclared name: accepted")
	}
}
