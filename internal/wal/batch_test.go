package wal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/internal/wal"
)

// goldenBatches are the byte formats pinned in testdata/. Changing the
// format on purpose means a new format version and `go test -update`.
var goldenBatches = []struct {
	file  string
	batch wal.Batch
}{
	{"batch-fence.bin", wal.Batch{Seq: 42, Epoch: 8, Kind: wal.KindFence}},
	{"batch-empty.bin", wal.Batch{Seq: 7, Epoch: 3, Kind: wal.KindRecords}},
	{"batch-records.bin", wal.Batch{Seq: 1<<40 + 5, Epoch: 1<<33 + 1, Kind: wal.KindRecords,
		Records: recs("first record", "", "third: \x00\x01\xff binary", strings.Repeat("x", 300))}},
}

func golden(t testing.TB, file string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update && got != nil {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	return want
}

func sameBatch(a, b wal.Batch) bool {
	if a.Seq != b.Seq || a.Epoch != b.Epoch || a.Kind != b.Kind || len(a.Records) != len(b.Records) {
		return false
	}
	for i := range a.Records {
		if !bytes.Equal(a.Records[i], b.Records[i]) {
			return false
		}
	}
	return true
}

// Covers: G1
func TestBatch_Golden(t *testing.T) {
	t.Parallel()
	for _, g := range goldenBatches {
		t.Run(g.file, func(t *testing.T) {
			t.Parallel()
			enc := wal.Encode(g.batch)
			want := golden(t, g.file, enc)
			if !bytes.Equal(enc, want) {
				t.Fatalf("Encode changed the format of %s:\n got %x\nwant %x", g.file, enc, want)
			}
			if n := wal.EncodedSize(g.batch); n != len(enc) {
				t.Errorf("EncodedSize = %d, len(Encode) = %d", n, len(enc))
			}
			b, err := wal.DecodeAt("k", g.batch.Seq, want)
			if err != nil {
				t.Fatal(err)
			}
			if !sameBatch(b, g.batch) {
				t.Fatalf("decoded %+v, want %+v", b, g.batch)
			}
		})
	}
}

// Covers: G1
func TestBatch_LayoutByteByByte(t *testing.T) {
	t.Parallel()
	enc := wal.Encode(wal.Batch{Seq: 0x0102030405060708, Epoch: 0x1112131415161718, Kind: wal.KindRecords, Records: recs("ab")})
	want := []byte("DXWB\x01\x01" +
		"\x01\x02\x03\x04\x05\x06\x07\x08" +
		"\x11\x12\x13\x14\x15\x16\x17\x18" +
		"\x00\x00\x00\x01" +
		"\x00\x00\x00\x02ab")
	want = binary.BigEndian.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	if !bytes.Equal(enc, want) {
		t.Fatalf("got  %x\nwant %x", enc, want)
	}
}

// Covers: G1
func TestDecode_Corrupt(t *testing.T) {
	t.Parallel()
	const key = "test/nodes/n1/log/00000000000000000007"
	good := wal.Encode(wal.Batch{Seq: 7, Epoch: 3, Kind: wal.KindRecords, Records: recs("hello", "world")})
	reseal := func(b []byte) []byte { // fix the checksum so that a deeper check fires
		b = b[:len(b)-4]
		return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := []struct {
		name, data, reason string
	}{
		{"empty", "", "shorter than the minimum"},
		{"short", string(good[:20]), "shorter than the minimum"},
		{"magic", string(edit(func(b []byte) []byte { b[0] = 'X'; return reseal(b) })), "bad batch magic"},
		{"version", string(edit(func(b []byte) []byte { b[4] = 2; return reseal(b) })), "unknown batch format version 2"},
		{"kind", string(edit(func(b []byte) []byte { b[5] = 9; return reseal(b) })), "unknown batch kind 9"},
		{"count oversized", string(edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[22:], 0xffffffff)
			return reseal(b)
		})), "record count 4294967295 does not fit"},
		{"count past body", string(edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[22:], 5)
			return reseal(b)
		})), "does not fit"},
		{"fence with records", string(edit(func(b []byte) []byte { b[5] = byte(wal.KindFence); return reseal(b) })), "fence batch has 2 records"},
		{"record runs past end", string(edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[26:], 1000)
			return reseal(b)
		})), "truncated: record 0 of 2 is 1000 bytes"},
		{"trailing garbage", string(edit(func(b []byte) []byte {
			b = append(b[:len(b)-4], "junk1234"...)
			return reseal(b)
		})), "4 bytes of trailing data"},
		{"truncated", string(good[:len(good)-3]), "truncated"},
		{"payload bit flip", string(edit(func(b []byte) []byte { b[31] ^= 0x10; return b })), "checksum mismatch"},
		{"checksum bit flip", string(edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b })), "checksum mismatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := wal.Decode(key, []byte(tc.data))
			var ce *wal.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("got %v, want a *CorruptError", err)
			}
			if ce.Key != key || !strings.Contains(err.Error(), key) {
				t.Errorf("error %q does not name key %q", err, key)
			}
			if !strings.Contains(ce.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", ce.Reason, tc.reason)
			}
		})
	}
}

// Every truncation and every single-bit flip of every golden batch is
// detected.
//
// Covers: G1
func TestDecode_EveryTruncationAndBitFlip(t *testing.T) {
	t.Parallel()
	for _, g := range goldenBatches {
		data := wal.Encode(g.batch)
		for n := range len(data) {
			if _, err := wal.Decode("k", data[:n]); !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("%s truncated to %d bytes: got %v", g.file, n, err)
			}
		}
		for i := range len(data) * 8 {
			d := bytes.Clone(data)
			d[i/8] ^= 1 << (i % 8)
			if _, err := wal.Decode("k", d); !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("%s with bit %d flipped: got %v", g.file, i, err)
			}
		}
	}
}

// Covers: G1
func TestDecodeAt_SeqMismatch(t *testing.T) {
	t.Parallel()
	key := layout.LogKey(43)
	_, err := wal.DecodeAt(key, 43, wal.Encode(wal.Batch{Seq: 42, Epoch: 1, Kind: wal.KindRecords}))
	var ce *wal.CorruptError
	if !errors.As(err, &ce) || ce.Key != key || !strings.Contains(ce.Reason, "names sequence number 42") {
		t.Fatalf("got %v, want a corruption naming %s", err, key)
	}
}

// Covers: G1
func FuzzDecode(f *testing.F) {
	for _, g := range goldenBatches {
		f.Add(golden(f, g.file, nil))
	}
	f.Add([]byte{})
	f.Add([]byte("DXWB\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := wal.Decode("fuzz/key", data)
		if err != nil {
			var ce *wal.CorruptError
			if !errors.As(err, &ce) || ce.Key != "fuzz/key" {
				t.Fatalf("error %v is not a *CorruptError naming the key", err)
			}
			return
		}
		if enc := wal.Encode(b); !bytes.Equal(enc, data) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", enc, data)
		}
		if b.Kind == wal.KindFence && len(b.Records) != 0 {
			t.Fatalf("fence with records decoded: %+v", b)
		}
	})
}
