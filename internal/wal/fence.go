package wal

import (
	"context"
	"errors"
	"fmt"

	"github.com/dexzd/dexzd/internal/blob"
)

// Fence makes epoch the writer of the log (G2, T1). The caller holds the
// lease with this epoch and has applied every batch below fromSeq to its
// local store.
//
// Fence reads the batches from fromSeq on, one GET per sequence number
// (ReplayReadAhead of them in flight), and
// hands each to apply in order: batches that older epochs wrote before the
// fence are kept and applied, so no acknowledged write is lost. At the first
// sequence number that is not found it writes a fence batch (KindFence,
// stamped with epoch) create-if-absent. If that write loses because an old
// writer's batch landed there just now, Fence reads and applies that batch
// and tries the next sequence number. The new fence batch is handed to apply
// too, so that apply sees exactly the batches a follower would.
//
// It returns the sequence number the writer uses next (one past the fence).
// On success apply has seen every batch in [fromSeq, nextSeq).
//
// The batch below fromSeq must be in the log, or below the manifest's log
// start (covered by a snapshot): a local store that applied a batch the log
// lost is ErrLocalAhead, never fenced after, since that would leave a gap
// that readers take for the log's end.
//
// Errors: ErrFenced if a batch of a higher epoch is found; ErrTruncated if
// the batch at the reader's position was deleted by truncation (restore from
// the newest snapshot first); *CorruptError for an undecodable batch or
// epochs that go backwards; ErrLogConflict for a records batch of this epoch
// that this epoch did not fence for; ErrLogWriteTimeout if the fence write is
// not accepted within LogWriteLimit. Transient errors of each request are
// retried with backoff within LogWriteLimit.
//
// Calling Fence again with the same epoch (after an error, or a lost reply)
// is safe: it finds its own fence and the batches after it and writes no
// second fence.
func Fence(ctx context.Context, store blob.Store, layout Layout, epoch, fromSeq uint64, apply func(Batch) error) (uint64, error) {
	if fromSeq > 0 {
		if err := checkApplied(ctx, store, layout, fromSeq-1); err != nil {
			return 0, err
		}
	}
	var lastEpoch uint64
	ownFence := false
	reads := newPrefetcher(ctx, store, layout, ReplayReadAhead)
	defer reads.close()
	for seq := fromSeq; ; {
		key := layout.LogKey(seq)
		b, err := reads.get(seq)
		switch {
		case err == nil:
			switch {
			case b.Epoch < lastEpoch:
				return 0, corrupt(key, "batch of epoch %d follows a batch of epoch %d", b.Epoch, lastEpoch)
			case b.Epoch > epoch:
				return 0, fmt.Errorf("fence at %d: %w: %s holds epoch %d, ours is %d", seq, ErrFenced, key, b.Epoch, epoch)
			case b.Epoch == epoch && b.Kind == KindFence:
				ownFence = true // an earlier attempt of ours landed (G5)
			case b.Epoch == epoch && !ownFence:
				return 0, fmt.Errorf("fence at %d: %w: %s holds a %s batch of our epoch %d before our fence", seq, ErrLogConflict, key, b.Kind, epoch)
			}
			if err := apply(b); err != nil {
				return 0, fmt.Errorf("apply batch %d: %w", seq, err)
			}
			lastEpoch = b.Epoch
			seq++
			continue
		case errors.Is(err, blob.ErrNotFound):
		default:
			return 0, fmt.Errorf("fence: read batch %d: %w", seq, err)
		}
		if ownFence {
			return seq, nil
		}
		// seq was not found. Unless truncation deleted it, it is the head.
		// Truncation raises the manifest's log start before it deletes, so
		// reading the manifest after the miss tells the two apart. The same
		// read-modify-write records seq as a fence position that truncation
		// keeps forever.
		if err := keepFence(ctx, store, layout, seq); err != nil {
			return 0, fmt.Errorf("fence at %d: %w", seq, err)
		}
		fence := Batch{Seq: seq, Epoch: epoch, Kind: KindFence}
		r := newRetrier(LogWriteLimit, DefaultAttemptTimeout, nil)
		err = r.do(ctx, func(ctx context.Context) error {
			_, err := store.PutIfAbsent(ctx, key, Encode(fence))
			return err
		})
		switch {
		case err == nil:
			if err := apply(fence); err != nil {
				return 0, fmt.Errorf("apply fence %d: %w", seq, err)
			}
			return seq + 1, nil
		case errors.Is(err, blob.ErrPrecondition):
			// Someone wrote seq first: an old writer's batch, a higher
			// epoch's fence, or our own fence whose reply was lost. The next
			// round reads it and decides.
			continue
		case isDeadline(err):
			return 0, fmt.Errorf("fence at %d: %w: %w", seq, ErrLogWriteTimeout, err)
		default:
			return 0, fmt.Errorf("fence at %d: write %s: %w", seq, key, err)
		}
	}
}

