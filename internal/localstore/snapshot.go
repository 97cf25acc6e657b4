package localstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
)

// Snapshot stream, version 1 (see doc.go for the layout).
var snapshotMagic = [4]byte{'D', 'X', 'L', 'S'}

const (
	snapshotVersion byte = 1
	// Limits that keep a corrupt length from allocating without bound.
	maxSnapshotKey   = 1 << 20
	maxSnapshotValue = 1 << 30
	// restoreBatchBytes is how much Restore writes per Pebble batch.
	restoreBatchBytes = 4 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checkpoint writes a consistent snapshot of the whole store to w and
// returns the applied sequence number it reflects: it covers the batches up
// to seq, and a restore continues with batch seq+1 (the wal package's
// snapshot number is seq+1). Apply may run concurrently; the snapshot is of
// one instant. A store that has applied nothing is ErrNothingApplied and
// nothing is written.
func (s *Store) Checkpoint(w io.Writer) (seq uint64, err error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	seq, ok, err := readApplied(snap)
	if err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	if !ok {
		return 0, fmt.Errorf("checkpoint: %w", ErrNothingApplied)
	}
	// Every key but the metadata, which the header carries.
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixMeta + 1}})
	if err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	defer it.Close()

	sw := newSumWriter(w)
	hdr := make([]byte, 0, 18)
	hdr = append(hdr, snapshotMagic[:]...)
	hdr = append(hdr, snapshotVersion)
	hdr = binary.BigEndian.AppendUint32(hdr, storeFormat)
	hdr = binary.BigEndian.AppendUint64(hdr, seq)
	sw.write(hdr)
	var count uint64
	var lens []byte
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, fmt.Errorf("checkpoint: %w", err)
		}
		lens = binary.AppendUvarint(lens[:0], uint64(len(it.Key())))
		sw.write(lens)
		sw.write(it.Key())
		lens = binary.AppendUvarint(lens[:0], uint64(len(v)))
		sw.write(lens)
		sw.write(v)
		count++
		if sw.err != nil {
			break
		}
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	sw.write(binary.AppendUvarint(nil, 0))
	sw.write(binary.BigEndian.AppendUint64(nil, count))
	sw.write(binary.BigEndian.AppendUint32(nil, sw.crc.Sum32()))
	if err := sw.flush(); err != nil {
		return 0, fmt.Errorf("checkpoint: write: %w", err)
	}
	s.logger.Info("local store checkpoint written", "dir", s.dir, "applied", seq, "keys", count, "bytes", sw.n)
	return seq, nil
}

// CheckpointSeq returns the applied sequence number a Checkpoint stream
// reflects, from its header, without consuming it.
func CheckpointSeq(r *bufio.Reader) (uint64, error) {
	hdr, err := r.Peek(17)
	if err != nil {
		return 0, fmt.Errorf("checkpoint header: %w", err)
	}
	if [4]byte(hdr[:4]) != snapshotMagic || hdr[4] != snapshotVersion {
		return 0, fmt.Errorf("checkpoint header: %w: not a version %d checkpoint", ErrCorrupt, snapshotVersion)
	}
	return binary.BigEndian.Uint64(hdr[9:17]), nil
}

// sumWriter buffers writes to w, checksums and counts them, and keeps the
// first error.
type sumWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	n   int64
	err error
}

func newSumWriter(w io.Writer) *sumWriter {
	return &sumWriter{w: bufio.NewWriterSize(w, 256<<10), crc: crc32.New(castagnoli)}
}

func (s *sumWriter) write(b []byte) {
	if s.err != nil {
		return
	}
	_, _ = s.crc.Write(b)
	n, err := s.w.Write(b)
	s.n += int64(n)
	s.err = err
}

func (s *sumWriter) flush() error {
	if s.err != nil {
		return s.err
	}
	return s.w.Flush()
}

