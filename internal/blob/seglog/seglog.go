package seglog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/dexzd/dexzd/internal/blob"
)

// SegmentBytes is the size after which a new segment is started (a
// variable so that tests can make segments small).
var SegmentBytes int64 = 64 << 20

const (
	recordHeader = 8     // length, CRC
	bodyHeader   = 1 + 8 // kind, sequence number
	kindPut      = 1
	kindDelete   = 2
	seqDigits    = 20
	segSuffix    = ".seg"
	maxRecord    = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Store is the segment log store. Log keys are those under a directory
// named "log" whose last element is a 20-digit sequence number.
type Store struct {
	inner  blob.Store
	dir    string
	sync   bool
	fsyncs atomic.Uint64

	log *slog.Logger // where repairs are reported (WithLogger)

	mu     sync.Mutex
	closed bool
	lockF  *os.File // DIR/.lock, flocked around every operation
	prefix string   // the log keys' prefix, once known (keyPrefix)
	// index maps a log key to its record.
	index map[string]loc
	// keys are the live log keys, sorted.
	keys   []string
	segs   map[uint64]*segment // by number
	cur    *segment            // the segment appended to
	nextID uint64              // the number of the next new segment
	// compactDue is set when a segment other than cur may have become
	// removable or worth relocating (relocate.go).
	compactDue bool
}

type loc struct {
	seg    *segment
	off    int64 // of the data
	length int
}

type segment struct {
	id        uint64 // segments are numbered in the order they are started
	f         *os.File
	size      int64
	live      int   // puts not deleted
	liveBytes int64 // the bytes of their records
	dirty     bool  // written (or, for a loaded segment, maybe) since its last fsync
}

// recordBytes is the size of a put record holding n bytes of data.
func recordBytes(n int) int64 { return recordHeader + bodyHeader + int64(n) }

// addLive counts a live put at l in its segment; dropLive uncounts it.
func addLive(l loc)  { l.seg.live++; l.seg.liveBytes += recordBytes(l.length) }
func dropLive(l loc) { l.seg.live--; l.seg.liveBytes -= recordBytes(l.length) }

// An Option configures Open.
type Option func(*Store)

// WithLogger reports to log what the store repairs or fails to tidy: a
// torn tail cut off ("seglog: cut torn tail", with the file, the offset,
// the reason and segmentsDropped) and a relocation that failed (retried
// later). Without it nothing is logged.
func WithLogger(log *slog.Logger) Option {
	return func(s *Store) {
		if log != nil {
			s.log = log
		}
	}
}

// Open opens the segment log in dir (created if missing) in front of
// inner, which holds every other key. With sync, every put of a log key
// is fsynced before it returns (strict); without, it survives a
// process kill but not a host crash (processCrashSafe).
//
// Open cuts off torn tails (and without sync, after a torn tail in an
// older segment, the segments after it) and returns an error naming the
// file and offset of a corrupt record, having changed nothing; see the
// package doc.
func Open(dir string, inner blob.Store, sync bool, opts ...Option) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("seglog: %w", err)
	}
	if sync {
		// dir's own entry must be durable before the first acknowledged
		// put in it, whoever created it (D5).
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("seglog: sync the parent of %s: %w", dir, err)
		}
	}
	lf, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("seglog: %w", err)
	}
	s := &Store{inner: inner, dir: dir, sync: sync, log: slog.New(slog.DiscardHandler), lockF: lf,
		index: map[string]loc{}, segs: map[uint64]*segment{}}
	for _, o := range opts {
		o(s)
	}
	if err := s.flock(); err != nil {
		_ = lf.Close()
		return nil, err
	}
	err = s.load()
	if err == nil {
		s.tidy()
	}
	s.funlock()
	if err != nil {
		s.closeFiles()
		_ = lf.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) flock() error {
	for {
		err := unix.Flock(int(s.lockF.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			if err != nil {
				return fmt.Errorf("seglog: lock %s: %w", s.lockF.Name(), err)
			}
			return nil
		}
	}
}

func (s *Store) funlock() { _ = unix.Flock(int(s.lockF.Fd()), unix.LOCK_UN) }

// enter takes the mutex and the flock and catches up with the segments;
// leave releases them.
func (s *Store) enter(op, key string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return blob.Permanent(op, key, errors.New("seglog: closed"))
	}
	if err := s.flock(); err != nil {
		s.mu.Unlock()
		return blob.Transient(op, key, err)
	}
	if err := s.refresh(); err != nil {
		s.funlock()
		s.mu.Unlock()
		return blob.Permanent(op, key, err)
	}
	return nil
}

