package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
)

// LeaseCheck re-reads the lease and returns nil only if this process still
// holds it with the epoch it acquired. The lease package provides it. Every
// deletion of log batches or snapshots, and every manifest write that
// records a snapshot, happens only after a LeaseCheck that returned nil
// (G7); a standby or a fenced process therefore never deletes. (Fence's
// manifest write, which only adds a fence position at or above logStart,
// needs none: it is conditional, and a stale one keeps a batch, nothing
// more.)
type LeaseCheck func(ctx context.Context) error

// DefaultKeepSnapshots is how many snapshots the manifest keeps when the
// caller passes keep <= 0.
const DefaultKeepSnapshots = 2

// SnapshotWriteLimit bounds the retries of one snapshot or manifest request.
// Snapshots may be large, so each attempt may use all of it.
const SnapshotWriteLimit = 5 * time.Minute

// listPage is the page size of the Lists that truncation makes.
const listPage = 1000

// Snapshot format; see doc.go.
const (
	snapshotMagic      = "DXSN"
	snapshotVersion    = 1
	snapshotHeaderSize = 4 + 1 + 8 + 8 // magic, version, nextSeq, data length
	// manifestVersion is the version written. Version 1 (no fences) is
	// still read.
	manifestVersion = 2
)

// encodeSnapshot returns the stored form of a version 1 snapshot (one
// blob) of the local store that reflects every batch below nextSeq. No
// longer written; tests use it (export_test.go) to check that version 1 is
// still read.
func encodeSnapshot(nextSeq uint64, data []byte) []byte {
	buf := make([]byte, 0, snapshotHeaderSize+len(data)+4)
	buf = append(buf, snapshotMagic...)
	buf = append(buf, snapshotVersion)
	buf = binary.BigEndian.AppendUint64(buf, nextSeq)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(data)))
	buf = append(buf, data...)
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

// DecodeSnapshot parses the snapshot stored at key, which the reader fetched
// as the snapshot for nextSeq. Any defect returns a *CorruptError naming
// key. The returned data aliases raw.
func DecodeSnapshot(key string, nextSeq uint64, raw []byte) ([]byte, error) {
	if len(raw) < snapshotHeaderSize+4 {
		return nil, corrupt(key, "snapshot is %d bytes, shorter than the minimum %d", len(raw), snapshotHeaderSize+4)
	}
	if string(raw[:4]) != snapshotMagic {
		return nil, corrupt(key, "bad snapshot magic %q", raw[:4])
	}
	if raw[4] != snapshotVersion {
		return nil, corrupt(key, "unknown snapshot format version %d", raw[4])
	}
	seq := binary.BigEndian.Uint64(raw[5:])
	n := binary.BigEndian.Uint64(raw[13:])
	if have := uint64(len(raw) - snapshotHeaderSize - 4); n != have {
		return nil, corrupt(key, "snapshot says %d bytes of data, %d are stored", n, have)
	}
	want := binary.BigEndian.Uint32(raw[len(raw)-4:])
	if got := crc32.Checksum(raw[:len(raw)-4], castagnoli); got != want {
		return nil, corrupt(key, "checksum mismatch: stored %08x, computed %08x", want, got)
	}
	if seq != nextSeq {
		return nil, corrupt(key, "snapshot names sequence number %d, the key is for %d", seq, nextSeq)
	}
	return raw[snapshotHeaderSize : len(raw)-4 : len(raw)-4], nil
}

// manifest is the JSON object at Layout.ManifestKey.
type manifest struct {
	Version int `json:"version"`
	// LogStart: batches below it are covered by the newest snapshot and may
	// have been deleted. It never decreases.
	LogStart uint64 `json:"logStart"`
	// Snapshots lists the kept snapshots by their nextSeq, ascending.
	Snapshots []uint64 `json:"snapshots"`
	// Fences lists, ascending, every sequence number at which a new lease
	// holder was about to write its fence batch (recorded before the
	// write, so it may also name a position an old writer's batch took
	// first). Truncation never deletes these batches: each one is what
	// stops the writer of an older epoch whose next sequence number it is,
	// however long that writer was frozen (G4, L4).
	Fences []uint64 `json:"fences,omitempty"`
}