// Restore builds a store in dir from a snapshot that Checkpoint wrote and
// opens it; its Applied() is the snapshot's sequence number. dir must not
// exist or be empty. The store is built in a sibling directory
// (dir + ".restoring") and renamed into place once the whole snapshot has
// been read and verified, so a failed or interrupted restore leaves no
// store behind. A truncated, corrupt or foreign snapshot is ErrCorrupt, a
// snapshot of another store format ErrIncompatible.
func Restore(dir string, r io.Reader, opts Options) (*Store, error) {
	if err := checkRestoreTarget(dir); err != nil {
		return nil, err
	}
	tmp := filepath.Clean(dir) + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("localstore: restore %s: %w", dir, err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	logger := opts.Logger
	opts.fs = nil // Restore works on the operating system's file system
	db, disk, err := openPebble(tmp, opts, logger)
	if err != nil {
		return nil, fmt.Errorf("localstore: restore %s: %w", dir, err)
	}
	seq, keys, err := load(db, disk, r)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("localstore: restore %s: %w", dir, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("localstore: restore %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("localstore: restore %s: %w", dir, err)
	}
	logger.Info("local store restored", "dir", dir, "applied", seq, "keys", keys)
	return Open(dir, opts)
}

func checkRestoreTarget(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("localstore: restore %s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("localstore: restore %s: directory is not empty", dir)
	}
	return nil
}

// load reads a snapshot stream into db. The metadata (format version,
// applied position) is written last, after the checksum is verified, so a
// store whose load did not finish has no format version and Open refuses
// it.
func load(db *pebble.DB, disk *diskWatch, r io.Reader) (seq, keys uint64, err error) {
	sr := &sumReader{r: bufio.NewReaderSize(r, 256<<10), crc: crc32.New(castagnoli)}
	hdr := make([]byte, 17)
	if err := sr.full(hdr); err != nil {
		return 0, 0, corrupt("header", err)
	}
	if !bytes.Equal(hdr[:4], snapshotMagic[:]) {
		return 0, 0, corrupt("header", errors.New("not a local store snapshot (bad magic)"))
	}
	if hdr[4] != snapshotVersion {
		return 0, 0, corrupt("header", fmt.Errorf("unknown snapshot version %d", hdr[4]))
	}
	// A format 1 stream holds version 1 flow values only, and a format 3
	// one no index entries, which format 4 still reads: they load as they
	// are and are stamped format 4.
	if f := binary.BigEndian.Uint32(hdr[5:9]); f != storeFormat && f != storeFormatInline && f != storeFormatNoIndex {
		return 0, 0, fmt.Errorf("snapshot of store format %d, this build reads %d, %d and %d: %w",
			f, storeFormatInline, storeFormatNoIndex, storeFormat, ErrIncompatible)
	}
	seq = binary.BigEndian.Uint64(hdr[9:17])

	b := db.NewBatch()
	defer func() { _ = b.Close() }()
	var prev []byte
	for {
		klen, err := sr.uvarint()
		if err != nil {
			return 0, 0, corrupt(fmt.Sprintf("entry %d", keys), err)
		}
		if klen == 0 {
			break
		}
		if klen > maxSnapshotKey {
			return 0, 0, corrupt(fmt.Sprintf("entry %d", keys), fmt.Errorf("key length %d", klen))
		}
		key := make([]byte, klen)
		if err := sr.full(key); err != nil {
			return 0, 0, corrupt(fmt.Sprintf("entry %d", keys), err)
		}
		if key[0] == prefixMeta || bytes.Compare(key, prev) <= 0 {
			return 0, 0, corrupt(fmt.Sprintf("entry %d", keys), errors.New("keys out of order or reserved"))
		}
		vlen, err := sr.uvarint()
		if err != nil {
			return 0, 0, corrupt(fmt.Sprintf("entry %d", keys), err)
		}
		if vlen > maxSnapshotValue {
			return 0, 0, corrupt(fmt.Sprintf("entry %d", keys), fmt.Errorf("value length %d", vlen))
		}
		val := make([]byte, vlen)
		if err := sr.full(val); err != nil {
			return 0, 0, corrupt(fmt.Sprintf("entry %d", keys), err)
		}
		if err := b.Set(key, val, nil); err != nil {
			return 0, 0, err
		}
		prev = key
		keys++
		if b.Len() >= restoreBatchBytes {
			if err := disk.check(uint64(b.Len())); err != nil {
				return 0, 0, err
			}
			if err := b.Commit(pebble.NoSync); err != nil {
				return 0, 0, err
			}
			_ = b.Close()
			b = db.NewBatch()
		}
	}
	trailer := make([]byte, 8)
	if err := sr.full(trailer); err != nil {
		return 0, 0, corrupt("trailer", err)
	}
	if n := binary.BigEndian.Uint64(trailer); n != keys {
		return 0, 0, corrupt("trailer", fmt.Errorf("count %d, read %d entries", n, keys))
	}
	want := sr.crc.Sum32()
	sum := make([]byte, 4)
	if _, err := io.ReadFull(sr.r, sum); err != nil {
		return 0, 0, corrupt("checksum", err)
	}
	if got := binary.BigEndian.Uint32(sum); got != want {
		return 0, 0, corrupt("checksum", fmt.Errorf("stored %08x, computed %08x", got, want))
	}
	if _, err := sr.r.ReadByte(); !errors.Is(err, io.EOF) {
		return 0, 0, corrupt("trailer", errors.New("bytes after the checksum"))
	}
	if err := b.Set(keyApplied, binary.BigEndian.AppendUint64(nil, seq), nil); err != nil {
		return 0, 0, err
	}
	if err := b.Set(keyFormat, binary.BigEndian.AppendUint32(nil, storeFormat), nil); err != nil {
		return 0, 0, err
	}
	if err := disk.check(uint64(b.Len())); err != nil {
		return 0, 0, err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, 0, err
	}
	return seq, keys, nil
}

func corrupt(where string, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("snapshot %s: %w: %w", where, ErrCorrupt, err)
}

// sumReader checksums what it reads.
type sumReader struct {
	r   *bufio.Reader
	crc hash.Hash32
}

func (s *sumReader) full(b []byte) error {
	if _, err := io.ReadFull(s.r, b); err != nil {
		return err
	}
	_, _ = s.crc.Write(b)
	return nil
}

func (s *sumReader) uvarint() (uint64, error) {
	var buf [binary.MaxVarintLen64]byte
	for i := range buf {
		c, err := s.r.ReadByte()
		if err != nil {
			return 0, err
		}
		buf[i] = c
		if c < 0x80 {
			_, _ = s.crc.Write(buf[:i+1])
			v, n := binary.Uvarint(buf[:i+1])
			if n <= 0 {
				return 0, errors.New("bad varint")
			}
			return v, nil
		}
	}
	return 0, errors.New("varint too long")
}
