package wal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/wal"
)

// ignoreIfMatch is a store that honours If-None-Match but ignores If-Match.
type ignoreIfMatch struct{ *mem.Store }

func (s ignoreIfMatch) PutIfMatch(ctx context.Context, key string, data []byte, _ blob.Version) (blob.Version, error) {
	_, v, err := s.Get(ctx, key)
	if err != nil {
		return "", err
	}
	return s.Store.PutIfMatch(ctx, key, data, v)
}

// Covers: G6
func TestProbe_AcceptsEnforcingStore(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		if err := wal.ProbeConditionalWrites(t.Context(), s, layout); err != nil {
			t.Fatal(err)
		}
		if keys := s.Keys(); len(keys) != 0 {
			t.Fatalf("probe left %v", keys)
		}
		var ops []string
		for _, q := range rec.requests() {
			if !strings.HasPrefix(q.key, layout.NodePrefix()+"probe/") {
				t.Errorf("probe used key %s outside the node's probe prefix", q.key)
			}
			ops = append(ops, q.op)
		}
		want := []string{blob.OpPutIfAbsent, blob.OpPutIfAbsent, blob.OpPutIfMatch, blob.OpPutIfMatch, blob.OpDelete}
		if strings.Join(ops, ",") != strings.Join(want, ",") {
			t.Fatalf("requests %v, want %v", ops, want)
		}
	})
}

// A store that ignores the condition headers is refused with an error that
// says so, and the probe key is still cleaned up.
//
// Covers: G6
func TestProbe_RefusesStoreIgnoringConditions(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		store func() (blob.Store, *mem.Store)
		want  string
	}{
		"ignores both": {func() (blob.Store, *mem.Store) {
			s := mem.New()
			s.SetIgnoreConditions(true)
			return s, s
		}, "a create-if-absent of the existing key"},
		"ignores If-Match": {func() (blob.Store, *mem.Store) {
			s := mem.New()
			return ignoreIfMatch{s}, s
		}, "a replace-if-unchanged of"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				store, s := tc.store()
				err := wal.ProbeConditionalWrites(t.Context(), store, layout)
				if !errors.Is(err, wal.ErrConditionalWritesIgnored) {
					t.Fatalf("got %v, want ErrConditionalWritesIgnored", err)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "the durable store ignores conditional writes (If-None-Match/If-Match): ") ||
					!strings.Contains(msg, tc.want) {
					t.Fatalf("message %q", msg)
				}
				if keys := s.Keys(); len(keys) != 0 {
					t.Fatalf("probe left %v", keys)
				}
			})
		})
	}
}

// Transient errors and lost replies do not fool the probe; a permanent
// error fails it with the store's error.
//
// Covers: G6, G5
func TestProbe_StoreFaults(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		seen := map[string]bool{}
		rec.setFault(func(op, key string) mem.Fault {
			if !seen[op] { // the first request of each kind lands, reply lost
				seen[op] = true
				return mem.Fault{Err: mem.ErrConflict, Lands: true}
			}
			return mem.Fault{}
		})
		if err := wal.ProbeConditionalWrites(t.Context(), s, layout); err != nil {
			t.Fatal(err)
		}
		if keys := s.Keys(); len(keys) != 0 {
			t.Fatalf("probe left %v", keys)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		rec := record(s)
		rec.setFault(func(op, key string) mem.Fault {
			return mem.Fault{Err: blob.Permanent(op, key, mem.ErrDenied)}
		})
		err := wal.ProbeConditionalWrites(t.Context(), s, layout)
		if blob.Classify(err) != blob.ErrPermanent || errors.Is(err, wal.ErrConditionalWritesIgnored) {
			t.Fatalf("got %v", err)
		}
	})
}
