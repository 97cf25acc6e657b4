// Package fs is a blob.Store in a directory on local disk, used by
// `dex-server-zd dev` and `local` and by the fs backend of `serve`.
//
// Each key is a file at the key's path under the root. A file starts with a
// 20-byte header (the magic "DXF1" and a random 16-byte version) followed by
// the data, so versions never repeat, not even after a delete and
// re-creation.
//
// Conditional writes are safe for several processes sharing the directory:
//
//   - PutIfAbsent writes a temporary file and renames it into place with
//     RENAME_NOREPLACE (or hard-links it where the filesystem lacks that);
//     either fails with EEXIST when the key exists, atomically.
//   - PutIfMatch and Delete run under an exclusive flock on <root>/.lock (and
//     an in-process mutex): read the current version, compare, rename a
//     temporary file over the key.
//
// In Strict mode every write fsyncs the file before it is linked or renamed
// into place and then fsyncs the directory, and every directory on the
// key's path from the root down is durable (its parent fsynced after it
// existed) before the write returns, so a returned write survives a host
// crash or power loss. A directory is synced even when it already existed:
// another writer or process may have created it and not synced it yet.
// Each Store remembers the directories it has synced, so only the first
// write under a directory pays for them. ProcessCrashSafe skips the fsyncs:
// the write survives a process kill but a host crash may lose it.
//
// A key cannot be both an object and a directory (say "a" and "a/b"); the
// layouts of the log and the lease never need that.
package fs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dexzd/dexzd/internal/blob"
)

// Mode is the durability of writes.
type Mode int

const (
	// Strict fsyncs the file and its directory before a write returns.
	Strict Mode = iota
	// ProcessCrashSafe skips fsync: a write survives a process kill, not a
	// host crash or power loss.
	ProcessCrashSafe
)

// String returns the configuration name of the mode.
func (m Mode) String() string {
	if m == ProcessCrashSafe {
		return "processCrashSafe"
	}
	return "strict"
}

const (
	magic      = "DXF1"
	headerSize = len(magic) + 16
	tmpDir     = ".tmp"
	lockFile   = ".lock"
)

// Stats counts the store's requests and fsyncs.
type Stats struct {
	Gets, Puts, Lists, Deletes, Fsyncs uint64
}

// Store is a directory-backed blob.Store.
type Store struct {
	root string
	mode Mode
	// syncPrefix, when set, is a prefix of keys written as in Strict mode
	// whatever the mode (SyncUnder).
	syncPrefix string

	mu   sync.Mutex // serialises PutIfMatch and Delete in this process
	lock *os.File   // flock'ed across processes under mu

	// durable holds, in Strict mode, the directories (the root and below)
	// whose entry in their parent this store has made durable: it fsynced
	// the parent after seeing the directory exist, and every ancestor is
	// in the set too. It only saves fsyncs; it never stands for "the
	// directory already existed" (another writer may have created it and
	// not synced it yet). The store never removes directories, so an entry
	// stays valid.
	dirMu   sync.Mutex
	durable map[string]bool

	gets, puts, lists, deletes, fsyncs atomic.Uint64

	// beforeSync, when set (by tests, before the store is used), is called
	// with the path of every file or directory just before it is fsynced.
	beforeSync func(path string)
}

var _ blob.Store = (*Store)(nil)

// Option configures a store at Open.
type Option func(*Store)

// SyncUnder makes the writes of keys under prefix durable (fsynced as in
// Strict mode, the root's entry included) in any mode. In ProcessCrashSafe
// mode the keys a durable record refers to must not be lost by a host crash
// that the record survives: the value objects (wal.Values) are written so,
// before the records that name them, and cost one fsync each.
func SyncUnder(prefix string) Option { return func(s *Store) { s.syncPrefix = prefix } }

// strict reports whether a write of key fsyncs.
func (s *Store) strict(key string) bool {
	return s.mode == Strict || (s.syncPrefix != "" && strings.HasPrefix(key, s.syncPrefix))
}

