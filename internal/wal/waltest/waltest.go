// Package waltest checks the log's central promise from the outside: every
// record that a writer acknowledged is readable by whoever restores the
// node later (the newest snapshot plus the log from its nextSeq on), once,
// and in the order it was acknowledged. Tests of the wal package, of the
// node and the simulator share it, so that each checks the same invariant
// the same way.
//
// The snapshot data of a node is its own business; the tests that use
// this package model a node's state as the list of records applied so far
// and store it with EncodeState.
package waltest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/wal"
)

// EncodeState encodes a modelled node state, the records applied so far,
// as snapshot data: each record as a length (u32, big-endian) and its bytes.
func EncodeState(records [][]byte) []byte {
	var buf []byte
	for _, r := range records {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(r)))
		buf = append(buf, r...)
	}
	return buf
}

// DecodeState is the inverse of EncodeState.
func DecodeState(data []byte) ([][]byte, error) {
	var out [][]byte
	for len(data) > 0 {
		if len(data) < 4 {
			return nil, errors.New("waltest: state cut short")
		}
		n := binary.BigEndian.Uint32(data)
		data = data[4:]
		if uint32(len(data)) < n {
			return nil, errors.New("waltest: state record cut short")
		}
		out = append(out, bytes.Clone(data[:n]))
		data = data[n:]
	}
	return out, nil
}

// Readable returns the records a process restoring the node now would
// have: those of the newest snapshot (data as EncodeState made it) and
// then those of every batch from the snapshot's nextSeq on, up to the
// first sequence number that is not found. It also returns the sequence
// number after the last batch it read.
func Readable(ctx context.Context, store blob.Store, layout wal.Layout) (records [][]byte, nextSeq uint64, err error) {
	seq, data, ok, err := LoadLatest(ctx, store, layout)
	if err != nil {
		return nil, 0, err
	}
	if ok {
		if records, err = DecodeState(data); err != nil {
			return nil, 0, fmt.Errorf("snapshot %d: %w", seq, err)
		}
	}
	for ; ; seq++ {
		b, _, err := wal.ReadBatch(ctx, store, layout, seq)
		if errors.Is(err, blob.ErrNotFound) {
			return records, seq, nil
		}
		if err != nil {
			return nil, 0, err
		}
		records = append(records, b.Records...)
	}
}

// CheckAcked returns an error unless every acknowledged record is in
// readable exactly once, and the acknowledged records appear in readable
// in the order given. Readable may hold records that were never
// acknowledged (a write whose reply was lost survives), but no record
// twice.
func CheckAcked(acked, readable [][]byte) error {
	pos := make(map[string]int, len(readable))
	for i, r := range readable {
		if j, dup := pos[string(r)]; dup {
			return fmt.Errorf("record %q is readable twice, at %d and %d", r, j, i)
		}
		pos[string(r)] = i
	}
	last, lastRec := -1, []byte(nil)
	for _, r := range acked {
		i, ok := pos[string(r)]
		if !ok {
			return fmt.Errorf("acknowledged record %q is lost: not in the snapshot nor in the log from its nextSeq on", r)
		}
		if i < last {
			return fmt.Errorf("acknowledged record %q is readable before %q, which was acknowledged before it", r, lastRec)
		}
		last, lastRec = i, r
	}
	return nil
}

// WriteSnapshot stores data as the snapshot of every batch below nextSeq
// and records it in the manifest (wal.WriteSnapshotFrom with the data in
// memory), for tests that model a node's state as bytes.
func WriteSnapshot(ctx context.Context, store blob.Store, layout wal.Layout, nextSeq uint64, data []byte,
	leaseCheck wal.LeaseCheck, keep int) error {
	_, err := wal.WriteSnapshotFrom(ctx, store, layout, nextSeq, bytes.NewReader(data), leaseCheck, keep)
	return err
}

// LoadLatest reads the newest snapshot the manifest keeps whole
// (wal.OpenLatest, read to its end), for tests that model a node's state
// as bytes; ok is false when there is none.
func LoadLatest(ctx context.Context, store blob.Store, layout wal.Layout) (nextSeq uint64, data []byte, ok bool, err error) {
	nextSeq, r, ok, err := wal.OpenLatest(ctx, store, layout)
	if err != nil || !ok {
		return 0, nil, false, err
	}
	if data, err = io.ReadAll(r); err != nil {
		return 0, nil, false, err
	}
	return nextSeq, data, true, nil
}
