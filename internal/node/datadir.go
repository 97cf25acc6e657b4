package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Data directory layout of dev and local:
//
//	DIR/dev.lock        exclusive flock while a process uses DIR (D2)
//	DIR/log/            the durable store (blob fs): lease, manifest, snapshots (D5, D6)
//	DIR/log-segments/   the log batches, appended to segment files (seglog)
//	DIR/state/          the local store
//	DIR/relaxed.unclean present while a relaxed-mode process runs (D7)
const (
	LockFile      = "dev.lock"
	LogDir        = "log"
	SegmentDir    = "log-segments"
	StateDir      = "state"
	RelaxedMarker = "relaxed.unclean"
)

// flock is unix.Flock; tests replace it to simulate a filesystem without
// locks (D4).
var flock = unix.Flock

// ErrDirLocked: another process holds the data directory's lock (D2).
var ErrDirLocked = errors.New("data directory is in use by another process")

// dirLock is the held (or, on a filesystem without locks, unheld) dev.lock.
type dirLock struct {
	f      *os.File
	locked bool
}

// lockDataDir takes an exclusive, non-blocking flock on DIR/dev.lock (D2).
// A lock held by another process is ErrDirLocked naming the file. A
// filesystem that cannot lock returns an unlocked dirLock: the caller warns
// and waits for the lease to expire instead of taking it over (D4).
func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	err = flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		_ = f.Truncate(0)
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		return &dirLock{f: f, locked: true}, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		holder := "another dex-server-zd process"
		b := make([]byte, 20)
		if n, _ := f.ReadAt(b, 0); n > 0 {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n]))); err == nil && pid > 0 {
				holder = fmt.Sprintf("dex-server-zd process %d", pid)
			}
		}
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s is locked by %s; stop it or use another --data-dir", ErrDirLocked, path, holder)
	case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EINVAL):
		return &dirLock{f: f}, nil
	default:
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
}

// release drops the lock.
func (l *dirLock) release() {
	if l.locked {
		_ = flock(int(l.f.Fd()), unix.LOCK_UN)
	}
	_ = l.f.Close()
}

// ErrRelaxedUnclean: the data directory was left by an abrupt exit in
// relaxed mode (D7).
var ErrRelaxedUnclean = errors.New("data directory left by an abrupt exit in relaxed durability mode")

// checkRelaxedMarker refuses a directory whose relaxed-mode process did not
// shut down cleanly (D7).
func checkRelaxedMarker(dir string) error {
	path := filepath.Join(dir, RelaxedMarker)
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%w: %s exists, so acknowledged writes may be lost; delete the data directory %s to start again",
			ErrRelaxedUnclean, path, dir)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("check %s: %w", path, err)
	}
	return nil
}

func writeRelaxedMarker(dir string) error {
	path := filepath.Join(dir, RelaxedMarker)
	if err := os.WriteFile(path, []byte("a dex-server-zd process runs in relaxed durability mode; if it exits abruptly, delete this data directory\n"), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func removeRelaxedMarker(dir string) error {
	if err := os.Remove(filepath.Join(dir, RelaxedMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove relaxed-mode marker: %w", err)
	}
	return nil
}
