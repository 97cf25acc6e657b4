// Package blob defines the durable store: a small key/value interface with
// conditional writes that the lease, the batch log and snapshots are built on.
//
// Every backend (memory, local directory, S3-compatible object storage,
// PostgreSQL) implements Store and passes the conformance suite in
// package blobtest. Errors are classified so that the lease and log rules can
// branch on them:
//
//   - ErrNotFound: the key does not exist (Get only).
//   - ErrPrecondition: a conditional write lost: the key exists (PutIfAbsent)
//     or does not hold the expected version (PutIfMatch).
//   - ErrTransient: the request may have failed or may have landed; retrying
//     may succeed (5xx, throttling, 409 conflicts, timeouts, resets).
//   - ErrPermanent: retrying will not help (permission denied, missing bucket,
//     malformed data); the caller must stop.
//
// A backend returns errors that match exactly one of these with errors.Is.
// Errors of unknown origin are treated as transient by Classify.
package blob

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Version identifies one written state of a key. It is opaque to callers and
// comparable only for equality; a backend never hands out the same version
// for two different writes of a key (deletion and re-creation included), with
// one allowed exception: S3 ETags are content hashes, so two writes of
// identical bytes may share a version, which is harmless because the states
// are then indistinguishable.
type Version string

// Store is the durable store. Implementations are safe for concurrent use.
type Store interface {
	// Get returns the data and version stored at key, or an error matching
	// ErrNotFound. The caller owns the returned slice.
	Get(ctx context.Context, key string) ([]byte, Version, error)

	// PutIfAbsent creates key with data only if it does not exist, and returns
	// the new version. If the key exists it returns an error matching
	// ErrPrecondition and changes nothing. When the call returns a transient
	// error the write may or may not have landed; callers resolve this by
	// reading the key back.
	PutIfAbsent(ctx context.Context, key string, data []byte) (Version, error)

	// PutIfMatch replaces key with data only if its current version is v, and
	// returns the new version. If the key is absent or holds another version
	// it returns an error matching ErrPrecondition and changes nothing.
	PutIfMatch(ctx context.Context, key string, data []byte, v Version) (Version, error)

	// List returns up to limit keys that start with prefix and sort strictly
	// after startAfter (byte order), in ascending byte order. limit <= 0 means
	// no limit.
	List(ctx context.Context, prefix, startAfter string, limit int) ([]string, error)

	// Delete removes key. Deleting a key that does not exist succeeds.
	Delete(ctx context.Context, key string) error

	// Close releases the backend's resources.
	Close() error
}

// Sentinel errors. Backends wrap them in *Error; test with errors.Is.
var (
	ErrNotFound     = errors.New("not found")
	ErrPrecondition = errors.New("precondition failed")
	ErrTransient    = errors.New("transient error")
	ErrPermanent    = errors.New("permanent error")
)

// Error is a classified store error naming the operation and the key.
type Error struct {
	Op   string // "get", "put-if-absent", "put-if-match", "list", "delete"
	Key  string // the key or, for list, the prefix
	Kind error  // one of the sentinel errors
	Err  error  // the underlying cause, may be nil
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("blob %s %q: %v", e.Op, e.Key, e.Kind)
	}
	return fmt.Sprintf("blob %s %q: %v: %v", e.Op, e.Key, e.Kind, e.Err)
}

// Is reports whether target is the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Operation names used in Error.Op.
const (
	OpGet         = "get"
	OpPutIfAbsent = "put-if-absent"
	OpPutIfMatch  = "put-if-match"
	OpList        = "list"
	OpDelete      = "delete"
)

// NotFound returns an error matching ErrNotFound.
func NotFound(op, key string) error { return &Error{Op: op, Key: key, Kind: ErrNotFound} }

// Precondition returns an error matching ErrPrecondition.
func Precondition(op, key string) error { return &Error{Op: op, Key: key, Kind: ErrPrecondition} }

// Transient returns an error matching ErrTransient that wraps cause.
func Transient(op, key string, cause error) error {
	return &Error{Op: op, Key: key, Kind: ErrTransient, Err: cause}
}

// Permanent returns an error matching ErrPermanent that wraps cause.
func Permanent(op, key string, cause error) error {
	return &Error{Op: op, Key: key, Kind: ErrPermanent, Err: cause}
}

// Wrap returns an error matching kind (one of the sentinels; any other
// value counts as ErrTransient) that wraps cause: how a backend reports the
// class it found for one of its errors.
func Wrap(op, key string, kind, cause error) error {
	switch kind {
	case ErrNotFound, ErrPrecondition, ErrPermanent:
		return &Error{Op: op, Key: key, Kind: kind, Err: cause}
	default:
		return Transient(op, key, cause)
	}
}

// Classify returns the sentinel an error matches: ErrNotFound,
// ErrPrecondition, ErrPermanent or ErrTransient. Context cancellation and
// deadline errors, and errors of unknown origin, are transient: the request
// may have landed and a retry may succeed. It returns nil for a nil error.
func Classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return ErrNotFound
	case errors.Is(err, ErrPrecondition):
		return ErrPrecondition
	case errors.Is(err, ErrPermanent):
		return ErrPermanent
	default:
		return ErrTransient
	}
}

// CheckKey validates a key: non-empty, at most 1024 bytes, '/'-separated
// segments that are neither empty nor start with '.', and no NUL or
// backslash. Every backend calls it so that keys mean the same everywhere.
func CheckKey(key string) error {
	if key == "" {
		return errors.New("key is empty")
	}
	if len(key) > 1024 {
		return fmt.Errorf("key is %d bytes long, the limit is 1024", len(key))
	}
	if strings.ContainsAny(key, "\x00\\") {
		return fmt.Errorf("key %q contains a NUL or backslash", key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg[0] == '.' {
			return fmt.Errorf("key %q has an empty segment or one that starts with '.'", key)
		}
	}
	return nil
}

// CheckedKey wraps CheckKey's error as a permanent *Error for op.
func CheckedKey(op, key string) error {
	if err := CheckKey(key); err != nil {
		return Permanent(op, key, err)
	}
	return nil
}