func decodeManifest(key string, data []byte) (manifest, error) {
	var m manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return manifest{}, corrupt(key, "undecodable manifest: %v", err)
	}
	if dec.More() {
		return manifest{}, corrupt(key, "trailing data after the manifest")
	}
	if m.Version != 1 && m.Version != manifestVersion {
		return manifest{}, corrupt(key, "unknown manifest version %d", m.Version)
	}
	if m.Version == 1 && len(m.Fences) > 0 {
		return manifest{}, corrupt(key, "a version 1 manifest lists fences")
	}
	for i := 1; i < len(m.Fences); i++ {
		if m.Fences[i] <= m.Fences[i-1] {
			return manifest{}, corrupt(key, "fences are not in ascending order")
		}
	}
	for i := 1; i < len(m.Snapshots); i++ {
		if m.Snapshots[i] <= m.Snapshots[i-1] {
			return manifest{}, corrupt(key, "snapshots are not in ascending order")
		}
	}
	if n := len(m.Snapshots); (n == 0 && m.LogStart != 0) || (n > 0 && m.LogStart > m.Snapshots[n-1]) {
		return manifest{}, corrupt(key, "log start %d is past the newest snapshot", m.LogStart)
	}
	return m, nil
}

func (m manifest) encode() []byte {
	data, err := json.Marshal(m)
	if err != nil {
		panic(err) // a struct of integers always marshals
	}
	return data
}

// with returns the manifest that adds the snapshot for nextSeq and keeps the
// newest keep snapshots.
func (m manifest) with(nextSeq uint64, keep int) manifest {
	snaps := slices.Clone(m.Snapshots)
	if !slices.Contains(snaps, nextSeq) {
		snaps = append(snaps, nextSeq)
		slices.Sort(snaps)
	}
	if len(snaps) > keep {
		snaps = snaps[len(snaps)-keep:]
	}
	return manifest{Version: manifestVersion, LogStart: max(m.LogStart, snaps[len(snaps)-1]), Snapshots: snaps, Fences: m.Fences}
}

// withFence returns the manifest that also keeps the batch at seq.
func (m manifest) withFence(seq uint64) manifest {
	fences := slices.Clone(m.Fences)
	if i, found := slices.BinarySearch(fences, seq); !found {
		fences = slices.Insert(fences, i, seq)
	}
	snaps := m.Snapshots
	if snaps == nil {
		snaps = []uint64{}
	}
	return manifest{Version: manifestVersion, LogStart: m.LogStart, Snapshots: snaps, Fences: fences}
}

// isFence reports whether the manifest keeps the batch at seq forever.
func (m manifest) isFence(seq uint64) bool {
	_, found := slices.BinarySearch(m.Fences, seq)
	return found
}

// readManifest makes one attempt to read the manifest. found is false if
// there is none.
func readManifest(ctx context.Context, store blob.Store, layout Layout) (m manifest, v blob.Version, found bool, err error) {
	key := layout.ManifestKey()
	data, v, err := store.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return manifest{}, "", false, nil
	}
	if err != nil {
		return manifest{}, "", false, err
	}
	m, err = decodeManifest(key, data)
	return m, v, err == nil, err
}

func readManifestRetry(ctx context.Context, store blob.Store, layout Layout) (m manifest, v blob.Version, found bool, err error) {
	r := newRetrier(SnapshotWriteLimit, DefaultAttemptTimeout, nil)
	err = r.do(ctx, func(ctx context.Context) error {
		var err error
		m, v, found, err = readManifest(ctx, store, layout)
		return err
	})
	if err != nil {
		return manifest{}, "", false, fmt.Errorf("read manifest: %w", err)
	}
	return m, v, found, nil
}

