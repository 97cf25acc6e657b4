package wal

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
)

// A value object is written once per distinct content, whatever the
// replies: a write whose reply was lost is retried, finds the object and
// succeeds; a 5xx is retried. Reads check the bytes against the name and
// report a missing or damaged object with its key.
//
// Covers: G5
func TestValues_PutIsIdempotentAndGetChecksTheBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := mem.New()
		layout := MustLayout("p", "n1")
		v := &Values{Store: store, Layout: layout}
		data := bytes.Repeat([]byte("v"), 1<<20)

		faults := 0
		store.SetFaults(func(op, key string) mem.Fault {
			if op != blob.OpPutIfAbsent || faults >= 2 {
				return mem.Fault{}
			}
			faults++
			if faults == 1 {
				return mem.Fault{Err: mem.ErrThrottled} // not written
			}
			return mem.Fault{Err: mem.ErrServer, Lands: true} // written, reply lost
		})
		ref, err := v.Put(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		if ref != ValueRef(data) || len(ref) != 64 {
			t.Fatalf("ref %q", ref)
		}
		if n := store.Count(blob.OpPutIfAbsent); n != 3 {
			t.Fatalf("%d writes, want 3 (throttled, lost reply, found)", n)
		}
		again, err := v.Put(ctx, data)
		if err != nil || again != ref {
			t.Fatalf("second put: %q, %v", again, err)
		}
		got, err := v.Get(ctx, ref)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get: %d bytes, %v", len(got), err)
		}

		key := layout.ValueKey(ref)
		if !strings.HasPrefix(key, "p/nodes/n1/values/") {
			t.Fatalf("key %q", key)
		}
		store.SetRaw(key, []byte("damaged"))
		var ce *CorruptError
		if _, err := v.Get(ctx, ref); !errors.As(err, &ce) || ce.Key != key {
			t.Fatalf("damaged object: %v, want a corrupt object error naming %s", err, key)
		}
		other := ValueRef([]byte("never written"))
		if _, err := v.Get(ctx, other); !errors.As(err, &ce) || ce.Key != layout.ValueKey(other) {
			t.Fatalf("missing object: %v, want a corrupt object error naming its key", err)
		}
		if _, err := v.Get(ctx, "short"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("malformed reference: %v", err)
		}
	})
}
