package wal

import (
	"bytes"
	"context"
	"testing"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
)

// With a cache, a large value's later trips cost no store request: the
// first Put writes the object, a Put of the same bytes (a result echoing
// its task's input) and every Get (a task, a read of the result) are
// answered from memory. Bytes that are not in the cache still go to the
// store, and a Get of an object the cache does not hold still checks it.
//
// Covers: G5
func TestValueCache_AnswersRepeatedPutsAndGetsWithoutTheStore(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	v := &Values{Store: store, Layout: MustLayout("p", "n1"), Cache: NewValueCache(8 << 20)}
	data := bytes.Repeat([]byte("a"), 1<<20)

	ref, err := v.Put(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	echo := bytes.Clone(data) // a worker's result: equal bytes, another slice
	for range 3 {
		again, err := v.Put(ctx, echo)
		if err != nil || again != ref {
			t.Fatalf("put of equal bytes: %q, %v; want %q", again, err, ref)
		}
		got, err := v.Get(ctx, ref)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get: %d bytes, %v", len(got), err)
		}
	}
	if n := store.Count(blob.OpPutIfAbsent); n != 1 {
		t.Fatalf("%d object writes, want 1", n)
	}
	if n := store.Count(blob.OpGet); n != 0 {
		t.Fatalf("%d object reads, want 0", n)
	}
	if s := v.Cache.Stats(); s.Hits != 6 {
		t.Fatalf("stats %+v, want 6 hits", s)
	}

	other := bytes.Repeat([]byte("b"), 1<<20)
	oref, err := v.Put(ctx, other)
	if err != nil || oref == ref || oref != ValueRef(other) {
		t.Fatalf("put of other bytes: %q, %v", oref, err)
	}
	if n := store.Count(blob.OpPutIfAbsent); n != 2 {
		t.Fatalf("%d object writes, want 2", n)
	}

	// Another process's cache (a takeover) reads the objects once each.
	w := &Values{Store: store, Layout: v.Layout, Cache: NewValueCache(8 << 20)}
	for range 2 {
		if got, err := w.Get(ctx, oref); err != nil || !bytes.Equal(got, other) {
			t.Fatalf("get on the successor: %d bytes, %v", len(got), err)
		}
	}
	if n := store.Count(blob.OpGet); n != 1 {
		t.Fatalf("%d object reads on the successor, want 1", n)
	}
}

// A fingerprint shared by two different values must never name the wrong
// object: Put compares the bytes themselves and, on a mismatch, hashes and
// writes as without a cache.
func TestValueCache_AFingerprintCollisionIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	c := NewValueCache(8 << 20)
	v := &Values{Store: store, Layout: MustLayout("p", "n1"), Cache: c}
	x := bytes.Repeat([]byte("x"), 1000)
	y := bytes.Repeat([]byte("y"), 1000)
	xref, err := v.Put(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	// Make y's fingerprint find x's entry, as a collision would.
	c.mu.Lock()
	c.byPrint[c.print(y)] = c.byRef[xref]
	c.mu.Unlock()

	yref, err := v.Put(ctx, y)
	if err != nil {
		t.Fatal(err)
	}
	if yref != ValueRef(y) {
		t.Fatalf("put of y named %q, want its own hash %q (x is %q)", yref, ValueRef(y), xref)
	}
	got, _, err := store.Get(ctx, v.Layout.ValueKey(yref))
	if err != nil || !bytes.Equal(got, y) {
		t.Fatalf("y's object: %d bytes, %v", len(got), err)
	}
}

// The cache holds at most its budget: the least recently used values go
// first, and a value larger than the whole budget is never kept.
func TestValueCache_KeepsItsBudget(t *testing.T) {
	c := NewValueCache(3000)
	val := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }
	c.add("a", val('a', 1000))
	c.add("b", val('b', 1000))
	c.add("c", val('c', 1000))
	if _, ok := c.get("a"); !ok { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.add("d", val('d', 1000)) // evicts b
	if _, ok := c.get("b"); ok {
		t.Fatal("b kept past the budget")
	}
	for _, ref := range []string{"a", "c", "d"} {
		if _, ok := c.get(ref); !ok {
			t.Fatalf("%s evicted, want b evicted", ref)
		}
	}
	if _, ok := c.lookup(val('b', 1000)); ok {
		t.Fatal("b's bytes still found by fingerprint")
	}
	c.add("e", val('e', 3001))
	if _, ok := c.get("e"); ok {
		t.Fatal("a value above the whole budget was kept")
	}
	if c.used != 3000 || c.lru.Len() != 3 || len(c.byRef) != 3 || len(c.byPrint) != 3 {
		t.Fatalf("used %d, %d entries, %d refs, %d prints; want 3000, 3, 3, 3", c.used, c.lru.Len(), len(c.byRef), len(c.byPrint))
	}
	var none *ValueCache // no cache
	none.add("a", val('a', 1))
	if _, ok := none.get("a"); ok {
		t.Fatal("a nil cache kept a value")
	}
	if NewValueCache(0) != nil {
		t.Fatal("a zero budget made a cache")
	}
}

// Large values that differ only between the fingerprint's samples share a
// fingerprint; each Put still names its own bytes, and each is found again
// by its bytes while it is the latest of its fingerprint.
func TestValueCache_ValuesThatDifferBetweenSamplesKeepTheirOwnObjects(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	c := NewValueCache(32 << 20)
	v := &Values{Store: store, Layout: MustLayout("p", "n1"), Cache: c}
	x := bytes.Repeat([]byte("x"), 4<<20)
	y := bytes.Clone(x)
	y[len(y)/2+printSample/2+1] = 'y' // between two samples: the fingerprint does not see it
	if c.print(x) != c.print(y) {
		t.Fatal("the difference is sampled; move it between two samples")
	}
	refs := map[string]bool{}
	for _, d := range [][]byte{x, y, y, x} {
		ref, err := v.Put(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if ref != ValueRef(d) {
			t.Fatalf("put named %q, want the bytes' own hash %q", ref, ValueRef(d))
		}
		refs[ref] = true
	}
	if len(refs) != 2 {
		t.Fatalf("%d objects, want 2", len(refs))
	}
	for ref := range refs {
		got, _, err := store.Get(ctx, v.Layout.ValueKey(ref))
		if err != nil || ValueRef(got) != ref {
			t.Fatalf("object %s: %d bytes, %v", ref, len(got), err)
		}
	}
	if n := store.Count(blob.OpPutIfAbsent); n != 3 {
		t.Fatalf("%d object writes, want 3: x, y (its fingerprint found x), x again (its fingerprint now finds y)", n)
	}
}

// The fingerprint of a value the size of a large input: it is on every
// Put of a value object (twice on a miss).
func BenchmarkValueCache_Print4MiB(b *testing.B) {
	c := NewValueCache(32 << 20)
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		c.print(data)
	}
}
