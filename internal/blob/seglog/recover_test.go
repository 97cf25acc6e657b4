package seglog_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/blob/seglog"
)

// segFile is the path of segment id under a test's data directory.
func segFile(dir string, id int) string {
	return filepath.Join(dir, "segments", fmt.Sprintf("%020d.seg", id))
}

// tryOpen opens the segments in dir as the node does, returning the error
// instead of failing.
func tryOpen(t *testing.T, dir string, sync bool, opts ...seglog.Option) (*seglog.Store, error) {
	t.Helper()
	mode := fs.Strict
	if !sync {
		mode = fs.ProcessCrashSafe
	}
	inner, err := fs.Open(filepath.Join(dir, "files"), mode)
	if err != nil {
		t.Fatal(err)
	}
	s, err := seglog.Open(filepath.Join(dir, "segments"), inner, sync, opts...)
	if err != nil {
		_ = inner.Close()
		return nil, err
	}
	return s, nil
}

// The timeline of issue 9 item 2: ten fsynced batches in the only segment
// (240 bytes), one byte flipped at offset 10 (the first record's sequence
// number). That record is followed by nine valid ones, so it is not a write
// that never completed: Open must refuse, naming the file and the record's
// offset, and leave the file as it was. It used to cut the segment at 0 and
// open with all ten batches gone.
//
// Covers: D5
func TestOpen_FlippedByteBeforeValidRecordsIsCorruption(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	for i := range 10 {
		if _, err := s.PutIfAbsent(t.Context(), logKey(i), []byte(fmt.Sprintf("batch %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segFile(dir, 0)
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 240 {
		t.Fatalf("segment is %d bytes, want 240", len(raw))
	}
	raw[10] ^= 0xff
	if err := os.WriteFile(seg, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := tryOpen(t, dir, true)
	if err == nil {
		_ = s2.Close()
		after, _ := os.ReadFile(seg)
		t.Fatalf("Open succeeded on a segment with a flipped byte before 9 valid records; the segment is now %d bytes", len(after))
	}
	if !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), "offset 0") {
		t.Fatalf("Open = %v, want an error naming %s and offset 0", err, seg)
	}
	after, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, raw) {
		t.Fatalf("Open changed the corrupt segment: %d bytes, was %d", len(after), len(raw))
	}
}

// modes are the two durability modes seglog serves: strict (fsync, D5) and
// processCrashSafe (no fsync, D6).
var modes = []struct {
	name string
	sync bool
}{{"strict", true}, {"processCrashSafe", false}}

// putBatches writes batches first..last-1, "batch <i>", and closes the
// store.
func putBatches(t *testing.T, dir string, sync bool, first, last int) {
	t.Helper()
	s, err := tryOpen(t, dir, sync)
	if err != nil {
		t.Fatal(err)
	}
	for i := first; i < last; i++ {
		if _, err := s.PutIfAbsent(t.Context(), logKey(i), []byte(fmt.Sprintf("batch %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// record builds a segment record (the on-disk format in the package doc).
func record(kind byte, seq uint64, data []byte) []byte {
	body := append([]byte{kind}, binary.BigEndian.AppendUint64(nil, seq)...)
	body = append(body, data...)
	rec := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	rec = binary.BigEndian.AppendUint32(rec, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	return append(rec, body...)
}

// dirBytes returns every file under dir/segments with its bytes.
func dirBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "segments"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, "segments", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// cuts captures what a store logs as "seglog: cut torn tail".
type cuts struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *cuts) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *cuts) option() seglog.Option {
	return seglog.WithLogger(slog.New(slog.NewJSONHandler(c, nil)))
}

type cut struct {
	Msg     string `json:"msg"`
	File    string `json:"file"`
	Offset  int64  `json:"offset"`
	Dropped int    `json:"segmentsDropped"`
}

func (c *cuts) all(t *testing.T) []cut {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []cut
	for _, line := range strings.Split(strings.TrimSpace(c.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var x cut
		if err := json.Unmarshal([]byte(line), &x); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if x.Msg == "seglog: cut torn tail" {
			out = append(out, x)
		}
	}
	return out
}

// checkBatches asserts that batches 0..n-1 read back and n..upTo-1 do not.
func checkBatches(t *testing.T, s *seglog.Store, n, upTo int) {
	t.Helper()
	ctx := t.Context()
	for i := range upTo {
		data, _, err := s.Get(ctx, logKey(i))
		switch {
		case i < n && (err != nil || string(data) != fmt.Sprintf("batch %d", i)):
			t.Fatalf("batch %d = %q, %v; want it kept", i, data, err)
		case i >= n && !errors.Is(err, blob.ErrNotFound):
			t.Fatalf("batch %d = %q, %v; want it lost with the torn tail", i, data, err)
		}
	}
	keys, err := s.List(ctx, "nodes/n1/log/", "", 0)
	if err != nil || len(keys) != n {
		t.Fatalf("List = %d keys, %v; want %d", len(keys), err, n)
	}
}

// A write that never completed at the end of the newest segment is cut off
// in both modes and the store opens with every complete record before it;
// the cut is logged.
//
// Covers: D5, D6
func TestOpen_TornTailOfNewestSegmentIsCut(t *testing.T) {
	// Ten records of 24 bytes ("batch <i>" is 7 bytes): 240 bytes.
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
		size   int64 // of the segment after Open
		kept   int   // batches that survive
	}{
		{"header cut short", func(b []byte) []byte { return append(b, 0, 0, 0, 40, 1, 2) }, 240, 10},
		{"last record cut short", func(b []byte) []byte { return b[:len(b)-3] }, 216, 9},
		{"last record's checksum fails", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, 216, 9},
		{"length reaches past the end", func(b []byte) []byte { b[216+3] = 200; return b }, 216, 9},
		{"zeros after the last record", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }, 240, 10},
		{"zeros over the last record", func(b []byte) []byte { clear(b[216:]); return append(b, make([]byte, 100)...) }, 216, 9},
		// A power loss during an append whose header straddles a sector
		// boundary: the length's last byte and everything after it were
		// never written and read as zeros, so the length claims 256 of
		// the 511 bytes the write was for (found in review: refused as
		// corruption, a strict node that would never start again).
		{"length torn smaller, zeros after", func(b []byte) []byte {
			return append(append(b, 0, 0, 1), make([]byte, 1+4+511)...)
		}, 240, 10},
	} {
		for _, m := range modes {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				putBatches(t, dir, m.sync, 0, 10)
				seg := segFile(dir, 0)
				raw, err := os.ReadFile(seg)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(seg, tc.damage(raw), 0o644); err != nil {
					t.Fatal(err)
				}
				var log cuts
				s, err := tryOpen(t, dir, m.sync, log.option())
				if err != nil {
					t.Fatalf("Open after a torn tail: %v", err)
				}
				if fi, err := os.Stat(seg); err != nil || fi.Size() != tc.size {
					t.Fatalf("segment after Open: %v, %v; want %d bytes", fi, err, tc.size)
				}
				checkBatches(t, s, tc.kept, 10)
				if c := log.all(t); len(c) != 1 || c[0].File != seg || c[0].Offset != tc.size || c[0].Dropped != 0 {
					t.Fatalf("logged cuts %+v; want one of %s at %d, no segment dropped", c, seg, tc.size)
				}
				if _, err := s.PutIfAbsent(t.Context(), logKey(tc.kept), []byte(fmt.Sprintf("batch %d", tc.kept))); err != nil {
					t.Fatalf("append after the cut: %v", err)
				}
				_ = s.Close()
				s, err = tryOpen(t, dir, m.sync)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				checkBatches(t, s, tc.kept+1, 11)
			})
		}
	}
}

// A bad record that does not run to the end of the file is corruption in
// every segment and both modes: Open fails naming the file and the
// record's offset, and no file changes.
//
// Covers: D5, D6
func TestOpen_CorruptionIsRefusedAndLeftAlone(t *testing.T) {
	unknown := record(3, 10, []byte("new kind"))
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
		off    int64
	}{
		{"checksum fails before valid records", func(b []byte) []byte { b[10] ^= 0xff; return b }, 0},
		{"length above the limit", func(b []byte) []byte { b[0] ^= 0xff; return b }, 0},
		{"zero header before valid records", func(b []byte) []byte { clear(b[24:32]); return b }, 24},
		{"zeros, then a non-zero byte", func(b []byte) []byte { return append(append(b, make([]byte, 100)...), 1) }, 240},
		{"complete record of an unknown kind", func(b []byte) []byte { return append(b, unknown...) }, 240},
	} {
		for _, m := range modes {
			for _, older := range []bool{false, true} {
				name := tc.name + "/" + m.name + "/newest"
				if older {
					name = tc.name + "/" + m.name + "/older"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					dir := t.TempDir()
					putBatches(t, dir, m.sync, 0, 10)
					seg := segFile(dir, 0)
					raw, err := os.ReadFile(seg)
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(seg, tc.damage(raw), 0o644); err != nil {
						t.Fatal(err)
					}
					if older {
						later := append(record(1, 50, []byte("later")), record(1, 51, []byte("later"))...)
						if err := os.WriteFile(segFile(dir, 1), later, 0o644); err != nil {
							t.Fatal(err)
						}
					}
					before := dirBytes(t, dir)
					s, err := tryOpen(t, dir, m.sync)
					if err == nil {
						_ = s.Close()
						t.Fatal("Open succeeded on a corrupt segment")
					}
					if want := fmt.Sprintf("%s at offset %d:", seg, tc.off); !strings.Contains(err.Error(), want) {
						t.Fatalf("Open = %v; want an error naming %q", err, want)
					}
					if after := dirBytes(t, dir); !maps.Equal(after, before) {
						t.Fatal("Open changed the segment files of a corrupt log")
					}
				})
			}
		}
	}
}

// After a host crash without fsync any segment may end in a torn tail
// (D6): the store opens with the log up to the first tear, cuts that
// segment there, removes every later segment (their records would follow
// a gap) and logs it. In strict mode the same damage is corruption (every
// segment but the newest was fsynced before the next one was started).
//
// Covers: D5, D6
func TestOpen_TornTailOfOlderSegment(t *testing.T) {
	old := seglog.SegmentBytes
	seglog.SegmentBytes = 100 // five records of 24 bytes ("batch <i>") a segment
	t.Cleanup(func() { seglog.SegmentBytes = old })
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"record cut short", func(b []byte) []byte { return b[:48+10] }},
		{"zeros where records were", func(b []byte) []byte { clear(b[48:]); return b }},
		{"checksum of the last record fails", func(b []byte) []byte {
			b = b[:72] // records 0-2 of the segment
			b[60] ^= 1
			return b
		}},
	} {
		for _, m := range modes {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				dir := t.TempDir()
				// Segments 0-4: batches 0-4 and 5-9 (24 bytes each) in 0 and
				// 1, then four 25-byte records a segment.
				putBatches(t, dir, m.sync, 0, 20)
				seg := segFile(dir, 1)
				raw, err := os.ReadFile(seg)
				if err != nil {
					t.Fatal(err)
				}
				if len(raw) != 120 {
					t.Fatalf("segment 1 is %d bytes, want 120", len(raw))
				}
				if err := os.WriteFile(seg, tc.damage(raw), 0o644); err != nil {
					t.Fatal(err)
				}
				before := dirBytes(t, dir)
				var log cuts
				s, err := tryOpen(t, dir, m.sync, log.option())
				if m.sync {
					if err == nil {
						_ = s.Close()
						t.Fatal("strict Open succeeded with a torn tail in an older segment")
					}
					if want := fmt.Sprintf("%s at offset 48:", seg); !strings.Contains(err.Error(), want) {
						t.Fatalf("Open = %v; want an error naming %q", err, want)
					}
					if !maps.Equal(dirBytes(t, dir), before) {
						t.Fatal("strict Open changed the segment files")
					}
					return
				}
				if err != nil {
					t.Fatalf("processCrashSafe Open with a torn tail in an older segment: %v", err)
				}
				if c := log.all(t); len(c) != 1 || c[0].File != seg || c[0].Offset != 48 || c[0].Dropped != 3 {
					t.Fatalf("logged cuts %+v; want one of %s at 48 dropping 3 segments", c, seg)
				}
				for _, id := range []int{2, 3, 4} {
					if _, err := os.Stat(segFile(dir, id)); !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("segment %d after the cut: %v; want it removed", id, err)
					}
				}
				if fi, err := os.Stat(seg); err != nil || fi.Size() != 48 {
					t.Fatalf("segment 1 after the cut: %v, %v; want 48 bytes", fi, err)
				}
				checkBatches(t, s, 7, 20) // 0-4, then 5 and 6 before the tear
				if _, err := s.PutIfAbsent(t.Context(), logKey(7), []byte("batch 7")); err != nil {
					t.Fatalf("append after the cut: %v", err)
				}
				_ = s.Close()
				s, err = tryOpen(t, dir, m.sync)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				checkBatches(t, s, 8, 20)
			})
		}
	}
}

