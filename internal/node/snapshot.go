package node

// Snapshots (design: "restore = newest snapshot + log tail"): the active
// process writes a snapshot of its local store every snapshots.everyBatches
// log batches and then truncates the log below the newest snapshot it keeps
// (G7: every manifest write and every deletion only after a lease check).
// A local store that is empty, or behind the start of a truncated log, is
// rebuilt from the newest snapshot (bootstrap) before the replay or the
// follower goes on from the snapshot's position. When one is due, what is
// kept and where the store lives: doc.go, "Snapshots"; the formats:
// package wal.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/localstore"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/wal"
)

// errNoSnapshot: the log was truncated past the local store and the node
// has no snapshot to restore.
var errNoSnapshot = errors.New("the log was truncated past the local store's position and the node has no snapshot")

// errSnapshotWriteEnded ends a checkpoint whose snapshot write stopped
// reading it.
var errSnapshotWriteEnded = errors.New("the snapshot write ended")

// snapshotCheckInterval is how often the active looks whether a snapshot
// is due.
const snapshotCheckInterval = time.Second

// snapshotMinBatches is the fewest batches between two snapshots when the
// log since the last one has grown to half its size (see snapshotDue).
const snapshotMinBatches = 1000

// restorer rebuilds a local store in dir from a snapshot stream.
type restorer func(dir string, r io.Reader) (flowstore.Store, error)

// restorePebble is the restorer of the Pebble local store: it removes
// what is in dir and restores the snapshot there.
func restorePebble(log *slog.Logger) restorer {
	return func(dir string, r io.Reader) (flowstore.Store, error) {
		if err := wipeLocalStore(dir); err != nil {
			return nil, fmt.Errorf("before a restore: %w", err)
		}
		return flowstore.RestoreLocal(dir, r, log)
	}
}

// bootstrapper restores a process's local store from the node's newest
// snapshot.
type bootstrapper struct {
	blobs   blob.Store
	layout  wal.Layout
	dir     string
	restore restorer // nil: the local store cannot be restored
	log     *slog.Logger
}

// bootstrap replaces store with the newest snapshot when there is one.
// With must (the log was truncated past store), having none is
// errNoSnapshot. It returns the store to use: store itself when nothing
// was restored, else the restored one (store is then closed). On an error
// after store was closed it returns nil.
func (b *bootstrapper) bootstrap(ctx context.Context, store flowstore.Store, must bool) (flowstore.Store, error) {
	next, r, ok, err := wal.OpenLatest(ctx, b.blobs, b.layout)
	switch {
	case err != nil:
		return store, fmt.Errorf("bootstrap from a snapshot: %w", err)
	case !ok && must:
		return store, errNoSnapshot
	case !ok:
		return store, nil
	case !must:
		if seq, applied := store.Applied(); applied && seq+1 >= next {
			return store, nil // the store is at least as new as the snapshot
		}
	}
	if b.restore == nil {
		return store, fmt.Errorf("bootstrap from snapshot %d: this local store cannot be restored from a snapshot", next)
	}
	began := time.Now()
	if err := store.Close(); err != nil {
		return nil, fmt.Errorf("bootstrap from snapshot %d: close the local store: %w", next, err)
	}
	counted := &countingReader{r: r}
	restored, err := b.restore(b.dir, counted)
	if err != nil {
		return nil, fmt.Errorf("bootstrap from snapshot %d: %w", next, err)
	}
	if seq, ok := restored.Applied(); !ok || seq+1 != next {
		_ = restored.Close()
		return nil, fmt.Errorf("bootstrap from snapshot %d: the restored store's position is %d (ok %v)", next, seq, ok)
	}
	b.log.Info("local store restored from the newest snapshot", "nextSeq", next, "bytes", counted.n,
		"took", time.Since(began).Round(time.Millisecond))
	return restored, nil
}

// snapshotter is the active's periodic snapshot and truncation.
type snapshotter struct {
	blobs  blob.Store
	layout wal.Layout
	store  flowstore.Store
	holder *lease.Holder
	// every is snapshots.everyBatches, keep snapshots.keep.
	every, keep int
	log         *slog.Logger
	// next returns the writer's next sequence number, written the bytes
	// of the batches it wrote.
	next    func() uint64
	written func() uint64
	metrics *metrics.Metrics
}

