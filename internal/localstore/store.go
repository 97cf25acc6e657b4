package localstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/dexzd/dexzd/internal/diskfull"
)

// Sentinel errors; check with errors.Is.
var (
	// ErrNotFound: no such flow ID or run.
	ErrNotFound = errors.New("localstore: not found")
	// ErrAlreadyApplied: Apply was given a sequence number at or below the
	// applied position. Replay skips such batches instead.
	ErrAlreadyApplied = errors.New("localstore: batch already applied")
	// ErrIncompatible: the directory was written under another format
	// version, or is not a local store.
	ErrIncompatible = errors.New("localstore: incompatible store")
	// ErrCorrupt: a stored value or a snapshot does not decode.
	ErrCorrupt = errors.New("localstore: corrupt data")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("localstore: closed")
	// ErrNothingApplied: Checkpoint of a store that has applied no batch.
	ErrNothingApplied = errors.New("localstore: no batch applied")
	// ErrBadPageToken: a ListFlows page token that does not decode or was
	// issued for other filters.
	ErrBadPageToken = errors.New("localstore: invalid page token")
)

// DefaultCacheSize is the block cache size when Options.CacheSize is 0.
const DefaultCacheSize = 64 << 20

// DefaultMemTableSize is the memtable size when Options.MemTableSize is 0.
const DefaultMemTableSize = 32 << 20

// Options configure Open and Restore. The zero value is usable.
type Options struct {
	// Logger receives the store's own messages and Pebble's (Pebble's
	// informational messages at debug level). Nil discards them.
	Logger *slog.Logger
	// CacheSize is Pebble's block cache in bytes; 0 means DefaultCacheSize.
	CacheSize int64
	// MemTableSize is Pebble's memtable size in bytes; 0 means
	// DefaultMemTableSize.
	MemTableSize uint64

	// fs replaces the operating system's file system (crash tests).
	fs vfs.FS
	// inlineBigValues keeps large values in sstables (benchmarks compare
	// it with value separation).
	inlineBigValues bool
}

// Store is the materialised state of one node: the latest run of every flow
// ID, older runs, and the indexes ListFlows and RunningFlows read. It is a
// cache of the batch log: writes are not synced, and every batch is stored
// together with its sequence number, so after a crash the store holds
// exactly the batches up to Applied() and replay continues from there.
//
// All methods are safe for concurrent use. Apply calls are serialised.
type Store struct {
	db     *pebble.DB
	dir    string
	logger *slog.Logger
	disk   *diskWatch

	// applyMu serialises Apply.
	applyMu sync.Mutex
	// applied is the applied sequence number plus one; 0 means none.
	applied atomic.Uint64

	// mu guards closed; ops counts the calls in flight, which Close waits
	// for.
	mu     sync.Mutex
	closed bool
	ops    sync.WaitGroup

	batches atomic.Uint64
	bytes   atomic.Uint64
	puts    atomic.Uint64
	events  atomic.Uint64
}

// Open opens (or creates) the store in dir. A directory of format 1 (flow
// values with their history inline) is restamped format 3 and used as is:
// its values still decode, and PutFlow moves a run's history to history
// keys the first time it writes the run; a binary that reads only format 1
// refuses the directory from then on (ErrIncompatible). A directory written
// under another format version, or holding data that is not a local store,
// is refused with ErrIncompatible.
func Open(dir string, opts Options) (*Store, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	db, disk, err := openPebble(dir, opts, logger)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, dir: dir, logger: logger, disk: disk}
	if err := s.checkFormat(); err != nil {
		_ = db.Close()
		return nil, err
	}
	seq, ok, err := readApplied(db)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("localstore: open %s: %w", dir, err)
	}
	if ok {
		s.applied.Store(seq + 1)
	}
	logger.Info("local store opened", "dir", dir, "applied", seq, "hasApplied", ok)
	return s, nil
}

func openPebble(dir string, opts Options, logger *slog.Logger) (*pebble.DB, *diskWatch, error) {
	limited := &pebbleLogger{l: logger}
	po := &pebble.Options{
		CacheSize:          opts.CacheSize,
		MemTableSize:       opts.MemTableSize,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             limited,
		FS:                 opts.fs,
	}
	if po.CacheSize <= 0 {
		po.CacheSize = DefaultCacheSize
	}
	if po.MemTableSize == 0 {
		po.MemTableSize = DefaultMemTableSize
	}
	// Bloom filters on every level: a point read (every PutFlow reads the
	// latest run's header) skips the tables that do not hold its key
	// instead of reading a data block of each.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	// Values of at least bigValueBytes (the 'b' keys: large states and
	// history events) go to blob files when a memtable is flushed, and
	// compactions move references to them instead of rewriting them:
	// a 4 MiB input was rewritten at every level it passed through. A
	// blob file is rewritten once a fifth of it is garbage (a large
	// state is replaced at every step of its run).
	po.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               !opts.inlineBigValues,
			MinimumSize:           bigValueBytes,
			MaxBlobReferenceDepth: 10,
			RewriteMinimumAge:     5 * time.Minute,
			TargetGarbageRatio:    0.2,
		}
	}
	disk := &diskWatch{dir: dir, logger: limited}
	if opts.fs == nil {
		// On the operating system's file system only (crash tests use
		// an in-memory one): the space a memtable flush needs.
		disk.reserve = po.MemTableSize + diskReserveSlack
	}
	// A restart on a full disk fails here, at once, instead of replaying
	// Pebble's WAL into flushes that fail and are retried forever.
	if err := disk.check(0); err != nil {
		return nil, nil, fmt.Errorf("localstore: open %s: %w", dir, err)
	}
	po.EventListener = &pebble.EventListener{BackgroundError: disk.backgroundError}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, nil, fmt.Errorf("localstore: open %s: %w", dir, fullOr(dir, err))
	}
	return db, disk, nil
}