// In strict mode a segment's unsynced tombstones are fsynced before the
// next segment is started, so that after a host crash only the newest
// segment can end in a torn tail (an older one is refused as corrupt). In
// processCrashSafe mode neither that nor a put costs an fsync.
//
// Covers: D5, D6
func TestNewSegment_StrictSyncsTheTombstonesBefore(t *testing.T) {
	old := seglog.SegmentBytes
	seglog.SegmentBytes = 200 // ten 24-byte records a segment
	t.Cleanup(func() { seglog.SegmentBytes = old })
	for _, tc := range []struct {
		sync bool
		want uint64 // fsyncs of the put that starts segment 1
	}{
		{true, 3}, // segment 0 (its tombstone), the directory, the put
		{false, 0},
	} {
		dir := t.TempDir()
		ctx := t.Context()
		s, err := tryOpen(t, dir, tc.sync)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			if _, err := s.PutIfAbsent(ctx, logKey(i), []byte(fmt.Sprintf("batch %d", i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Delete(ctx, logKey(0)); err != nil { // segment 0: 192+17 bytes
			t.Fatal(err)
		}
		before := s.Fsyncs()
		if _, err := s.PutIfAbsent(ctx, logKey(8), []byte("batch 8")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(segFile(dir, 1)); err != nil {
			t.Fatalf("sync=%v: the put did not start segment 1: %v", tc.sync, err)
		}
		if got := s.Fsyncs() - before; got != tc.want {
			t.Errorf("sync=%v: the put that started segment 1 cost %d fsyncs, want %d", tc.sync, got, tc.want)
		}
		_ = s.Close()
	}
}