// recordSnapshot records the snapshot for nextSeq in the manifest, which
// keeps the newest keep and raises the log start to the newest kept one;
// leaseCheck runs before each manifest write.
func recordSnapshot(ctx context.Context, store blob.Store, layout Layout, nextSeq uint64, leaseCheck LeaseCheck, keep int) error {
	if keep <= 0 {
		keep = DefaultKeepSnapshots
	}
	for attempt := 0; ; attempt++ {
		m, v, found, err := readManifestRetry(ctx, store, layout)
		if err != nil {
			return fmt.Errorf("write snapshot %d: %w", nextSeq, err)
		}
		next := m.with(nextSeq, keep)
		if found && bytes.Equal(next.encode(), m.encode()) {
			return nil // already recorded (or older than every kept snapshot)
		}
		if attempt >= 10 {
			return fmt.Errorf("write snapshot %d: the manifest keeps changing under us", nextSeq)
		}
		if err := leaseCheck(ctx); err != nil {
			return fmt.Errorf("write snapshot %d: lease check: %w", nextSeq, err)
		}
		r := newRetrier(SnapshotWriteLimit, DefaultAttemptTimeout, nil)
		err = r.do(ctx, func(ctx context.Context) error {
			var err error
			if found {
				_, err = store.PutIfMatch(ctx, layout.ManifestKey(), next.encode(), v)
			} else {
				_, err = store.PutIfAbsent(ctx, layout.ManifestKey(), next.encode())
			}
			return err
		})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, blob.ErrPrecondition):
			continue // changed since we read it, or our lost reply landed: re-read
		default:
			return fmt.Errorf("write snapshot %d: write manifest: %w", nextSeq, err)
		}
	}
}

// Truncate deletes the log batches below the manifest's log start (the
// newest kept snapshot), except the fence positions the manifest lists
// (they stay forever, see Fence), and the snapshots that the manifest no longer keeps
// and that are older than its newest one. Each single Delete happens only
// after leaseCheck returned nil; when it fails Truncate stops at once and
// returns its error with the number deleted so far (G7). Keys under the log
// and snapshot prefixes that are not this layout's are left alone.
func Truncate(ctx context.Context, store blob.Store, layout Layout, leaseCheck LeaseCheck) (deleted int, err error) {
	if leaseCheck == nil {
		return 0, errors.New("truncate: no lease check")
	}
	m, _, found, err := readManifestRetry(ctx, store, layout)
	if err != nil {
		return 0, fmt.Errorf("truncate: %w", err)
	}
	if !found || len(m.Snapshots) == 0 {
		return 0, nil
	}
	newest := m.Snapshots[len(m.Snapshots)-1]
	sweeps := []struct {
		prefix string
		parse  func(string) (uint64, bool)
		below  uint64            // delete only sequence numbers below this
		keep   func(uint64) bool // and not these
	}{
		{layout.LogPrefix(), layout.ParseLogKey, m.LogStart, m.isFence},
		{layout.SnapshotPrefix(), func(key string) (uint64, bool) {
			if seq, ok := layout.ParseSnapshotKey(key); ok {
				return seq, true
			}
			return layout.ParseSnapshotPartKey(key)
		}, newest, func(seq uint64) bool {
			return slices.Contains(m.Snapshots, seq)
		}},
	}
	for _, sw := range sweeps {
		n, err := sweep(ctx, store, sw.prefix, sw.parse, sw.below, sw.keep, leaseCheck)
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("truncate: %w", err)
		}
	}
	return deleted, nil
}

// sweep deletes, in key order, the keys under prefix whose sequence number
// is below `below` and not kept. Keys sort numerically, so it stops at the
// first sequence number that is not below.
func sweep(ctx context.Context, store blob.Store, prefix string, parse func(string) (uint64, bool), below uint64, keep func(uint64) bool, leaseCheck LeaseCheck) (int, error) {
	deleted := 0
	startAfter := ""
	for {
		var keys []string
		r := newRetrier(SnapshotWriteLimit, DefaultAttemptTimeout, nil)
		err := r.do(ctx, func(ctx context.Context) error {
			var err error
			keys, err = store.List(ctx, prefix, startAfter, listPage)
			return err
		})
		if err != nil {
			return deleted, fmt.Errorf("list %s: %w", prefix, err)
		}
		for _, key := range keys {
			seq, ok := parse(key)
			if !ok || keep(seq) {
				continue
			}
			if seq >= below {
				return deleted, nil
			}
			if err := leaseCheck(ctx); err != nil {
				return deleted, fmt.Errorf("lease check before deleting %s: %w", key, err)
			}
			r := newRetrier(SnapshotWriteLimit, DefaultAttemptTimeout, nil)
			if err := r.do(ctx, func(ctx context.Context) error { return store.Delete(ctx, key) }); err != nil {
				return deleted, fmt.Errorf("delete %s: %w", key, err)
			}
			deleted++
		}
		if len(keys) < listPage {
			return deleted, nil
		}
		startAfter = keys[len(keys)-1]
	}
}
