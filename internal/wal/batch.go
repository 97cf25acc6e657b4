package wal

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"strconv"

	"github.com/dexzd/dexzd/internal/blob"
)

// Kind says what a batch carries.
type Kind uint8

// Batch kinds. The values are part of the format.
const (
	// KindRecords carries records of state changes, in order.
	KindRecords Kind = 1
	// KindFence marks the start of an epoch: the first batch a new lease
	// holder writes (G2). It carries no records.
	KindFence Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindRecords:
		return "records"
	case KindFence:
		return "fence"
	default:
		return "kind(" + strconv.Itoa(int(k)) + ")"
	}
}

// Batch is one numbered entry of the log.
type Batch struct {
	Seq     uint64   // the sequence number; the batch lives at Layout.LogKey(Seq)
	Epoch   uint64   // the epoch of the lease holder that wrote it
	Kind    Kind     // KindRecords or KindFence
	Records [][]byte // opaque payloads; empty for a fence
}

// Format constants; see doc.go for the byte layout.
const (
	batchMagic         = "DXWB"
	batchVersion       = 1
	batchHeaderSize    = 4 + 1 + 1 + 8 + 8 + 4 // magic, version, kind, seq, epoch, count
	batchTrailerSize   = 4                     // CRC-32C
	recordPrefixSize   = 4                     // u32 length before each record
	minBatchSize       = batchHeaderSize + batchTrailerSize
	MaxRecordsPerBatch = 1 << 20 // a batch claiming more records is corrupt
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodedSize returns len(Encode(b)) without encoding.
func EncodedSize(b Batch) int {
	n := minBatchSize
	for _, r := range b.Records {
		n += recordPrefixSize + len(r)
	}
	return n
}

// Encode returns the wire form of b. It does not validate b: a batch that
// Decode would reject (an unknown kind, a fence with records, more than
// MaxRecordsPerBatch records) encodes but does not decode. A record longer
// than 4 GiB - 1 cannot be encoded and makes Encode panic.
func Encode(b Batch) []byte {
	buf := make([]byte, 0, EncodedSize(b))
	buf = append(buf, batchMagic...)
	buf = append(buf, batchVersion, byte(b.Kind))
	buf = binary.BigEndian.AppendUint64(buf, b.Seq)
	buf = binary.BigEndian.AppendUint64(buf, b.Epoch)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(b.Records)))
	for _, r := range b.Records {
		if uint64(len(r)) > uint64(^uint32(0)) {
			panic("wal: record longer than 4 GiB - 1")
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(r)))
		buf = append(buf, r...)
	}
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

// Decode parses the batch stored at key. Every defect (short data, wrong
// magic or version, unknown kind, a record count that cannot fit, records
// that run past the end, trailing bytes, a checksum mismatch) returns a
// *CorruptError naming key. The returned records alias data.
//
// Decode checks the batch on its own; DecodeAt also checks it against the
// sequence number the reader asked for.
func Decode(key string, data []byte) (Batch, error) {
	if len(data) < minBatchSize {
		return Batch{}, corrupt(key, "batch is %d bytes, shorter than the minimum %d", len(data), minBatchSize)
	}
	if string(data[:4]) != batchMagic {
		return Batch{}, corrupt(key, "bad batch magic %q", data[:4])
	}
	if data[4] != batchVersion {
		return Batch{}, corrupt(key, "unknown batch format version %d", data[4])
	}
	b := Batch{
		Kind:  Kind(data[5]),
		Seq:   binary.BigEndian.Uint64(data[6:]),
		Epoch: binary.BigEndian.Uint64(data[14:]),
	}
	if b.Kind != KindRecords && b.Kind != KindFence {
		return Batch{}, corrupt(key, "unknown batch kind %d", data[5])
	}
	count := binary.BigEndian.Uint32(data[22:])
	body := data[batchHeaderSize : len(data)-batchTrailerSize]
	if count > MaxRecordsPerBatch || uint64(count)*recordPrefixSize > uint64(len(body)) {
		return Batch{}, corrupt(key, "record count %d does not fit in %d bytes of body", count, len(body))
	}
	if b.Kind == KindFence && count != 0 {
		return Batch{}, corrupt(key, "fence batch has %d records", count)
	}
	if count > 0 {
		b.Records = make([][]byte, 0, count)
	}
	for i := uint32(0); i < count; i++ {
		if len(body) < recordPrefixSize {
			return Batch{}, corrupt(key, "truncated: record %d of %d has no length", i, count)
		}
		n := binary.BigEndian.Uint32(body)
		body = body[recordPrefixSize:]
		if uint64(n) > uint64(len(body)) {
			return Batch{}, corrupt(key, "truncated: record %d of %d is %d bytes, %d remain", i, count, n, len(body))
		}
		b.Records = append(b.Records, body[:n:n])
		body = body[n:]
	}
	if len(body) != 0 {
		return Batch{}, corrupt(key, "%d bytes of trailing data after %d records", len(body), count)
	}
	want := binary.BigEndian.Uint32(data[len(data)-batchTrailerSize:])
	if got := crc32.Checksum(data[:len(data)-batchTrailerSize], castagnoli); got != want {
		return Batch{}, corrupt(key, "checksum mismatch: stored %08x, computed %08x", want, got)
	}
	return b, nil
}

// DecodeAt is Decode for a reader that fetched key because it wanted the
// batch with sequence number seq: a batch that names another sequence
// number is corrupt.
func DecodeAt(key string, seq uint64, data []byte) (Batch, error) {
	b, err := Decode(key, data)
	if err != nil {
		return Batch{}, err
	}
	if b.Seq != seq {
		return Batch{}, corrupt(key, "batch names sequence number %d, the key is for %d", b.Seq, seq)
	}
	return b, nil
}

// ReadBatch makes one attempt to get and decode the batch with sequence
// number seq. A missing batch returns an error matching blob.ErrNotFound;
// store errors are returned as the store classified them.
func ReadBatch(ctx context.Context, store blob.Store, layout Layout, seq uint64) (Batch, []byte, error) {
	key := layout.LogKey(seq)
	data, _, err := store.Get(ctx, key)
	if err != nil {
		return Batch{}, nil, err
	}
	b, err := DecodeAt(key, seq, data)
	return b, data, err
}