func (s *Store) leave() {
	s.funlock()
	s.mu.Unlock()
}

// refresh catches up with other processes' writes: a changed set of
// segment files reloads everything; else records appended to the newest
// segment are read.
func (s *Store) refresh() error {
	ids, err := s.segmentIDs()
	if err != nil {
		return err
	}
	same := len(ids) == len(s.segs)
	for _, id := range ids {
		if _, ok := s.segs[id]; !ok {
			same = false
		}
	}
	if !same {
		s.closeFiles()
		s.index, s.keys, s.segs, s.cur, s.nextID = map[string]loc{}, nil, map[uint64]*segment{}, nil, 0
		return s.load()
	}
	if s.cur == nil {
		return nil
	}
	fi, err := s.cur.f.Stat()
	if err != nil {
		return fmt.Errorf("seglog: %w", err)
	}
	if fi.Size() == s.cur.size {
		return nil
	}
	added, bad, err := s.scan(s.cur, s.cur.size)
	for _, k := range added {
		if i, found := slices.BinarySearch(s.keys, k); !found {
			s.keys = slices.Insert(s.keys, i, k)
		}
	}
	s.dropDeletedKeys()
	// Another process's puts may have superseded records elsewhere (a
	// relocation it did not finish), and whether it fsynced them is
	// unknown.
	s.cur.dirty = true
	s.compactDue = true
	if err == nil && bad != nil {
		err = s.cutNewest(s.cur, bad)
	}
	return err
}

// dropDeletedKeys removes from keys what the index no longer has.
func (s *Store) dropDeletedKeys() {
	s.keys = slices.DeleteFunc(s.keys, func(k string) bool { _, ok := s.index[k]; return !ok })
}

// segmentIDs lists the segment files' numbers, ascending.
func (s *Store) segmentIDs() ([]uint64, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("seglog: %w", err)
	}
	var ids []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), segSuffix)
		if !ok {
			continue
		}
		id, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// Fsyncs returns the fsyncs of the segments plus those of the inner store
// if it counts them.
func (s *Store) Fsyncs() uint64 {
	n := s.fsyncs.Load()
	if f, ok := s.inner.(interface{ Fsyncs() uint64 }); ok {
		n += f.Fsyncs()
	}
	return n
}

// logSeq returns the sequence number of a log key.
func logSeq(key string) (uint64, bool) {
	dir, name := filepath.Split(key)
	if len(name) != seqDigits || !strings.HasSuffix(dir, "/log/") && dir != "log/" {
		return 0, false
	}
	seq, err := strconv.ParseUint(name, 10, 64)
	return seq, err == nil
}

// prefixFile is where the store records the key prefix of its log keys.
const prefixFile = "prefix"