// Open opens (creating if needed) the store rooted at dir.
func Open(dir string, mode Mode, opts ...Option) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open fs store: directory is empty")
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open fs store %s: %w", dir, err)
	}
	s := &Store{root: root, mode: mode, durable: map[string]bool{}}
	for _, o := range opts {
		o(s)
	}
	if err := s.openRoot(); err != nil {
		return nil, fmt.Errorf("open fs store %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(root, tmpDir), 0o755); err != nil {
		return nil, fmt.Errorf("open fs store %s: %w", dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(root, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open fs store %s: %w", dir, err)
	}
	s.lock = lock
	return s, nil
}

// openRoot creates the root directory if needed. In Strict mode it then
// makes the root's entry durable, whoever created it: it fsyncs the parent
// of every directory it created on the way (top down) and the root's
// parent, so the root starts out in the durable set.
func (s *Store) openRoot() error {
	var created []string // top down
	for d := s.root; ; {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		created = append([]string{d}, created...)
		up := filepath.Dir(d)
		if up == d {
			break
		}
		d = up
	}
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		return err
	}
	if s.mode != Strict && s.syncPrefix == "" {
		return nil
	}
	for _, d := range created {
		if d == s.root {
			break // synced below
		}
		if err := s.syncDir(filepath.Dir(d), true); err != nil {
			return err
		}
	}
	if up := filepath.Dir(s.root); up != s.root {
		if err := s.syncDir(up, true); err != nil {
			return err
		}
	}
	s.durable[s.root] = true
	return nil
}

// Dir returns the store's root directory.
func (s *Store) Dir() string { return s.root }

// Stats returns request and fsync counts since Open.
func (s *Store) Stats() Stats {
	return Stats{
		Gets: s.gets.Load(), Puts: s.puts.Load(), Lists: s.lists.Load(),
		Deletes: s.deletes.Load(), Fsyncs: s.fsyncs.Load(),
	}
}

// Fsyncs returns the number of fsyncs since Open (0 unless Strict), for
// metrics: an fsync is the costly part of a write on most disks.
func (s *Store) Fsyncs() uint64 { return s.fsyncs.Load() }

func (s *Store) path(key string) string { return filepath.Join(s.root, filepath.FromSlash(key)) }

// classify turns an OS error into a classified blob error.
func classify(op, key string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return blob.NotFound(op, key)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS),
		errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENAMETOOLONG),
		// A full disk does not empty itself within a retry's deadline:
		// the process stops at once (exit 1) and says so.
		errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return blob.Permanent(op, key, err)
	default:
		return blob.Transient(op, key, err)
	}
}

func begin(ctx context.Context, op, key string) error {
	if err := blob.CheckedKey(op, key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return blob.Transient(op, key, err)
	}
	return nil
}

// readVersion returns the data and version of the file at p.
func readVersion(p string) ([]byte, blob.Version, error) {
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, "", err
	}
	if len(raw) < headerSize || !bytes.Equal(raw[:len(magic)], []byte(magic)) {
		return nil, "", fmt.Errorf("file %s has no %s header: %w", p, magic, errCorrupt)
	}
	return raw[headerSize:], blob.Version(hex.EncodeToString(raw[len(magic):headerSize])), nil
}

var errCorrupt = errors.New("corrupt object file")

// Get implements blob.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, blob.Version, error) {
	if err := begin(ctx, blob.OpGet, key); err != nil {
		return nil, "", err
	}
	s.gets.Add(1)
	data, v, err := readVersion(s.path(key))
	switch {
	case errors.Is(err, syscall.EISDIR):
		return nil, "", blob.NotFound(blob.OpGet, key)
	case errors.Is(err, errCorrupt):
		return nil, "", blob.Permanent(blob.OpGet, key, err)
	case err != nil:
		return nil, "", classify(blob.OpGet, key, err)
	}
	return data, v, nil
}

// writeTemp writes header and data to a new temporary file, fsyncing it if
// strict, and returns its path and version.
func (s *Store) writeTemp(data []byte, strict bool) (string, blob.Version, error) {
	var id [16]byte
	_, _ = rand.Read(id[:])
	f, err := os.CreateTemp(filepath.Join(s.root, tmpDir), "put-*")
	if err != nil {
		return "", "", err
	}
	name := f.Name()
	buf := make([]byte, 0, headerSize+len(data))
	buf = append(append(append(buf, magic...), id[:]...), data...)
	if _, err = f.Write(buf); err == nil && strict {
		s.fsyncs.Add(1)
		if s.beforeSync != nil {
			s.beforeSync(name)
		}
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", "", err
	}
	return name, blob.Version(hex.EncodeToString(id[:])), nil
}

// syncDir fsyncs a directory if strict.
func (s *Store) syncDir(dir string, strict bool) error {
	if !strict {
		return nil
	}
	s.fsyncs.Add(1)
	if s.beforeSync != nil {
		s.beforeSync(dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// ensureDirs creates dir (the root or a directory below it) and its missing
// parents. In Strict mode it also makes every directory on the way durable
// before it returns, from the root down, whether this store, another store
// or another process created them: for each directory not yet in the
// durable set it fsyncs the parent once the directory exists. A directory
// that already existed is synced all the same, since its creator may not
// have synced its parent yet; only the durable set, of directories this
// store itself synced, lets a later write skip those fsyncs.
func (s *Store) ensureDirs(dir string, strict bool) error {
	if !strict {
		return os.MkdirAll(dir, 0o755)
	}
	rel, err := filepath.Rel(s.root, dir)
	if err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("directory %s is not below the store root %s", dir, s.root)
	}
	if rel == "." {
		return nil // the root: durable since Open
	}
	parent := s.root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		d := filepath.Join(parent, part)
		if !s.isDurable(d) {
			if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if err := s.syncDir(parent, true); err != nil {
				return err
			}
			s.dirMu.Lock()
			s.durable[d] = true
			s.dirMu.Unlock()
		}
		parent = d
	}
	return nil
}

func (s *Store) isDurable(dir string) bool {
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	return s.durable[dir]
}

// PutIfAbsent implements blob.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) (blob.Version, error) {
	const op = blob.OpPutIfAbsent
	if err := begin(ctx, op, key); err != nil {
		return "", err
	}
	s.puts.Add(1)
	p, strict := s.path(key), s.strict(key)
	if err := s.ensureDirs(filepath.Dir(p), strict); err != nil {
		return "", classify(op, key, err)
	}
	tmp, v, err := s.writeTemp(data, strict)
	if err != nil {
		return "", classify(op, key, err)
	}
	if err := placeNew(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Content-addressed callers (wal.Values) take "the key exists"
			// for "these bytes are durable": its writer may not have
			// fsynced it yet (it is between the rename and its fsyncs,
			// or died there), so make the entry durable before saying so.
			if err := s.syncExisting(p, strict); err != nil {
				return "", classify(op, key, err)
			}
			return "", blob.Precondition(op, key)
		}
		return "", classify(op, key, err)
	}
	if err := s.syncDir(filepath.Dir(p), strict); err != nil {
		return "", classify(op, key, err)
	}
	return v, nil
}

