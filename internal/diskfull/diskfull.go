// Package diskfull recognises a full disk (ENOSPC) in an error and
// describes it the one way the process reports it: the path whose write
// failed and the space left on its file system (statfs).
//
// A full disk is not a bug and not a usage error: the process stops with
// exit status 1 and one line, "disk full", naming the path and the free
// space; a restart on a disk that is still full fails the same way before
// doing anything else. Stores check the space they need before a write
// that cannot fail cleanly (Pebble panics when a WAL write fails), with
// Reserve.
package diskfull

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Error is a write refused for lack of space: by the file system (Err
// matches syscall.ENOSPC) or by a check of the free space before the
// write (Need is the space it needed).
type Error struct {
	Path string // the file or directory whose write failed
	Free uint64 // bytes available on its file system when checked
	Need uint64 // bytes the check asked for; 0 when the write failed
	Err  error  // the file system's error, if any
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("disk full: %s: %s free", e.Path, Bytes(e.Free))
	if e.Need > 0 {
		msg += fmt.Sprintf(", %s needed", Bytes(e.Need))
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes every Error match syscall.ENOSPC.
func (e *Error) Is(target error) bool { return target == syscall.ENOSPC }

// From returns the *Error err holds, building one when err holds
// syscall.ENOSPC without one (the path from the *fs.PathError, the free
// space measured now); nil when err is not a full disk.
func From(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if !errors.Is(err, syscall.ENOSPC) {
		return nil
	}
	e = &Error{Err: err}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		e.Path = pe.Path
	}
	e.Free, _ = Free(e.Path)
	return e
}

// Free returns the bytes available to this process on the file system of
// path, or of its nearest existing parent.
func Free(path string) (uint64, error) {
	if path == "" {
		path = "."
	}
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(path, &st)
		if err == nil {
			return st.Bavail * uint64(st.Bsize), nil
		}
		parent := filepath.Dir(path)
		if !errors.Is(err, os.ErrNotExist) || parent == path {
			return 0, fmt.Errorf("statfs %s: %w", path, err)
		}
		path = parent
	}
}

// Reserve returns an *Error unless path's file system has need bytes
// free. A failed statfs is not a full disk (nil).
func Reserve(path string, need uint64) error {
	free, err := Free(path)
	if err != nil || free >= need {
		return nil
	}
	return &Error{Path: path, Free: free, Need: need}
}

// Bytes renders n bytes for people: 0 B, 512 B, 3.2 KiB, 24.0 MiB.
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