// keyPrefix returns the prefix of the log keys, "" before the first put.
// It never changes once written, so it is read from the file only until
// it is known.
func (s *Store) keyPrefix() (string, error) {
	if s.prefix != "" {
		return s.prefix, nil
	}
	b, err := os.ReadFile(filepath.Join(s.dir, prefixFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	s.prefix = string(b)
	return s.prefix, nil
}

func padSeq(seq uint64) string {
	v := strconv.FormatUint(seq, 10)
	return strings.Repeat("0", seqDigits-len(v)) + v
}

func (s *Store) segPath(id uint64) string {
	return filepath.Join(s.dir, padSeq(id)+segSuffix)
}

// Get implements blob.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, blob.Version, error) {
	if _, ok := logSeq(key); !ok {
		return s.inner.Get(ctx, key)
	}
	if err := blob.CheckedKey(blob.OpGet, key); err != nil {
		return nil, "", err
	}
	if err := s.enter(blob.OpGet, key); err != nil {
		return nil, "", err
	}
	defer s.leave()
	l, ok := s.index[key]
	if !ok {
		// A batch written before the store used segments is a file.
		return s.inner.Get(ctx, key)
	}
	data := make([]byte, l.length)
	if _, err := l.seg.f.ReadAt(data, l.off); err != nil {
		return nil, "", blob.Permanent(blob.OpGet, key, err)
	}
	return data, version(l), nil
}

func version(l loc) blob.Version {
	return blob.Version(fmt.Sprintf("seg-%d-%d", l.seg.id, l.off))
}

// PutIfAbsent implements blob.Store: a log key is appended to the active
// segment (and fsynced in strict mode) unless the index has it.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) (blob.Version, error) {
	seq, ok := logSeq(key)
	if !ok {
		return s.inner.PutIfAbsent(ctx, key, data)
	}
	const op = blob.OpPutIfAbsent
	if err := blob.CheckedKey(op, key); err != nil {
		return "", err
	}
	if len(data) > maxRecord-bodyHeader {
		return "", blob.Permanent(op, key, fmt.Errorf("seglog: %d bytes is above the record limit", len(data)))
	}
	if err := s.enter(op, key); err != nil {
		return "", err
	}
	defer s.leave()
	if _, ok := s.index[key]; ok {
		return "", blob.Precondition(op, key)
	}
	// A batch written before the store used segments is a file.
	switch _, _, err := s.inner.Get(ctx, key); {
	case err == nil:
		return "", blob.Precondition(op, key)
	case !errors.Is(err, blob.ErrNotFound):
		return "", err
	}
	if err := s.checkPrefix(key, seq); err != nil {
		return "", blob.Permanent(op, key, err)
	}
	l, err := s.append(kindPut, seq, data, s.sync)
	if err != nil {
		return "", blob.Permanent(op, key, err)
	}
	s.index[key] = l
	addLive(l)
	i, _ := slices.BinarySearch(s.keys, key)
	s.keys = slices.Insert(s.keys, i, key)
	s.tidy() // the put may have started a segment
	return version(l), nil
}

// checkPrefix records the log keys' prefix at the first put and refuses a
// log key under another one (one store serves one node's log).
func (s *Store) checkPrefix(key string, seq uint64) error {
	prefix := strings.TrimSuffix(key, padSeq(seq))
	have, err := s.keyPrefix()
	if err != nil {
		return err
	}
	switch {
	case have == prefix:
		return nil
	case have != "":
		return fmt.Errorf("seglog: the log keys are under %q, not %q", have, prefix)
	}
	path := filepath.Join(s.dir, prefixFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(prefix), 0o644); err != nil {
		return err
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	s.prefix = prefix
	return nil
}

// append writes one record to the active segment, starting a new one when
// it is full or there is none.
func (s *Store) append(kind byte, seq uint64, data []byte, sync bool) (loc, error) {
	if s.cur == nil || s.cur.size >= SegmentBytes {
		if err := s.newSegment(); err != nil {
			return loc{}, err
		}
	}
	body := make([]byte, 0, bodyHeader+len(data))
	body = append(body, kind)
	body = binary.BigEndian.AppendUint64(body, seq)
	body = append(body, data...)
	rec := make([]byte, recordHeader, recordHeader+len(body))
	binary.BigEndian.PutUint32(rec, uint32(len(body)))
	binary.BigEndian.PutUint32(rec[4:], crc32.Checksum(body, castagnoli))
	rec = append(rec, body...)
	seg := s.cur
	if _, err := seg.f.WriteAt(rec, seg.size); err != nil {
		// Cut off what may have been written, so the next record starts
		// where the index expects it.
		_ = seg.f.Truncate(seg.size)
		return loc{}, fmt.Errorf("seglog: append to %s: %w", seg.f.Name(), err)
	}
	seg.dirty = true
	if sync {
		if err := s.syncSegment(seg); err != nil {
			return loc{}, err
		}
	}
	l := loc{seg: seg, off: seg.size + recordHeader + bodyHeader, length: len(data)}
	seg.size += int64(len(rec))
	return l, nil
}

// syncSegment fsyncs seg.
func (s *Store) syncSegment(seg *segment) error {
	s.fsyncs.Add(1)
	if err := seg.f.Sync(); err != nil {
		return fmt.Errorf("seglog: sync %s: %w", seg.f.Name(), err)
	}
	seg.dirty = false
	return nil
}

// newSegment starts the next segment, durable in its directory before it
// is used. In strict mode the active segment's unsynced writes (its
// tombstones) are fsynced first, so that only the newest segment can have
// a torn tail.
func (s *Store) newSegment() error {
	if s.sync && s.cur != nil && s.cur.dirty {
		if err := s.syncSegment(s.cur); err != nil {
			return fmt.Errorf("seglog: new segment: %w", err)
		}
	}
	id := s.nextID
	s.nextID++
	path := s.segPath(id)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("seglog: new segment: %w", err)
	}
	if s.sync {
		s.fsyncs.Add(1)
		if err := syncDir(s.dir); err != nil {
			_ = f.Close()
			return fmt.Errorf("seglog: new segment: %w", err)
		}
	}
	seg := &segment{id: id, f: f}
	s.segs[id] = seg
	s.cur = seg
	s.compactDue = true // the segment that was active
	return nil
}

