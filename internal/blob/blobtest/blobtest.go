// Package blobtest is the conformance suite every blob.Store backend runs:
// memory, local directory, S3-compatible object storage and PostgreSQL.
package blobtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/dexzd/dexzd/internal/blob"
)

// NewStore returns an empty store for one subtest. Each call must return a
// store that shares no keys with stores returned by other calls (a fresh
// directory, a unique key prefix or schema).
type NewStore func(t *testing.T) blob.Store

// Run runs the whole suite against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s blob.Store)
	}{
		{"GetMissing", testGetMissing},
		{"PutIfAbsentThenGet", testPutIfAbsentThenGet},
		{"PutIfAbsentExisting", testPutIfAbsentExisting},
		{"PutIfMatch", testPutIfMatch},
		{"PutIfMatchMissing", testPutIfMatchMissing},
		{"VersionsDifferAfterRecreate", testRecreate},
		{"EmptyAndLargeValues", testSizes},
		{"List", testList},
		{"ListManyPages", testListPages},
		{"Delete", testDelete},
		{"InvalidKey", testInvalidKey},
		{"RacePutIfAbsent", testRacePutIfAbsent},
		{"RacePutIfMatch", testRacePutIfMatch},
		{"CancelledContext", testCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			tc.fn(t, s)
		})
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

func mustAbsent(t *testing.T, s blob.Store, key string, data []byte) blob.Version {
	t.Helper()
	v, err := s.PutIfAbsent(ctx(t), key, data)
	if err != nil {
		t.Fatalf("PutIfAbsent(%q): %v", key, err)
	}
	if v == "" {
		t.Fatalf("PutIfAbsent(%q) returned an empty version", key)
	}
	return v
}

func mustGet(t *testing.T, s blob.Store, key string) ([]byte, blob.Version) {
	t.Helper()
	data, v, err := s.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return data, v
}

func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: got error %v, want one matching %v", what, err, kind)
	}
	if blob.Classify(err) != kind {
		t.Fatalf("%s: Classify(%v) = %v, want %v", what, err, blob.Classify(err), kind)
	}
}

func testGetMissing(t *testing.T, s blob.Store) {
	_, _, err := s.Get(ctx(t), "a/missing")
	wantKind(t, "Get of a missing key", err, blob.ErrNotFound)
}

func testPutIfAbsentThenGet(t *testing.T, s blob.Store) {
	v := mustAbsent(t, s, "a/b/c", []byte("hello"))
	data, gv := mustGet(t, s, "a/b/c")
	if string(data) != "hello" {
		t.Fatalf("Get = %q, want %q", data, "hello")
	}
	if gv != v {
		t.Fatalf("Get version = %q, PutIfAbsent returned %q", gv, v)
	}
}

func testPutIfAbsentExisting(t *testing.T, s blob.Store) {
	mustAbsent(t, s, "k", []byte("first"))
	_, err := s.PutIfAbsent(ctx(t), "k", []byte("second"))
	wantKind(t, "second PutIfAbsent", err, blob.ErrPrecondition)
	if data, _ := mustGet(t, s, "k"); string(data) != "first" {
		t.Fatalf("after a lost PutIfAbsent the key holds %q, want %q", data, "first")
	}
}

func testPutIfMatch(t *testing.T, s blob.Store) {
	v1 := mustAbsent(t, s, "lease", []byte("one"))
	v2, err := s.PutIfMatch(ctx(t), "lease", []byte("two"), v1)
	if err != nil {
		t.Fatalf("PutIfMatch with the current version: %v", err)
	}
	if v2 == v1 || v2 == "" {
		t.Fatalf("PutIfMatch returned version %q after %q", v2, v1)
	}
	_, err = s.PutIfMatch(ctx(t), "lease", []byte("stale"), v1)
	wantKind(t, "PutIfMatch with a stale version", err, blob.ErrPrecondition)
	data, gv := mustGet(t, s, "lease")
	if string(data) != "two" || gv != v2 {
		t.Fatalf("Get = %q@%q, want %q@%q", data, gv, "two", v2)
	}
	if _, err := s.PutIfMatch(ctx(t), "lease", []byte("three"), v2); err != nil {
		t.Fatalf("PutIfMatch chained: %v", err)
	}
}

func testPutIfMatchMissing(t *testing.T, s blob.Store) {
	_, err := s.PutIfMatch(ctx(t), "nothing-here", []byte("x"), blob.Version("1"))
	wantKind(t, "PutIfMatch on a missing key", err, blob.ErrPrecondition)
	if _, _, err := s.Get(ctx(t), "nothing-here"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("a failed PutIfMatch created the key: %v", err)
	}
}

func testRecreate(t *testing.T, s blob.Store) {
	v1 := mustAbsent(t, s, "r", []byte("one"))
	if err := s.Delete(ctx(t), "r"); err != nil {
		t.Fatal(err)
	}
	mustAbsent(t, s, "r", []byte("two"))
	_, err := s.PutIfMatch(ctx(t), "r", []byte("three"), v1)
	wantKind(t, "PutIfMatch with the version of a deleted incarnation", err, blob.ErrPrecondition)
}

func testSizes(t *testing.T, s blob.Store) {
	mustAbsent(t, s, "empty", nil)
	if data, _ := mustGet(t, s, "empty"); len(data) != 0 {
		t.Fatalf("empty value read back as %d bytes", len(data))
	}
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	mustAbsent(t, s, "big", big)
	if data, _ := mustGet(t, s, "big"); !bytes.Equal(data, big) {
		t.Fatalf("3 MiB value read back as %d different bytes", len(data))
	}
}

