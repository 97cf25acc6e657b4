package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dexraw"
	"github.com/dexzd/dexzd/internal/engine"
)

type vtInner struct {
	N uint16 `json:"n"`
}

type vtEmbedded struct {
	Deep bool
}

type vtNode struct {
	Name string  `json:"name"`
	Next *vtNode `json:"next"`
}

type vtRecord struct {
	ID     string            `json:"id"`
	Cents  int64             `json:"cents"`
	Ratio  float32           `json:"ratio"`
	Quoted int               `json:"quoted,string"`
	Skip   int               `json:"-"`
	Raw    json.RawMessage   `json:"raw"`
	When   time.Time         `json:"when"`
	Blob   []byte            `json:"blob"`
	Inner  vtInner           `json:"inner"`
	Ptrs   []*vtInner        `json:"ptrs"`
	ByKey  map[string]int8   `json:"byKey"`
	ByInt  map[int]string    `json:"byInt"`
	Any    any               `json:"any"`
	Fixed  [2]bool           `json:"fixed"`
	Same   string            `json:"same"`
	SAME   int               // shares "same" case-insensitively: unchecked
	hidden int               //nolint:unused // unexported: ignored by encoding/json
	Node   vtNode            `json:"node"`
	Text   map[vtKey]float64 `json:"text"`
	vtEmbedded
}

type vtKey string

func (k *vtKey) UnmarshalText(b []byte) error { *k = vtKey(b); return nil }