// diskReserveSlack is the space kept free beyond a memtable: WAL and
// MANIFEST rotation, OPTIONS files.
const diskReserveSlack = 4 << 20

// diskWatch keeps the local store from writing into a full disk. Pebble
// panics when a WAL write fails (it cannot tell which writes were lost),
// so Apply checks the free space before each commit (reserve: a memtable
// flush and the batch); a background flush or compaction that finds the
// disk full makes every later Apply fail with that error.
type diskWatch struct {
	dir     string
	reserve uint64 // 0: no check
	logger  *pebbleLogger
	full    atomic.Pointer[diskfull.Error]
}

// check returns an error matching syscall.ENOSPC (a *diskfull.Error) when
// a write of size bytes would leave less than the reserve, or a background
// job already found the disk full.
func (d *diskWatch) check(size uint64) error {
	if e := d.full.Load(); e != nil {
		return e
	}
	if d.reserve == 0 {
		return nil
	}
	return diskfull.Reserve(d.dir, d.reserve+size)
}

func (d *diskWatch) backgroundError(err error) {
	if e := diskfull.From(err); e != nil {
		d.full.CompareAndSwap(nil, e)
	}
	d.logger.Errorf("background error: %v", err)
}

// fullOr returns err as a *diskfull.Error when it is one (ENOSPC), else
// err.
func fullOr(dir string, err error) error {
	if e := diskfull.From(err); e != nil {
		if e.Path == "" {
			e.Path = dir
		}
		return e
	}
	return err
}

