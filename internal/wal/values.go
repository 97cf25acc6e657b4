package wal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
)

// Value objects keep large values out of the log: the serving core writes
// such a value's bytes as an object of its own, beside the log, before it
// submits the record that refers to it, and the record carries only the
// reference. So the log, the sequencer, the writer and the local store
// handle some hundred bytes instead of megabytes, and one large value no
// longer holds up every other flow's batch (issue 11).
//
// An object is named by the SHA-256 of its bytes (the reference, 64 hex
// digits) under values/ of the node's layout and written create-if-absent:
// writing the same bytes twice, a retry after a lost reply included, finds
// the object there and is done, and an object never changes. A read checks
// the bytes against their name, so a damaged object is reported with its
// key (ErrCorrupt), never handed on.
//
// Objects outlive the log's truncation and snapshots, which refer to them:
// nothing deletes one yet, so they are kept as long as the node's prefix
// (runs, and their histories, are never deleted either). An object whose
// record never became durable (its command was refused, or the process
// died first) is kept too; issue 11's note tracks collecting them.

// ValuePrefix is the prefix of every value object's key, ending in '/'.
func (l Layout) ValuePrefix() string { return l.node + "values/" }

// ValueKey is the key of the value object named ref.
func (l Layout) ValueKey(ref string) string { return l.ValuePrefix() + ref }

// ValueWriteLimit bounds how long Values.Put retries a store that fails
// transiently, as LogWriteLimit bounds a batch: past it Put fails with
// ErrValueWriteTimeout, and the serving core stops as the writer does (a
// store that takes no write for that long takes no log batch either).
const ValueWriteLimit = LogWriteLimit

// Values reads and writes the value objects of one node.
type Values struct {
	Store  blob.Store
	Layout Layout
	// AttemptTimeout cuts off one request (stretched for objects above
	// DefaultMaxBatchBytes); zero means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// Cache, when set, keeps the bytes of the objects written and read
	// last (ValueCache), which Put and Get then answer from.
	Cache *ValueCache
}

// ValueRef returns the reference (the object's name) of data.
func ValueRef(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Put writes data as a value object unless it exists and returns its
// reference. It returns once the object is durable in the store.
func (v *Values) Put(ctx context.Context, data []byte) (string, error) {
	if ref, ok := v.Cache.lookup(data); ok {
		return ref, nil // written or read before: durable
	}
	ref := ValueRef(data)
	key := v.Layout.ValueKey(ref)
	r := newRetrier(ValueWriteLimit, v.attemptTimeout(len(data)), nil)
	err := r.do(ctx, func(ctx context.Context) error {
		_, err := v.Store.PutIfAbsent(ctx, key, data)
		if errors.Is(err, blob.ErrPrecondition) {
			return nil // the same bytes are there: written before, or by our lost reply
		}
		return err
	})
	if isDeadline(err) {
		return "", fmt.Errorf("write value object %q (%d bytes): %w: %v: %w", key, len(data), ErrValueWriteTimeout, ValueWriteLimit, err)
	}
	if err != nil {
		return "", fmt.Errorf("write value object %q (%d bytes): %w", key, len(data), err)
	}
	v.Cache.add(ref, data)
	return ref, nil
}

// Get reads the value object named ref and checks it against its name.
func (v *Values) Get(ctx context.Context, ref string) ([]byte, error) {
	key := v.Layout.ValueKey(ref)
	if len(ref) != 2*sha256.Size {
		return nil, corrupt(key, "a value reference of %d characters, not %d", len(ref), 2*sha256.Size)
	}
	if data, ok := v.Cache.get(ref); ok {
		return data, nil
	}
	var data []byte
	r := newRetrier(ValueWriteLimit, v.attemptTimeout(0), nil)
	err := r.do(ctx, func(ctx context.Context) error {
		var err error
		data, _, err = v.Store.Get(ctx, key)
		return err
	})
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return nil, corrupt(key, "the value object a record refers to is missing")
	case err != nil:
		return nil, fmt.Errorf("read value object %q: %w", key, err)
	case ValueRef(data) != ref:
		return nil, corrupt(key, "its %d bytes do not hash to its name", len(data))
	}
	v.Cache.add(ref, data)
	return data, nil
}

// attemptTimeout is the cut-off of one request of n bytes: the writer's
// rule (the assumed minimum upload rate is DefaultMaxBatchBytes per
// DefaultAttemptTimeout), so a value, at most one payload, takes the
// default unless the payload limit was raised past the batch cap.
func (v *Values) attemptTimeout(n int) time.Duration {
	d := v.AttemptTimeout
	if d <= 0 {
		d = DefaultAttemptTimeout
	}
	if n > DefaultMaxBatchBytes {
		d = time.Duration(float64(d) * float64(n) / float64(DefaultMaxBatchBytes))
	}
	return min(d, ValueWriteLimit)
}