// The worker's declared shapes (dex) and the server's check (engine)
// agree with encoding/json: a value that Go decodes into the type is never
// refused, and a value Go refuses is refused unless it is one of the
// documented blind spots (listed per case).
//
// Covers: E16, E21
func TestValueTypes_AgreeWithEncodingJSON(t *testing.T) {
	t.Parallel()
	type probe struct {
		json  string
		blind bool // Go refuses it, the shape does not describe why
	}
	cases := []struct {
		attr   dex.AttributeDef
		typ    reflect.Type
		probes []probe
	}{
		{dex.DefineAttribute[bool]("b"), reflect.TypeFor[bool](), []probe{{json: `true`}, {json: `null`}, {json: `"true"`}, {json: `1`}, {json: `{}`}}},
		{dex.DefineAttribute[int8]("i8"), reflect.TypeFor[int8](), []probe{{json: `127`}, {json: `-128`}, {json: `128`}, {json: `1.0`}, {json: `1e2`}, {json: `"1"`}}},
		{dex.DefineAttribute[uint]("u"), reflect.TypeFor[uint](), []probe{{json: `0`}, {json: `18446744073709551615`}, {json: `-1`}, {json: `18446744073709551616`}}},
		{dex.DefineAttribute[float32]("f32"), reflect.TypeFor[float32](), []probe{{json: `1.5`}, {json: `-3e38`}, {json: `1e39`}, {json: `"x"`}}},
		{dex.DefineAttribute[string]("s"), reflect.TypeFor[string](), []probe{{json: `"x"`}, {json: `1`}, {json: `[]`}}},
		{dex.DefineAttribute[[]int]("ints"), reflect.TypeFor[[]int](), []probe{{json: `[1,2]`}, {json: `[]`}, {json: `[1,"2"]`}, {json: `{}`}, {json: `[null]`}}},
		{dex.DefineAttribute[map[string][]bool]("m"), reflect.TypeFor[map[string][]bool](), []probe{{json: `{"a":[true]}`}, {json: `{"a":true}`}, {json: `[]`}}},
		{dex.DefineAttribute[any]("any"), reflect.TypeFor[any](), []probe{{json: `1`}, {json: `{"a":[1]}`}}},
		{dex.DefineAttribute[*vtNode]("node"), reflect.TypeFor[*vtNode](), []probe{
			{json: `{"name":"a","next":{"name":"b","next":{"name":"c"}}}`}, {json: `{"name":1}`}, {json: `{"next":{"name":2}}`, blind: true}}},
		{dex.DefineAttribute[vtRecord]("rec"), reflect.TypeFor[vtRecord](), []probe{
			{json: `{"id":"a","cents":-5,"ratio":0.5,"quoted":"7","Skip":"x","raw":[1,{"x":2}],"when":"2026-01-01T00:00:00Z",` +
				`"blob":"AAE=","inner":{"n":65535},"ptrs":[{"n":1},null],"byKey":{"a":-1},"byInt":{"1":"x"},"any":[{}],` +
				`"fixed":[true,false,true],"same":"s","node":{"name":"n","next":{"name":"m"}},"text":{"k":1.5},"Deep":true,"hidden":"x"}`},
			{json: `{"ID":"a","CENTS":1,"Inner":{"N":1},"deep":false}`},
			{json: `{"id":1}`}, {json: `{"cents":"1"}`}, {json: `{"ratio":1e39}`}, {json: `{"inner":{"n":-1}}`},
			{json: `{"ptrs":[{"n":"x"}]}`}, {json: `{"byKey":{"a":128}}`}, {json: `{"byInt":{"1":2}}`}, {json: `{"fixed":[1]}`},
			{json: `{"node":{"name":1}}`}, {json: `{"text":{"k":"x"}}`}, {json: `{"Deep":"yes"}`}, {json: `[]`},
			{json: `{"quoted":7}`, blind: true}, {json: `{"when":"yesterday"}`, blind: true}, {json: `{"blob":"!"}`, blind: true},
			{json: `{"byInt":{"x":"y"}}`, blind: true}, {json: `{"when":1}`, blind: true}, {json: `{"raw":1}`},
			{json: `{"SAME":"x"}`, blind: true}}},
	}
	attrs := make([]dex.AttributeDef, len(cases))
	for i, c := range cases {
		attrs[i] = c.attr
	}
	flow := dex.NewFlow("shapes").RPCs(dex.DefineRPC("noop", func(dex.Context, int) (int, error) { return 0, nil })).Attributes(attrs...)
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"unused:1"}}, flow)
	if err != nil {
		t.Fatal(err)
	}
	hello, err := helloIn(dexraw.Hello(w))
	if err != nil {
		t.Fatalf("the SDK's declaration is refused: %v", err)
	}
	types := hello.FlowTypes[0].Definition.AttributeTypes
	for _, c := range cases {
		vt := types[c.attr.Name()]
		if vt == nil {
			t.Fatalf("no type declared for %q", c.attr.Name())
		}
		for _, p := range c.probes {
			goErr := json.Unmarshal([]byte(p.json), reflect.New(c.typ).Interface())
			err := vt.Check(engine.Value{Type: "json:whatever", Data: []byte(p.json)})
			name := fmt.Sprintf("%s %s", c.typ, p.json)
			switch {
			case goErr == nil && err != nil:
				t.Errorf("%s: Go decodes it, the server refuses it: %v", name, err)
			case goErr != nil && err == nil && !p.blind:
				t.Errorf("%s: Go refuses it (%v), the server accepts it", name, goErr)
			case goErr != nil && err != nil && p.blind:
				t.Errorf("%s: marked blind, but refused: %v", name, err)
			case goErr == nil && p.blind:
				t.Errorf("%s: marked blind, but Go decodes it", name)
			}
		}
	}
	// Another encoding than the declared one is refused too.
	if err := types["b"].Check(engine.Value{Type: "binary:", Data: []byte{1}}); err == nil {
		t.Error("a binary value for a JSON attribute is accepted")
	}
}

// A Hello whose value types break the rules is refused, naming the field.
//
// Covers: W1
func TestHelloIn_RefusesBadValueTypes(t *testing.T) {
	t.Parallel()
	// An undeclared name, a bad kind combination: see valueshape.go.
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"unused:1"}},
		dex.NewFlow("f").RPCs(dex.DefineRPC("noop", func(dex.Context, int) (int, error) { return 0, nil })).Attributes(dex.DefineAttribute[int]("a")))
	if err != nil {
		t.Fatal(err)
	}
	h := proto.CloneOf(dexraw.Hello(w))
	h.GetFlowTypes()[0].AttributeNames = nil
	if _, err := helloIn(h); err == nil || !strings.Contains(err.Error(), "hello.flowTypes[0].attributeTypes[a]") {
		t.Errorf("undeclared attribute type: %v", err)
	}
	h = proto.CloneOf(dexraw.Hello(w))
	h.GetFlowTypes()[0].GetAttributeTypes()["a"].GetJsonShape().Bits = 12
	if _, err := helloIn(h); err == nil || !strings.Contains(err.Error(), "bits") {
		t.Errorf("a 12-bit integer: %v", err)
	}
}
