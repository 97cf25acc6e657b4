package engine

import "testing"

// Covers: E33
func TestMapKeyEscaping_RoundTripsAndNeverCollides(t *testing.T) {
	t.Parallel()
	keys := []string{"c1", "a/b", "a%2Fb", "%", "%25", "/", "//", "a%", "%2", "ü/%/x", "a b"}
	seen := map[string]string{}
	for _, k := range keys {
		wire := "customers/" + EscapeMapKey(k)
		if prev, ok := seen[wire]; ok {
			t.Fatalf("keys %q and %q share wire name %q", prev, k, wire)
		}
		seen[wire] = k
		decl, ok := MapInstanceDecl(wire)
		if !ok || decl != "customers/" {
			t.Fatalf("MapInstanceDecl(%q) = %q, %v; want customers/", wire, decl, ok)
		}
		got, ok := UnescapeMapKey(wire[len(decl):])
		if !ok || got != k {
			t.Fatalf("UnescapeMapKey of %q = %q, %v; want %q", wire, got, ok, k)
		}
	}
	for _, bad := range []string{"customers/", "customers", "/k", "customers/a%", "customers/a%2", "customers/a%2f", "customers/a%41"} {
		if decl, ok := MapInstanceDecl(bad); ok {
			t.Errorf("MapInstanceDecl(%q) = %q, true; want refused", bad, decl)
		}
	}
}