// checkApplied returns ErrLocalAhead when batch seq, which the caller's
// local store applied, is neither in the log nor below its log start.
func checkApplied(ctx context.Context, store blob.Store, layout Layout, seq uint64) error {
	_, err := readBatchRetry(ctx, store, layout, seq)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, blob.ErrNotFound):
		return fmt.Errorf("fence: read the last applied batch %d: %w", seq, err)
	}
	var m manifest
	var found bool
	r := newRetrier(LogWriteLimit, DefaultAttemptTimeout, nil)
	err = r.do(ctx, func(ctx context.Context) error {
		var err error
		m, _, found, err = readManifest(ctx, store, layout)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("fence: read manifest: %w", err)
	case found && seq < m.LogStart:
		return nil // covered by a snapshot, and may be deleted
	}
	return fmt.Errorf("%w: it applied batch %d, which %s does not hold (a host crash lost the log's tail?)",
		ErrLocalAhead, seq, layout.LogKey(seq))
}

// readBatchRetry reads batch seq, retrying transient errors within
// LogWriteLimit.
func readBatchRetry(ctx context.Context, store blob.Store, layout Layout, seq uint64) (Batch, error) {
	var b Batch
	r := newRetrier(LogWriteLimit, DefaultAttemptTimeout, nil)
	err := r.do(ctx, func(ctx context.Context) error {
		var err error
		b, _, err = ReadBatch(ctx, store, layout, seq)
		return err
	})
	return b, err
}

// keepFence records seq in the manifest as a fence position that
// truncation must never delete, before the fence batch is written there. It
// returns ErrTruncated if the manifest says batches below a sequence
// number above seq may have been deleted: seq was not found because
// truncation removed it, not because it is the head.
//
// Why before: the fence at seq is the only thing that stops the writer of
// the epoch before ours, whose next batch is exactly seq, and that writer
// may have been frozen for any length of time. Were the fence deleted with
// the batches below a later snapshot, its PutIfAbsent would succeed below
// the log start and it would acknowledge a batch that no reader ever sees.
// Recorded first, the fence is kept even if we crash right after writing
// it; a position recorded for a write that then lost (an old writer's
// batch landed there) only keeps that batch, which is harmless.
//
// The manifest is written conditionally, so this cannot undo a concurrent
// snapshot's update; a conflict re-reads it and tries again.
func keepFence(ctx context.Context, store blob.Store, layout Layout, seq uint64) error {
	for attempt := 0; ; attempt++ {
		var m manifest
		var v blob.Version
		var found bool
		r := newRetrier(LogWriteLimit, DefaultAttemptTimeout, nil)
		err := r.do(ctx, func(ctx context.Context) error {
			var err error
			m, v, found, err = readManifest(ctx, store, layout)
			return err
		})
		if err != nil {
			return fmt.Errorf("read manifest: %w", err)
		}
		if found && m.LogStart > seq {
			return fmt.Errorf("%w: batch %d is gone, the log starts at %d", ErrTruncated, seq, m.LogStart)
		}
		if found && m.isFence(seq) {
			return nil
		}
		if attempt >= 10 {
			return fmt.Errorf("record fence position %d: the manifest keeps changing under us", seq)
		}
		next := m.withFence(seq).encode()
		r = newRetrier(LogWriteLimit, DefaultAttemptTimeout, nil)
		err = r.do(ctx, func(ctx context.Context) error {
			var err error
			if found {
				_, err = store.PutIfMatch(ctx, layout.ManifestKey(), next, v)
			} else {
				_, err = store.PutIfAbsent(ctx, layout.ManifestKey(), next)
			}
			return err
		})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, blob.ErrPrecondition):
			continue // changed since we read it, or our lost reply landed: re-read
		case isDeadline(err):
			return fmt.Errorf("record fence position %d: %w: %w", seq, ErrLogWriteTimeout, err)
		default:
			return fmt.Errorf("record fence position %d: write manifest: %w", seq, err)
		}
	}
}
