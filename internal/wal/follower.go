package wal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
)

// TruncationCheckEvery: a follower whose next batch is missing reads the
// manifest on its first miss and then on every TruncationCheckEvery-th
// consecutive miss, to notice that truncation has passed it. An idle
// follower therefore costs one GET per poll plus one manifest GET every
// TruncationCheckEvery polls, and never a List.
const TruncationCheckEvery = 20

// Follower reads the log in order, one GET of the next sequence number's key
// at a time (G8). A hot standby uses it to apply batches as the active
// writes them. It is not safe for concurrent use.
type Follower struct {
	store     blob.Store
	layout    Layout
	next      uint64
	lastEpoch uint64
	misses    int  // consecutive misses since the last batch
	checked   bool // the manifest was read at least once
}

// NewFollower returns a follower whose next batch is nextSeq: the position
// of the local store (OpenLatest's nextSeq after a restore).
func NewFollower(store blob.Store, layout Layout, nextSeq uint64) *Follower {
	return &Follower{store: store, layout: layout, next: nextSeq}
}

// NextSeq returns the sequence number of the batch Next reads next.
func (f *Follower) NextSeq() uint64 { return f.next }

// Epoch returns the epoch of the last batch read (0 before the first).
func (f *Follower) Epoch() uint64 { return f.lastEpoch }

// Next makes one attempt to read the next batch and, if it is there,
// returns it and advances. Errors: ErrNoBatch if the batch is not written
// yet; ErrTruncated if truncation deleted it (checked only now and then, see
// TruncationCheckEvery); a *CorruptError naming the key for a batch that does
// not decode, names another sequence number, or has an epoch below the one
// before it; store errors as classified (a transient one may be retried).
func (f *Follower) Next(ctx context.Context) (Batch, error) {
	b, err := f.get(ctx)
	if !errors.Is(err, ErrNoBatch) {
		return b, err
	}
	f.misses++
	if f.checked && f.misses%TruncationCheckEvery != 0 {
		return Batch{}, err
	}
	if terr := f.CheckTruncated(ctx); terr != nil {
		return Batch{}, terr
	}
	return Batch{}, err
}

func (f *Follower) get(ctx context.Context) (Batch, error) {
	actx, cancel := context.WithTimeout(ctx, DefaultAttemptTimeout)
	defer cancel()
	key := f.layout.LogKey(f.next)
	b, _, err := ReadBatch(actx, f.store, f.layout, f.next)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return Batch{}, ErrNoBatch
	case err != nil:
		return Batch{}, fmt.Errorf("follow batch %d: %w", f.next, err)
	case b.Epoch < f.lastEpoch:
		return Batch{}, corrupt(key, "batch of epoch %d follows a batch of epoch %d", b.Epoch, f.lastEpoch)
	}
	f.next++
	f.lastEpoch = b.Epoch
	f.misses = 0
	return b, nil
}

// CheckTruncated reads the manifest and returns ErrTruncated if the
// follower's next batch was deleted by truncation, nil if it was not (it
// exists, or it is not written yet). Next calls it on its own now and then;
// the node may call it when it suspects the follower is stuck.
func (f *Follower) CheckTruncated(ctx context.Context) error {
	actx, cancel := context.WithTimeout(ctx, DefaultAttemptTimeout)
	defer cancel()
	m, _, found, err := readManifest(actx, f.store, f.layout)
	if err != nil {
		return fmt.Errorf("follow batch %d: %w", f.next, err)
	}
	f.checked = true
	if !found || m.LogStart <= f.next {
		return nil
	}
	// The manifest says batches below LogStart (ours included) were written
	// and may be deleted. Our miss may predate the write, so look again.
	_, _, err = f.store.Get(actx, f.layout.LogKey(f.next))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, blob.ErrNotFound):
		return fmt.Errorf("follow batch %d: %w: the log starts at %d", f.next, ErrTruncated, m.LogStart)
	default:
		return fmt.Errorf("follow batch %d: %w", f.next, err)
	}
}

// Follow reads batches and hands each to apply, in order, until ctx ends, a
// batch cannot be read for a reason other than a transient store error, or
// apply fails. When the next batch is not there yet (or a request fails
// transiently) it waits pollInterval before the next GET. It returns
// ctx.Err() when ctx ends, ErrTruncated when the follower must re-bootstrap
// from a snapshot, a *CorruptError for a corrupt batch, or apply's error.
func (f *Follower) Follow(ctx context.Context, pollInterval time.Duration, apply func(Batch) error) error {
	for {
		b, err := f.Next(ctx)
		switch {
		case err == nil:
			if err := apply(b); err != nil {
				return fmt.Errorf("apply batch %d: %w", b.Seq, err)
			}
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrNoBatch), isTransient(err):
		default:
			return err
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return err
		}
	}
}
