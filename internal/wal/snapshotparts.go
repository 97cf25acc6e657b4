package wal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/dexzd/dexzd/internal/blob"
)

// A snapshot too large to hold in memory is stored in parts: each part of
// at most SnapshotPartBytes at SnapshotPartKey, written create-if-absent,
// then a small head at SnapshotKey that names the write attempt, the number
// of parts, the total size and the CRC-32C of the whole (format version 2,
// see doc.go). Only a complete head makes the snapshot exist; parts of an
// attempt that never wrote its head are garbage that Truncate removes once
// a newer snapshot is kept.

// SnapshotPartBytes is the size of every part of a snapshot but the last.
const SnapshotPartBytes = 8 << 20

const (
	snapshotPartsVersion = 2
	// magic, version, nextSeq, attempt (8), parts (u32), total (u64), crc
	// of the data (u32), crc of the head (u32)
	snapshotHeadSize = 4 + 1 + 8 + 8 + 4 + 8 + 4 + 4
)

// snapshotHead is a version 2 snapshot object.
type snapshotHead struct {
	nextSeq uint64
	attempt [8]byte
	parts   uint32
	total   uint64
	crc     uint32
}

func (h snapshotHead) attemptID() string { return hex.EncodeToString(h.attempt[:]) }

func (h snapshotHead) encode() []byte {
	buf := make([]byte, 0, snapshotHeadSize)
	buf = append(buf, snapshotMagic...)
	buf = append(buf, snapshotPartsVersion)
	buf = binary.BigEndian.AppendUint64(buf, h.nextSeq)
	buf = append(buf, h.attempt[:]...)
	buf = binary.BigEndian.AppendUint32(buf, h.parts)
	buf = binary.BigEndian.AppendUint64(buf, h.total)
	buf = binary.BigEndian.AppendUint32(buf, h.crc)
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

func decodeSnapshotHead(key string, nextSeq uint64, raw []byte) (snapshotHead, error) {
	var h snapshotHead
	if len(raw) != snapshotHeadSize {
		return h, corrupt(key, "snapshot head is %d bytes, want %d", len(raw), snapshotHeadSize)
	}
	if got, want := crc32.Checksum(raw[:len(raw)-4], castagnoli), binary.BigEndian.Uint32(raw[len(raw)-4:]); got != want {
		return h, corrupt(key, "snapshot head checksum mismatch: stored %08x, computed %08x", want, got)
	}
	b := raw[5:]
	h.nextSeq = binary.BigEndian.Uint64(b)
	copy(h.attempt[:], b[8:16])
	h.parts = binary.BigEndian.Uint32(b[16:])
	h.total = binary.BigEndian.Uint64(b[20:])
	h.crc = binary.BigEndian.Uint32(b[28:])
	if h.nextSeq != nextSeq {
		return h, corrupt(key, "snapshot names sequence number %d, the key is for %d", h.nextSeq, nextSeq)
	}
	if h.total > uint64(h.parts)*SnapshotPartBytes {
		return h, corrupt(key, "snapshot says %d bytes in %d parts", h.total, h.parts)
	}
	return h, nil
}

// snapshotVersionOf returns the format version of a snapshot object, or
// a *CorruptError naming key.
func snapshotVersionOf(key string, raw []byte) (byte, error) {
	if len(raw) < 5 || string(raw[:4]) != snapshotMagic {
		return 0, corrupt(key, "not a snapshot object")
	}
	return raw[4], nil
}

// WriteSnapshotFrom stores the snapshot read from r (every batch below
// nextSeq) in parts of SnapshotPartBytes, so that it is never held in
// memory whole, then its head, then records it in the manifest, which
// keeps the newest keep snapshots (DefaultKeepSnapshots if keep <= 0) and
// raises the log start to the newest kept one; leaseCheck runs before the
// first part and before each manifest write, and if it fails nothing more
// is written. It returns the snapshot's size. If the snapshot
// for nextSeq already exists (an earlier attempt, or the previous holder
// at the same position), r is not read and it is only recorded. Nothing
// is deleted; call Truncate after it.
func WriteSnapshotFrom(ctx context.Context, store blob.Store, layout Layout, nextSeq uint64, r io.Reader,
	leaseCheck LeaseCheck, keep int) (int64, error) {
	if leaseCheck == nil {
		return 0, errors.New("write snapshot: no lease check")
	}
	if err := leaseCheck(ctx); err != nil {
		return 0, fmt.Errorf("write snapshot %d: lease check: %w", nextSeq, err)
	}
	key := layout.SnapshotKey(nextSeq)
	var raw []byte
	rt := newRetrier(SnapshotWriteLimit, DefaultAttemptTimeout, nil)
	switch err := rt.do(ctx, func(ctx context.Context) error {
		var err error
		raw, _, err = store.Get(ctx, key)
		return err
	}); {
	case err == nil:
		if _, err := openSnapshot(ctx, store, layout, key, nextSeq, raw); err != nil {
			return 0, err
		}
		return 0, recordSnapshot(ctx, store, layout, nextSeq, leaseCheck, keep)
	case !errors.Is(err, blob.ErrNotFound):
		return 0, fmt.Errorf("write snapshot %d: %w", nextSeq, err)
	}
	h := snapshotHead{nextSeq: nextSeq}
	if _, err := rand.Read(h.attempt[:]); err != nil {
		return 0, fmt.Errorf("write snapshot %d: %w", nextSeq, err)
	}
	sum := crc32.New(castagnoli)
	// A reader that knows its length (a snapshot already in memory)
	// needs no larger buffer than that: 8 MiB zeroed for every small
	// snapshot is most of the cost of writing it.
	size := SnapshotPartBytes
	if l, ok := r.(interface{ Len() int }); ok && l.Len() < size {
		size = max(l.Len(), 1)
	}
	buf := make([]byte, size)
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			part := buf[:n]
			_, _ = sum.Write(part)
			pkey := layout.SnapshotPartKey(nextSeq, h.attemptID(), int(h.parts))
			prt := newRetrier(SnapshotWriteLimit, SnapshotWriteLimit, nil)
			if err := prt.do(ctx, func(ctx context.Context) error {
				_, err := store.PutIfAbsent(ctx, pkey, part)
				return err
			}); err != nil {
				return 0, fmt.Errorf("write snapshot %d: part %s: %w", nextSeq, pkey, err)
			}
			h.parts++
			h.total += uint64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return 0, fmt.Errorf("write snapshot %d: read: %w", nextSeq, rerr)
		}
	}
	h.crc = sum.Sum32()
	rt = newRetrier(SnapshotWriteLimit, DefaultAttemptTimeout, nil)
	err := rt.do(ctx, func(ctx context.Context) error {
		_, err := store.PutIfAbsent(ctx, key, h.encode())
		if errors.Is(err, blob.ErrPrecondition) {
			// Another attempt's head (or ours, its reply lost) is there:
			// accept it if it is a whole snapshot.
			raw, _, gerr := store.Get(ctx, key)
			if gerr != nil {
				return gerr
			}
			_, err = openSnapshot(ctx, store, layout, key, nextSeq, raw)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("write snapshot %d: head: %w", nextSeq, err)
	}
	return int64(h.total), recordSnapshot(ctx, store, layout, nextSeq, leaseCheck, keep)
}

// OpenLatest opens the newest snapshot the manifest keeps for reading, in
// either format; ok is false when there is none. The reader fetches the
// parts one at a time and reports a *CorruptError naming the snapshot's
// key when a part is missing or the whole does not match the head's size
// and checksum (at the end of the data, so the caller must not trust what
// it read before that error).
//
// ok is false for a new node, or one that never took a snapshot: restore
// then replays the log from its first batch. Otherwise the node loads the
// data into its local store and replays (or follows, or fences) from
// nextSeq: restore = newest snapshot + log tail. There is no silent
// fallback to an older snapshot, because the log below the newest one may
// already be gone.
func OpenLatest(ctx context.Context, store blob.Store, layout Layout) (nextSeq uint64, r io.Reader, ok bool, err error) {
	m, _, found, err := readManifestRetry(ctx, store, layout)
	if err != nil {
		return 0, nil, false, fmt.Errorf("load snapshot: %w", err)
	}
	if !found || len(m.Snapshots) == 0 {
		return 0, nil, false, nil
	}
	nextSeq = m.Snapshots[len(m.Snapshots)-1]
	key := layout.SnapshotKey(nextSeq)
	var raw []byte
	rt := newRetrier(SnapshotWriteLimit, SnapshotWriteLimit, nil)
	err = rt.do(ctx, func(ctx context.Context) error {
		var err error
		raw, _, err = store.Get(ctx, key)
		return err
	})
	if errors.Is(err, blob.ErrNotFound) {
		return 0, nil, false, corrupt(key, "the manifest lists this snapshot but it is missing")
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("load snapshot %d: %w", nextSeq, err)
	}
	r, err = openSnapshot(ctx, store, layout, key, nextSeq, raw)
	if err != nil {
		return 0, nil, false, err
	}
	return nextSeq, r, true, nil
}

// openSnapshot returns a reader of the snapshot whose object at key is
// raw: the data itself for version 1, the parts for version 2 (the head is
// checked now, the parts as they are read).
func openSnapshot(ctx context.Context, store blob.Store, layout Layout, key string, nextSeq uint64, raw []byte) (io.Reader, error) {
	v, err := snapshotVersionOf(key, raw)
	if err != nil {
		return nil, err
	}
	if v != snapshotPartsVersion {
		data, err := DecodeSnapshot(key, nextSeq, raw)
		if err != nil {
			return nil, err
		}
		return bytes.NewReader(data), nil
	}
	h, err := decodeSnapshotHead(key, nextSeq, raw)
	if err != nil {
		return nil, err
	}
	return &partReader{ctx: ctx, store: store, layout: layout, key: key, h: h, sum: crc32.New(castagnoli)}, nil
}

// partReader reads the parts of a version 2 snapshot in order.
type partReader struct {
	ctx    context.Context
	store  blob.Store
	layout Layout
	key    string
	h      snapshotHead
	next   uint32 // the next part to fetch
	cur    []byte // what is left of the current part
	n      uint64 // bytes handed out
	sum    hash.Hash32
	err    error
}

func (p *partReader) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.err != nil {
			return 0, p.err
		}
		if p.next == p.h.parts {
			switch {
			case p.n != p.h.total:
				p.err = corrupt(p.key, "snapshot parts hold %d bytes, the head says %d", p.n, p.h.total)
			case p.sum.Sum32() != p.h.crc:
				p.err = corrupt(p.key, "snapshot checksum mismatch: head %08x, parts %08x", p.h.crc, p.sum.Sum32())
			default:
				p.err = io.EOF
			}
			return 0, p.err
		}
		pkey := p.layout.SnapshotPartKey(p.h.nextSeq, p.h.attemptID(), int(p.next))
		var data []byte
		rt := newRetrier(SnapshotWriteLimit, SnapshotWriteLimit, nil)
		err := rt.do(p.ctx, func(ctx context.Context) error {
			var err error
			data, _, err = p.store.Get(ctx, pkey)
			return err
		})
		switch {
		case errors.Is(err, blob.ErrNotFound):
			p.err = corrupt(p.key, "snapshot part %s is missing", pkey)
		case err != nil:
			p.err = fmt.Errorf("load snapshot %d: part %s: %w", p.h.nextSeq, pkey, err)
		}
		if p.err != nil {
			return 0, p.err
		}
		_, _ = p.sum.Write(data)
		p.cur = data
		p.next++
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	p.n += uint64(n)
	return n, nil
}