// checkFormat stamps a new (empty) store with the format version, restamps
// a format 1 or 3 store (synced, before any write of format 4 data), and refuses
// a store stamped with another one or data without a stamp.
func (s *Store) checkFormat() error {
	v, err := getCopy(s.db, keyFormat)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		empty, err := isEmpty(s.db)
		if err != nil {
			return fmt.Errorf("localstore: open %s: %w", s.dir, err)
		}
		if !empty {
			return fmt.Errorf("localstore: open %s: data without a format version (not a local store, or an interrupted restore): %w", s.dir, ErrIncompatible)
		}
		if err := s.db.Set(keyFormat, binary.BigEndian.AppendUint32(nil, storeFormat), pebble.Sync); err != nil {
			return fmt.Errorf("localstore: open %s: write format version: %w", s.dir, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("localstore: open %s: read format version: %w", s.dir, err)
	}
	if len(v) != 4 {
		return fmt.Errorf("localstore: open %s: format version of %d bytes: %w", s.dir, len(v), ErrIncompatible)
	}
	got := binary.BigEndian.Uint32(v)
	if got == storeFormatInline || got == storeFormatNoIndex {
		if err := s.db.Set(keyFormat, binary.BigEndian.AppendUint32(nil, storeFormat), pebble.Sync); err != nil {
			return fmt.Errorf("localstore: open %s: restamp format %d as %d: %w", s.dir, got, storeFormat, err)
		}
		s.logger.Info("local store format upgraded", "dir", s.dir, "from", got, "to", storeFormat)
		return nil
	}
	if got != storeFormat {
		return fmt.Errorf("localstore: open %s: format version %d, this build reads %d: %w", s.dir, got, storeFormat, ErrIncompatible)
	}
	return nil
}

func isEmpty(db *pebble.DB) (bool, error) {
	it, err := db.NewIter(nil)
	if err != nil {
		return false, err
	}
	empty := !it.First()
	if err := it.Close(); err != nil {
		return false, err
	}
	return empty, nil
}

// reader is what reads run against: the DB, a snapshot or an indexed
// batch.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

// getCopy reads a key and copies its value; not found is pebble.ErrNotFound.
func getCopy(r reader, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	return out, closer.Close()
}

func readApplied(r reader) (seq uint64, ok bool, err error) {
	v, err := getCopy(r, keyApplied)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read applied position: %w", err)
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("applied position of %d bytes: %w", len(v), ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// enter registers a call in flight; it fails once Close has begun.
func (s *Store) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.ops.Add(1)
	return nil
}

func (s *Store) leave() { s.ops.Done() }

// Close waits for the calls in flight, then closes the store. Unsynced
// writes reach the operating system; nothing else is lost. Calls after
// Close fail with ErrClosed; a second Close returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.ops.Wait()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("localstore: close %s: %w", s.dir, err)
	}
	return nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Applied returns the sequence number of the last applied log batch; ok is
// false when the store has applied none (a new store).
func (s *Store) Applied() (seq uint64, ok bool) {
	v := s.applied.Load()
	if v == 0 {
		return 0, false
	}
	return v - 1, true
}

// Apply applies log batch seq: fn writes through tx, and its writes commit
// in one atomic Pebble batch together with the applied position seq. A seq
// at or below Applied() is refused with ErrAlreadyApplied (replay skips
// those batches, so applying is idempotent). If fn returns an error (or
// panics) nothing is written and the applied position is unchanged. fn may
// be nil: a batch without state changes (a fence) still advances the
// applied position. tx is valid only during fn and only on fn's goroutine.
func (s *Store) Apply(seq uint64, fn func(tx *Tx) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if prev, ok := s.Applied(); ok && seq <= prev {
		return fmt.Errorf("apply batch %d: %w (applied %d)", seq, ErrAlreadyApplied, prev)
	}
	if seq == math.MaxUint64 {
		return fmt.Errorf("apply batch %d: sequence number out of range", seq)
	}
	b := s.db.NewIndexedBatch()
	defer b.Close()
	tx := &Tx{b: b}
	defer func() { tx.b = nil }() // also when fn panics
	if fn != nil {
		if err := fn(tx); err != nil {
			return fmt.Errorf("apply batch %d: %w", seq, err)
		}
	}
	tx.b = nil
	if err := b.Set(keyApplied, binary.BigEndian.AppendUint64(nil, seq), nil); err != nil {
		return fmt.Errorf("apply batch %d: %w", seq, err)
	}
	size := uint64(b.Len())
	if err := s.disk.check(size); err != nil {
		return fmt.Errorf("apply batch %d: %w", seq, err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("apply batch %d: commit: %w", seq, fullOr(s.dir, err))
	}
	s.applied.Store(seq + 1)
	s.batches.Add(1)
	s.bytes.Add(size)
	s.puts.Add(uint64(tx.puts))
	s.events.Add(uint64(tx.events))
	return nil
}

// Stats are counters for metrics.
type Stats struct {
	Applied    uint64 // the applied sequence number, when HasApplied
	HasApplied bool
	// Since Open: batches applied, their encoded size in bytes, the flow
	// states they stored and the history events they wrote (each event
	// once).
	BatchesApplied uint64
	BytesApplied   uint64
	FlowsPut       uint64
	EventsPut      uint64
	// DiskBytes is the space the store's files take.
	DiskBytes uint64
}

// Stats returns the store's counters.
func (s *Store) Stats() (Stats, error) {
	if err := s.enter(); err != nil {
		return Stats{}, err
	}
	defer s.leave()
	st := Stats{BatchesApplied: s.batches.Load(), BytesApplied: s.bytes.Load(),
		FlowsPut: s.puts.Load(), EventsPut: s.events.Load(), DiskBytes: s.db.Metrics().DiskSpaceUsage()}
	st.Applied, st.HasApplied = s.Applied()
	return st, nil
}

// pebbleLogger routes Pebble's messages to slog. Its errors are
// rate-limited: at most one line per pebbleErrorEvery, the next one
// saying how many were left out (a flush retried against a full disk
// otherwise logs hundreds a second).
type pebbleLogger struct {
	l *slog.Logger

	mu         sync.Mutex
	last       time.Time
	suppressed int

	exit func(code int) // nil: os.Exit; replaced by tests
}

// pebbleErrorEvery is the least time between two logged Pebble errors.
const pebbleErrorEvery = time.Second

func (p *pebbleLogger) Infof(format string, args ...any) {
	if !p.l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	p.l.Debug("pebble", "msg", fmt.Sprintf(format, args...))
}

func (p *pebbleLogger) Errorf(format string, args ...any) {
	p.mu.Lock()
	now := time.Now()
	if !p.last.IsZero() && now.Sub(p.last) < pebbleErrorEvery {
		p.suppressed++
		p.mu.Unlock()
		return
	}
	suppressed := p.suppressed
	p.last, p.suppressed = now, 0
	p.mu.Unlock()
	if suppressed > 0 {
		p.l.Error("pebble error", "msg", fmt.Sprintf(format, args...), "suppressed", suppressed)
		return
	}
	p.l.Error("pebble error", "msg", fmt.Sprintf(format, args...))
}

// Fatalf must not return (Pebble's contract). A fatal error caused by a
// full disk (a MANIFEST write that met ENOSPC) ends the process with
// status 1 and the disk-full line, as every other full disk does; any
// other fatal error panics.
func (p *pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for _, a := range args {
		if err, ok := a.(error); ok {
			if d := diskfull.From(err); d != nil {
				p.l.Error("exiting: disk full", "path", d.Path, "free", diskfull.Bytes(d.Free), "err", msg, "status", 1)
				exit := p.exit
				if exit == nil {
					exit = os.Exit
				}
				exit(1)
			}
		}
	}
	p.l.Error("pebble fatal error", "msg", msg)
	panic("localstore: pebble: " + msg)
}
