package dex

import (
	"errors"
	"strings"
	"testing"
)

// Covers: E33
func TestMapInstanceName_RoundTrips(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, k := range []string{"c1", "a/b", "a%2Fb", "%", "%25", "/", "a%", "x/y%z", "ü"} {
		wire := MapInstanceName("tier", k)
		if prev, ok := seen[wire]; ok {
			t.Fatalf("keys %q and %q share %q", prev, k, wire)
		}
		seen[wire] = k
		name, key, ok := ParseMapInstanceName(wire)
		if !ok || name != "tier" || key != k {
			t.Fatalf("ParseMapInstanceName(%q) = %q, %q, %v; want tier, %q", wire, name, key, ok, k)
		}
	}
	for _, bad := range []string{"tier", "tier/", "/k", "tier/a%", "tier/a%2f", "tier/a%41"} {
		if _, _, ok := ParseMapInstanceName(bad); ok {
			t.Errorf("ParseMapInstanceName(%q) accepted", bad)
		}
	}
}

// Covers: E33
func TestFlow_MapDeclarations(t *testing.T) {
	t.Parallel()
	tier := DefineAttributeMap[string, string]("tier")
	orders := DefineChannelMap[string, int]("orders")
	rpc := DefineRPC("r", func(Context, int) (int, error) { return 0, nil })
	d, err := NewFlow("m").Attributes(tier).Channels(orders).RPCs(rpc).compile(true)
	if err != nil {
		t.Fatal(err)
	}
	if !d.attributes["tier/"] || !d.channels["orders/"] {
		t.Fatalf("declared %v %v, want tier/ and orders/", d.attrNames, d.chanNames)
	}
	for name, want := range map[string]bool{"tier/a": true, "tier/a%2Fb": true, "tier/": false, "tier": false, "tier/a%": false, "other/a": false} {
		if got := declaredIn(d.attributes, name); got != want {
			t.Errorf("declaredIn(%q) = %v, want %v", name, got, want)
		}
	}
	for _, f := range []*Flow{
		NewFlow("m").Attributes(tier, DefineAttribute[int]("tier/x")).RPCs(rpc),
		NewFlow("m").Attributes(DefineAttribute[int]("plain/")).RPCs(rpc),
		NewFlow("m").Channels(orders, DefineChannel[int]("orders/eu")).RPCs(rpc),
		NewFlow("m").Attributes(tier, DefineAttributeMap[string, int]("tier")).RPCs(rpc),
	} {
		if err := f.Validate(); !errors.Is(err, ErrInvalidFlow) {
			t.Errorf("Validate: %v, want ErrInvalidFlow", err)
		} else if !strings.Contains(err.Error(), "tier") && !strings.Contains(err.Error(), "plain") && !strings.Contains(err.Error(), "orders") {
			t.Errorf("Validate: %v does not name the map", err)
		}
	}
}
