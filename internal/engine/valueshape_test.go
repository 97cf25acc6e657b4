package engine

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// Check never panics, refuses no null, and refuses what is not JSON.
func FuzzValueTypeCheck(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"c"}]}`, `[1.5,-2,"x",true,null]`, `"s"`, `18446744073709551616`, `{"A":{"a":1}}`} {
		f.Add([]byte(s))
	}
	vt := &ValueType{Encoding: "json", Type: "t", Shape: `{"a":[u8],"b":{:n32},"c":s,"d":b,"e":*}`}
	if err := ValidateValueType("t", vt); err != nil {
		f.Fatal(err)
	}
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

// ParseShape reads what String writes, and nothing else.
func FuzzParseShape(f *testing.F) {
	for _, s := range []string{`*`, `{"a":[u8],"b":{:n32},"c":s,"d\"\u00e9":b,"e":*}`, `[[i16]]`, `{}`, `{:*}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseShape(text)
		if err != nil {
			return
		}
		again, err := ParseShape(s.String())
		if err != nil || again.String() != s.String() {
			t.Fatalf("%q: String %q does not parse back the same: %v", text, s.String(), err)
		}
	})
}

// A declared type must name a declared attribute or channel, and its shape
// must parse, within bounds.
func TestValidateValueTypes(t *testing.T) {
	t.Parallel()
	cases := map[string]*ValueType{
		"12-bit integer":    {Shape: "i12"},
		"16-bit number":     {Shape: "n16"},
		"unknown shape":     {Shape: "date"},
		"unclosed array":    {Shape: "[s"},
		"unquoted field":    {Shape: "{a:s}"},
		"field twice":       {Shape: `{"a":s,"a":b}`},
		"trailing text":     {Shape: "s s"},
		"too deep":          {Shape: strings.Repeat("[", MaxShapeDepth) + "s" + strings.Repeat("]", MaxShapeDepth)},
		"too many":          {Shape: manyFields(MaxShapeNodes + 1)},
		"colon in encoding": {Encoding: "a:b"},
	}
	for name, vt := range cases {
		if err := ValidateValueTypes("types", map[string]*ValueType{"x": vt}, []string{"x"}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ok := map[string]*ValueType{"x": {Encoding: "json", Shape: strings.Repeat("[", MaxShapeDepth-1) + "i16" + strings.Repeat("]", MaxShapeDepth-1)},
		"y": {Shape: manyFields(MaxShapeNodes)}}
	if err := ValidateValueTypes("types", ok, []string{"x", "y"}); err != nil {
		t.Errorf("a valid type: %v", err)
	}
	if err := ValidateValueTypes("types", ok, []string{"x"}); err == nil {
		t.Error("a type for an undeclared name: accepted")
	}
}

// manyFields is a record shape of n shapes: itself and n-1 string fields.
func manyFields(n int) string {
	fields := make([]string, n-1)
	for i := range fields {
		fields[i] = `"f` + strconv.Itoa(i) + `":s`
	}
	return "{" + strings.Join(fields, ",") + "}"
}

// CheckStartInput is Decide's own check of a start's input, the start step
// resolved as Decide resolves it (the definition's start step when the
// start names none); a StartFlow marked InputChecked is not checked again.
//
// Covers: E2
func TestCheckStartInput_IsDecidesCheck(t *testing.T) {
	def := &FlowDefinition{Type: "typed", Start: "A", Steps: map[string]StepDef{
		"A": {Input: &ValueType{Encoding: "json", Shape: "s"}}}}
	obj := Value{Type: "json:main.X", Data: []byte(`{"id":"x"}`)}
	for _, step := range []string{"", "A"} {
		if err := CheckStartInput(def, step, obj); err == nil || !strings.Contains(err.Error(), `start step "A"`) {
			t.Errorf("step %q: an object for a string: %v", step, err)
		}
		if err := CheckStartInput(def, step, Value{Type: "json:string", Data: []byte(`"x"`)}); err != nil {
			t.Errorf("step %q: a string: %v", step, err)
		}
	}
	e := New(Config{})
	start := StartFlow{FlowID: "f", FlowType: "typed", RunID: "r", Input: obj, Definition: def}
	if _, err := e.Decide(nil, start, base); err == nil {
		t.Error("Decide started a flow whose input does not match")
	}
	start.InputChecked = true
	if _, err := e.Decide(nil, start, base); err != nil {
		t.Errorf("Decide checked an input marked checked: %v", err)
	}
}
