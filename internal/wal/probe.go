package wal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/dexzd/dexzd/internal/blob"
)

// ProbeConditionalWrites checks at startup that the store enforces
// conditional writes (G6); fencing (G1-G4) and the lease (L3) depend on it.
// Under a fresh random key below the node's prefix it:
//
//  1. creates the key with PutIfAbsent (must succeed, version v1);
//  2. creates it again with PutIfAbsent (must fail with ErrPrecondition);
//  3. replaces it with PutIfMatch(v1) (must succeed);
//  4. replaces it with PutIfMatch(v1) again, now a stale version (must fail
//     with ErrPrecondition);
//  5. deletes it.
//
// Each step is retried on transient errors. A store that accepts the write
// of step 2 or 4 is refused with an error matching
// ErrConditionalWritesIgnored whose message names the behaviour. Other
// failures are returned wrapped.
func ProbeConditionalWrites(ctx context.Context, store blob.Store, layout Layout) (err error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	key := layout.ProbeKey(hex.EncodeToString(rnd[:]))
	data := func(step int) []byte { return fmt.Appendf(nil, "dexzd conditional write probe, step %d", step) }
	r := newRetrier(LogWriteLimit, DefaultAttemptTimeout, nil)
	wrap := func(step string, err error) error {
		return fmt.Errorf("probe conditional writes with %s: %s: %w", key, step, err)
	}

	v1, err := putResolved(ctx, r, store, key, data(1), "")
	if err != nil {
		return wrap("create", err)
	}
	defer func() {
		derr := r.do(context.WithoutCancel(ctx), func(ctx context.Context) error { return store.Delete(ctx, key) })
		if err == nil && derr != nil {
			err = wrap("delete", derr)
		}
	}()

	err = r.do(ctx, func(ctx context.Context) error {
		_, err := store.PutIfAbsent(ctx, key, data(2))
		return err
	})
	switch {
	case err == nil:
		return fmt.Errorf("%w: a create-if-absent of the existing key %s succeeded", ErrConditionalWritesIgnored, key)
	case !errors.Is(err, blob.ErrPrecondition):
		return wrap("second create", err)
	}

	if _, err := putResolved(ctx, r, store, key, data(3), v1); err != nil {
		return wrap("replace with the current version", err)
	}

	err = r.do(ctx, func(ctx context.Context) error {
		_, err := store.PutIfMatch(ctx, key, data(4), v1)
		return err
	})
	switch {
	case err == nil:
		return fmt.Errorf("%w: a replace-if-unchanged of %s with a stale version succeeded", ErrConditionalWritesIgnored, key)
	case !errors.Is(err, blob.ErrPrecondition):
		return wrap("replace with a stale version", err)
	}
	return nil
}

// putResolved writes data at key (create-if-absent when v is empty,
// replace-if-unchanged otherwise), retrying transient errors; a retry that
// loses because an earlier attempt landed reads the key back and accepts
// its own data.
func putResolved(ctx context.Context, r *retrier, store blob.Store, key string, data []byte, v blob.Version) (blob.Version, error) {
	var nv blob.Version
	err := r.do(ctx, func(ctx context.Context) error {
		var err error
		if v == "" {
			nv, err = store.PutIfAbsent(ctx, key, data)
		} else {
			nv, err = store.PutIfMatch(ctx, key, data, v)
		}
		return err
	})
	if !errors.Is(err, blob.ErrPrecondition) {
		return nv, err
	}
	var got []byte
	err = r.do(ctx, func(ctx context.Context) error {
		var err error
		got, nv, err = store.Get(ctx, key)
		return err
	})
	if err == nil && !bytes.Equal(got, data) {
		err = errors.New("the write failed its precondition and the key holds other data")
	}
	return nv, err
}