// syncExisting fsyncs, if strict, the file at p that another writer
// placed and its directory.
func (s *Store) syncExisting(p string, strict bool) error {
	if !strict {
		return nil
	}
	s.fsyncs.Add(1)
	if s.beforeSync != nil {
		s.beforeSync(p)
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // deleted since: the key existed, nothing to make durable
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return s.syncDir(filepath.Dir(p), true)
}

// placeNew moves the temporary file tmp to p, failing with an error that
// matches fs.ErrExist when p exists; tmp is gone afterwards either way. It
// renames with RENAME_NOREPLACE (atomic, like a hard link), so the
// temporary inode becomes the object and no unlink follows: one syscall
// and one directory change fewer per write. A filesystem without
// RENAME_NOREPLACE gets a hard link and the removal of tmp instead.
func placeNew(tmp, p string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, p, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.ENOTSUP):
		defer os.Remove(tmp)
		return os.Link(tmp, p)
	default:
		_ = os.Remove(tmp)
		return &os.LinkError{Op: "renameat2", Old: tmp, New: p, Err: err}
	}
}

// locked runs fn holding the in-process mutex and the cross-process flock.
func (s *Store) locked(fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := unix.Flock(int(s.lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	defer unix.Flock(int(s.lock.Fd()), unix.LOCK_UN) //nolint:errcheck // closing the fd would unlock too
	return fn()
}

// PutIfMatch implements blob.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, v blob.Version) (blob.Version, error) {
	const op = blob.OpPutIfMatch
	if err := begin(ctx, op, key); err != nil {
		return "", err
	}
	s.puts.Add(1)
	p, strict := s.path(key), s.strict(key)
	var nv blob.Version
	err := s.locked(func() error {
		_, cur, err := readVersion(p)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EISDIR):
			return blob.Precondition(op, key)
		case errors.Is(err, errCorrupt):
			return blob.Permanent(op, key, err)
		case err != nil:
			return classify(op, key, err)
		case cur != v:
			return blob.Precondition(op, key)
		}
		tmp, tv, err := s.writeTemp(data, strict)
		if err != nil {
			return classify(op, key, err)
		}
		if err := os.Rename(tmp, p); err != nil {
			_ = os.Remove(tmp)
			return classify(op, key, err)
		}
		// The key's directories may be another writer's, not yet synced.
		if err := s.ensureDirs(filepath.Dir(p), strict); err != nil {
			return classify(op, key, err)
		}
		if err := s.syncDir(filepath.Dir(p), strict); err != nil {
			return classify(op, key, err)
		}
		nv = tv
		return nil
	})
	return nv, err
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	const op = blob.OpDelete
	if err := begin(ctx, op, key); err != nil {
		return err
	}
	s.deletes.Add(1)
	p := s.path(key)
	return s.locked(func() error {
		err := os.Remove(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return classify(op, key, err)
		}
		if err := s.syncDir(filepath.Dir(p), s.strict(key)); err != nil {
			return classify(op, key, err)
		}
		return nil
	})
}

// List implements blob.Store. It walks the deepest directory that the prefix
// names completely, then sorts, because directory order is not key order
// ("a-b" sorts before "a/x").
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]string, error) {
	const op = blob.OpList
	if err := ctx.Err(); err != nil {
		return nil, blob.Transient(op, prefix, err)
	}
	s.lists.Add(1)
	base := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		if err := blob.CheckKey(prefix[:i]); err != nil {
			return nil, blob.Permanent(op, prefix, err)
		}
		base = s.path(prefix[:i])
	}
	var keys []string
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != base {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		if k := filepath.ToSlash(rel); strings.HasPrefix(k, prefix) && k > startAfter {
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil {
		return nil, classify(op, prefix, err)
	}
	slices.Sort(keys)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	return keys, nil
}

// Close implements blob.Store.
func (s *Store) Close() error { return s.lock.Close() }