// snapshotDue decides whether a snapshot is due after batches log
// batches of logBytes bytes since the last snapshot, which was lastSize
// bytes (0: none in this period yet). A takeover replays the log since
// the newest snapshot, and a snapshot rewrites the whole store, so: after
// every batches at the latest (snapshots.everyBatches, bounding replay),
// and, once at least min(every, snapshotMinBatches) batches were written,
// as soon as the log since the last snapshot holds half as many bytes as
// that snapshot (a small store is snapshotted often and replays little; a
// large one is not rewritten for a short log tail). The first snapshot of
// a period comes after min(every, snapshotMinBatches) batches.
func snapshotDue(every int, batches, logBytes, lastSize uint64) bool {
	if every <= 0 {
		return false
	}
	minBatches := min(uint64(every), snapshotMinBatches)
	switch {
	case batches >= uint64(every):
		return true
	case batches < minBatches:
		return false
	case lastSize == 0:
		return true
	default:
		return logBytes >= lastSize/2
	}
}

// run writes a snapshot whenever one is due (snapshotDue; counting from
// from, the period's first position), until ctx ends or a stop cuts a
// snapshot off (cutOff: logged at Info, not counted as a failure). A failed
// snapshot or truncation is logged and tried again at the next check: the
// log is only kept longer.
func (s *snapshotter) run(ctx context.Context, from uint64) {
	if s.every <= 0 {
		return
	}
	last, lastBytes, lastSize := from, s.written(), uint64(0)
	t := time.NewTicker(snapshotCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next, written := s.next(), s.written()
		if next <= last || !snapshotDue(s.every, next-last, written-lastBytes, lastSize) {
			continue
		}
		seq, size, err := s.once(ctx)
		if err != nil && s.cutOff(ctx, err) {
			// A graceful stop or a step down released the lease (or ended
			// ctx) while the snapshot was due: not a failure, and no later
			// one can succeed in this lease period.
			s.log.Info("snapshot cancelled: the process is stopping", "err", err)
			return
		}
		s.metrics.SnapshotWritten(size, err)
		if err != nil {
			s.log.Warn("snapshot failed; the log is kept until the next one", "err", err)
			continue
		}
		last, lastBytes, lastSize = seq, written, uint64(size)
	}
}

// cutOff reports whether a snapshot that ended with err was cut off by
// the process stopping: ctx ended, or the lease was released on purpose
// and the lease check refused the write for that reason.
func (s *snapshotter) cutOff(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	return errors.Is(err, lease.ErrNotValid) && s.holder != nil && s.holder.Released()
}

// once writes one snapshot and truncates the log below the newest kept
// snapshot; it returns the snapshot's sequence number and size. The
// checkpoint streams into the durable store part by part (never whole in
// memory).
func (s *snapshotter) once(ctx context.Context) (uint64, int, error) {
	began := time.Now()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, ok, err := flowstore.Checkpoint(s.store, pw)
		if err == nil && !ok {
			err = errors.New("this local store cannot write snapshots")
		}
		_ = pw.CloseWithError(err)
		done <- err
	}()
	br := bufio.NewReaderSize(pr, 64<<10)
	var next uint64
	size, err := func() (int64, error) {
		seq, err := localstore.CheckpointSeq(br)
		if err != nil {
			return 0, err
		}
		next = seq + 1
		return wal.WriteSnapshotFrom(ctx, s.blobs, s.layout, next, br, s.holder.Check, s.keep)
	}()
	// Unblock the checkpoint if the write stopped before its end (it
	// found the snapshot already written, or failed).
	_ = pr.CloseWithError(errSnapshotWriteEnded)
	if cerr := <-done; err == nil && cerr != nil && !errors.Is(cerr, errSnapshotWriteEnded) {
		err = fmt.Errorf("checkpoint the local store: %w", cerr)
	}
	if err != nil {
		return 0, 0, err
	}
	deleted, err := wal.Truncate(ctx, s.blobs, s.layout, s.holder.Check)
	if err != nil {
		return next, 0, fmt.Errorf("snapshot %d written; truncate the log: %w", next, err)
	}
	s.log.Info("snapshot written and log truncated", "nextSeq", next, "bytes", size, "deleted", deleted,
		"took", time.Since(began).Round(time.Millisecond))
	return next, int(size), nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}