func testList(t *testing.T, s blob.Store) {
	keys := []string{"n/a/log/0002", "n/a/log/0001", "n/a/log/0010", "n/a/lease", "n/a-b/x", "n/b/log/0001", "n/a/log/0003/x"}
	for _, k := range keys {
		mustAbsent(t, s, k, []byte(k))
	}
	cases := []struct {
		prefix, after string
		limit         int
		want          []string
	}{
		{"n/a/log/", "", 0, []string{"n/a/log/0001", "n/a/log/0002", "n/a/log/0003/x", "n/a/log/0010"}},
		{"n/a/log/", "n/a/log/0001", 2, []string{"n/a/log/0002", "n/a/log/0003/x"}},
		{"n/a/log/000", "", 0, []string{"n/a/log/0001", "n/a/log/0002", "n/a/log/0003/x"}},
		{"n/a", "", 0, []string{"n/a-b/x", "n/a/lease", "n/a/log/0001", "n/a/log/0002", "n/a/log/0003/x", "n/a/log/0010"}},
		{"n/", "n/a/log/0010", 0, []string{"n/b/log/0001"}},
		{"n/c/", "", 0, nil},
		{"", "", 0, []string{"n/a-b/x", "n/a/lease", "n/a/log/0001", "n/a/log/0002", "n/a/log/0003/x", "n/a/log/0010", "n/b/log/0001"}},
	}
	for _, c := range cases {
		got, err := s.List(ctx(t), c.prefix, c.after, c.limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d): %v", c.prefix, c.after, c.limit, err)
		}
		if !slices.Equal(got, c.want) {
			t.Fatalf("List(%q, %q, %d) = %q, want %q", c.prefix, c.after, c.limit, got, c.want)
		}
	}
}

func testListPages(t *testing.T, s blob.Store) {
	const n = 1203
	var want []string
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		k := fmt.Sprintf("p/log/%08d", i)
		want = append(want, k)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := s.PutIfAbsent(ctx(t), k, []byte("x")); err != nil {
				t.Errorf("PutIfAbsent(%q): %v", k, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	got, err := s.List(ctx(t), "p/log/", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List returned %d keys, want %d in order", len(got), len(want))
	}
	got, err = s.List(ctx(t), "p/log/", want[5], 1100)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want[6:1106]) {
		t.Fatalf("List after %q limit 1100 returned %d keys, want %d", want[5], len(got), 1100)
	}
}

func testDelete(t *testing.T, s blob.Store) {
	mustAbsent(t, s, "d/1", []byte("x"))
	if err := s.Delete(ctx(t), "d/1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, _, err := s.Get(ctx(t), "d/1")
	wantKind(t, "Get after Delete", err, blob.ErrNotFound)
	if err := s.Delete(ctx(t), "d/1"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if got, err := s.List(ctx(t), "d/", "", 0); err != nil || len(got) != 0 {
		t.Fatalf("List after Delete = %q, %v", got, err)
	}
}

func testInvalidKey(t *testing.T, s blob.Store) {
	for _, k := range []string{"", "/abs", "a//b", "a/../b", ".hidden", "a/"} {
		_, err := s.PutIfAbsent(ctx(t), k, []byte("x"))
		wantKind(t, fmt.Sprintf("PutIfAbsent(%q)", k), err, blob.ErrPermanent)
	}
}

func testRacePutIfAbsent(t *testing.T, s blob.Store) {
	const n = 8
	for round := range 5 {
		key := fmt.Sprintf("race/%d", round)
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				_, errs[i] = s.PutIfAbsent(ctx(t), key, fmt.Appendf(nil, "writer %d", i))
			})
		}
		wg.Wait()
		wins := 0
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				wins++
				winner = i
			case errors.Is(err, blob.ErrPrecondition):
			default:
				t.Fatalf("racing PutIfAbsent: %v", err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d writers won PutIfAbsent, want exactly 1", round, wins)
		}
		if data, _ := mustGet(t, s, key); string(data) != fmt.Sprintf("writer %d", winner) {
			t.Fatalf("key holds %q, winner was %d", data, winner)
		}
	}
}

func testRacePutIfMatch(t *testing.T, s blob.Store) {
	const n = 8
	v := mustAbsent(t, s, "lease", []byte("start"))
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, n)
		vers := make([]blob.Version, n)
		for i := range n {
			wg.Go(func() {
				vers[i], errs[i] = s.PutIfMatch(ctx(t), "lease", fmt.Appendf(nil, "round %d writer %d", round, i), v)
			})
		}
		wg.Wait()
		wins := 0
		for i, err := range errs {
			switch {
			case err == nil:
				wins++
				v = vers[i]
			case errors.Is(err, blob.ErrPrecondition):
			default:
				t.Fatalf("racing PutIfMatch: %v", err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d writers won PutIfMatch, want exactly 1", round, wins)
		}
	}
}

func testCancelled(t *testing.T, s blob.Store) {
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	_, err := s.PutIfAbsent(c, "cancelled", []byte("x"))
	if err == nil {
		// Some backends finish a local write before looking at the context;
		// then the write must be visible.
		mustGet(t, s, "cancelled")
		return
	}
	wantKind(t, "PutIfAbsent with a cancelled context", err, blob.ErrTransient)
}
