package server

import (
	"strings"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// Covers: E36
func TestHelloIn_IndexedAttributes(t *testing.T) {
	t.Parallel()
	hello := func(idx map[string]*dexpb.IndexedAttribute) *dexpb.Hello {
		return &dexpb.Hello{WorkerId: "w", MaxConcurrentTasks: 1, FlowTypes: []*dexpb.FlowTypeDeclaration{{
			FlowType: "order", AttributeNames: []string{"status", "amount"}, IndexedAttributes: idx}}}
	}
	h, err := helloIn(hello(map[string]*dexpb.IndexedAttribute{
		"status": {Key: "OrderStatus"}, "amount": {Type: dexpb.IndexType_INDEX_TYPE_INT}}))
	if err != nil {
		t.Fatal(err)
	}
	got := h.FlowTypes[0].Definition.Indexed
	if got["status"] != (engine.IndexedAttribute{Key: "OrderStatus", Type: engine.IndexKeyword}) ||
		got["amount"] != (engine.IndexedAttribute{Key: "amount", Type: engine.IndexInt}) {
		t.Fatalf("indexed %+v", got)
	}
	for _, tc := range []struct {
		idx  map[string]*dexpb.IndexedAttribute
		want string
	}{
		{map[string]*dexpb.IndexedAttribute{"nope": {}}, `indexedAttributes[nope]: "nope" is not declared`},
		{map[string]*dexpb.IndexedAttribute{"status": nil}, "indexedAttributes[status]: must be set"},
		{map[string]*dexpb.IndexedAttribute{"status": {Type: 99}}, "indexedAttributes[status].type: unknown index type 99"},
		{map[string]*dexpb.IndexedAttribute{"status": {Key: "1x"}}, `indexedAttributes[status].key: index key "1x"`},
		{map[string]*dexpb.IndexedAttribute{"status": {Key: "a b"}}, `index key "a b"`},
		{map[string]*dexpb.IndexedAttribute{"status": {Key: strings.Repeat("k", 65)}}, "longer than 64 bytes"},
		{map[string]*dexpb.IndexedAttribute{"status": {Key: "flowtype"}}, "is a built-in search field"},
		{map[string]*dexpb.IndexedAttribute{"status": {Key: "amount"}, "amount": {}}, `index key "amount" is also the key of attribute "amount"`},
	} {
		if _, err := helloIn(hello(tc.idx)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.idx, err, tc.want)
		}
	}
}