func (s *Store) removeSegment(seg *segment) {
	_ = seg.f.Close()
	_ = os.Remove(seg.f.Name())
	delete(s.segs, seg.id)
}

// PutIfMatch implements blob.Store. Log batches are never replaced.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, v blob.Version) (blob.Version, error) {
	if _, ok := logSeq(key); !ok {
		return s.inner.PutIfMatch(ctx, key, data, v)
	}
	return "", blob.Permanent(blob.OpPutIfMatch, key, errors.New("seglog: log batches are written once"))
}

// Delete implements blob.Store: a tombstone, and the segment goes once
// none of its batches is left, or its last few are relocated.
func (s *Store) Delete(ctx context.Context, key string) error {
	seq, ok := logSeq(key)
	if !ok {
		return s.inner.Delete(ctx, key)
	}
	if err := s.enter(blob.OpDelete, key); err != nil {
		return err
	}
	defer s.leave()
	l, ok := s.index[key]
	if !ok {
		return s.inner.Delete(ctx, key)
	}
	if _, err := s.append(kindDelete, seq, nil, false); err != nil {
		return blob.Permanent(blob.OpDelete, key, err)
	}
	delete(s.index, key)
	if i, found := slices.BinarySearch(s.keys, key); found {
		s.keys = slices.Delete(s.keys, i, i+1)
	}
	dropLive(l)
	if l.seg != s.cur {
		s.compactDue = true
	}
	s.tidy()
	return nil
}

// List implements blob.Store, merging the log keys with the inner store's.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]string, error) {
	inner, err := s.inner.List(ctx, prefix, startAfter, limit)
	if err != nil {
		return nil, err
	}
	if err := s.enter(blob.OpList, prefix); err != nil {
		return nil, err
	}
	i, _ := slices.BinarySearch(s.keys, max(prefix, startAfter))
	var logs []string
	for ; i < len(s.keys) && (limit <= 0 || len(logs) < limit); i++ {
		k := s.keys[i]
		if k <= startAfter {
			continue
		}
		if !strings.HasPrefix(k, prefix) {
			break
		}
		logs = append(logs, k)
	}
	s.leave()
	out := slices.Concat(inner, logs)
	slices.Sort(out)
	out = slices.Compact(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Close closes the segments and the inner store.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.closeFiles()
	_ = s.lockF.Close()
	s.mu.Unlock()
	return s.inner.Close()
}

func (s *Store) closeFiles() {
	for _, seg := range s.segs {
		_ = seg.f.Close()
	}
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
