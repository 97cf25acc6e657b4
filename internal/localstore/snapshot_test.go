package localstore

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/dexzd/dexzd/internal/engine"
)

var discard = slog.New(slog.DiscardHandler)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// dump returns every key and value of the store, metadata included.
func dump(t testing.TB, s *Store) string {
	t.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var b bytes.Buffer
	for ok := it.First(); ok; ok = it.Next() {
		fmt.Fprintf(&b, "%q=%q\n", it.Key(), it.Value())
	}
	return b.String()
}

func TestCheckpoint_RestoreRoundTrip(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	running := map[string]*engine.FlowState{}
	for i := range 20 {
		st := richFlow(t, fmt.Sprintf("o-%d", i), base.Add(time.Duration(i)*time.Minute))
		if i%3 == 0 {
			st = stop(t, st, engine.StopCancel, base.Add(time.Hour))
		} else {
			running[st.FlowID] = st
		}
		putAll(t, s, uint64(10+i), st)
	}
	var buf bytes.Buffer
	seq, err := s.Checkpoint(&buf)
	if err != nil || seq != 29 {
		t.Fatalf("checkpoint: %d %v", seq, err)
	}
	if got, err := CheckpointSeq(bufio.NewReader(bytes.NewReader(buf.Bytes()))); err != nil || got != 29 {
		t.Fatalf("CheckpointSeq = %d, %v; want 29", got, err)
	}
	if _, err := CheckpointSeq(bufio.NewReader(strings.NewReader("DXXX and more than seventeen bytes"))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("CheckpointSeq of a foreign stream = %v, want ErrCorrupt", err)
	}
	srcDump := dump(t, s)
	// Later batches are not in the snapshot.
	putAll(t, s, 30, start(t, nil, "later", "order", "r", base))

	dir := filepath.Join(t.TempDir(), "restored")
	r, err := Restore(dir, bytes.NewReader(buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	mustAppliedAt(t, r, 29)
	if got := dump(t, r); got != srcDump {
		t.Fatalf("restored store differs:\n%s\nwant:\n%s", got, srcDump)
	}
	n := 0
	_ = r.RunningFlows(func(st *engine.FlowState) error {
		sameState(t, st, running[st.FlowID])
		n++
		return nil
	})
	if n != len(running) {
		t.Fatalf("%d running flows restored, want %d", n, len(running))
	}
	// The restored store continues with the next batch.
	wantErr(t, r.Apply(29, nil), ErrAlreadyApplied)
	putAll(t, r, 30, start(t, nil, "next", "order", "r", base))
}

func TestCheckpoint_NothingApplied(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	var buf bytes.Buffer
	_, err := s.Checkpoint(&buf)
	wantErr(t, err, ErrNothingApplied)
	if buf.Len() != 0 {
		t.Fatalf("wrote %d bytes", buf.Len())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestCheckpoint_WriteError(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	putAll(t, s, 1, richFlow(t, "o", base))
	if _, err := s.Checkpoint(failWriter{}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("disk full")) {
		t.Fatalf("err = %v", err)
	}
}

// goldenStore builds a small store from raw keys, so that the snapshot
// bytes do not depend on the engine's state encoding.
func goldenStore(t testing.TB) *Store {
	s := openStore(t, t.TempDir())
	err := s.Apply(41, func(tx *Tx) error {
		for _, kv := range [][2]string{
			{"fflow-1", "latest value"}, {"hflow-1\x00\x01run\x00\x01\x00\x00\x00\x01", "event 1"},
			{"lsome list key", "summary"}, {"rrun\x00\x01old", ""},
			{"xflow-1", ""}, {"\xff\x00binary", "\x00\x01\x02"},
		} {
			if err := tx.b.Set([]byte(kv[0]), []byte(kv[1]), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The snapshot stream is a byte format: pin it.
func TestCheckpoint_Golden(t *testing.T) {
	t.Parallel()
	s := goldenStore(t)
	var buf bytes.Buffer
	if _, err := s.Checkpoint(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "checkpoint.golden")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("snapshot bytes changed (run with -update if intended):\n got %x\nwant %x", buf.Bytes(), want)
	}
	r, err := Restore(filepath.Join(t.TempDir(), "r"), bytes.NewReader(want), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if dump(t, r) != dump(t, s) {
		t.Fatalf("restored golden store:\n%s\nwant:\n%s", dump(t, r), dump(t, s))
	}
}

// Every flipped byte, every truncation and trailing bytes are refused, and
// leave no directory behind.
func TestRestore_RejectsCorruptSnapshot(t *testing.T) {
	t.Parallel()
	good, err := os.ReadFile(filepath.Join("testdata", "checkpoint.golden"))
	if err != nil {
		t.Fatal(err)
	}
	// Through the decoder into an in-memory Pebble (fast) ...
	check := func(name string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrIncompatible) {
			t.Fatalf("%s: err = %v", name, err)
		}
	}
	decode := func(name string, data []byte) {
		t.Helper()
		db := memPebble(t)
		defer db.Close()
		_, _, err := load(db, &diskWatch{}, bytes.NewReader(data))
		check(name, err)
	}
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x10
		decode(fmt.Sprintf("flip byte %d", i), bad)
	}
	for n := range len(good) {
		decode(fmt.Sprintf("truncated to %d", n), good[:n])
	}
	decode("trailing byte", append(bytes.Clone(good), 0))

	// ... and a few through Restore, which must leave nothing behind.
	parent := t.TempDir()
	flipped := bytes.Clone(good)
	flipped[len(good)/2] ^= 1
	for name, data := range map[string][]byte{
		"not a snapshot": []byte("PK\x03\x04 a zip file, say"),
		"truncated":      good[:len(good)-1],
		"flipped":        flipped,
		"empty":          nil,
	} {
		dir := filepath.Join(parent, "store")
		s, err := Restore(dir, bytes.NewReader(data), Options{})
		if err == nil {
			s.Close()
		}
		check(name, err)
		if !strings.Contains(err.Error(), dir) {
			t.Fatalf("%s: error does not name the directory: %v", name, err)
		}
		for _, d := range []string{dir, dir + ".restoring"} {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s: %s left behind (%v)", name, d, err)
			}
		}
	}
}

func memPebble(t testing.TB) *pebble.DB {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: &pebbleLogger{l: discard}})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestRestore_RefusesNonEmptyDirectory(t *testing.T) {
	t.Parallel()
	good, err := os.ReadFile(filepath.Join("testdata", "checkpoint.golden"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(dir, bytes.NewReader(good), Options{}); err == nil {
		t.Fatal("restored into a non-empty directory")
	}
	// An existing empty directory is fine.
	empty := t.TempDir()
	s, err := Restore(empty, bytes.NewReader(good), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustAppliedAt(t, s, 41)
}

// FuzzRestore: the snapshot decoder never panics, and accepts only streams
// whose checksum holds.
func FuzzRestore(f *testing.F) {
	good, err := os.ReadFile(filepath.Join("testdata", "checkpoint.golden"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:20])
	f.Fuzz(func(t *testing.T, data []byte) {
		db := memPebble(t)
		defer db.Close()
		if _, _, err := load(db, &diskWatch{}, bytes.NewReader(data)); err == nil {
			if !bytes.Equal(data, good) && len(data) < 30 {
				t.Fatalf("accepted a %d-byte stream", len(data))
			}
		}
	})
}

func FuzzDecodeFlowValue(f *testing.F) {
	st := richFlow(f, "o", base)
	b, _ := engine.MarshalState(st)
	sum := st.Summary()
	f.Add(encodeFlowValueV1(&sum, b))
	bare := *st
	bare.History = nil
	b2, _ := engine.MarshalState(&bare)
	f.Add(encodeFlowValue(&sum, uint64(len(st.History)), nil, b2, false))
	f.Add(encodeFlowValue(&sum, uint64(len(st.History)), nil, b2, true))
	f.Add(appendSummary(nil, &sum))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, _ = decodeFlowValue(data, nil)
		_, _, _ = decodeFlowValue(data, data)
		_, _, _ = decodeSummary(data)
		_, _ = decodePageToken(string(data), 0)
	})
}
