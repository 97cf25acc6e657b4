package wal

import (
	"errors"
	"fmt"
)

// Outcomes callers branch on; test with errors.Is.
var (
	// ErrFenced: the log holds a batch written by a higher epoch at a
	// sequence number this process needs. The process lost its lease and
	// must stop (exit 1) without acknowledging anything further (G4).
	ErrFenced = errors.New("fenced by a higher epoch")

	// ErrLogWriteTimeout: the durable store did not accept a batch within
	// LogWriteLimit of its first attempt (L10). The process must exit 1.
	ErrLogWriteTimeout = errors.New("log write not accepted within the limit")

	// ErrLogConflict: a sequence number holds a batch that neither this
	// writer wrote nor a higher epoch fenced with (a lower epoch after our
	// fence, or another batch of our own epoch). It means two writers share
	// an epoch or the log was tampered with; the process must stop.
	ErrLogConflict = errors.New("log conflict")

	// ErrStopped: the writer was stopped (Stop or the cancellation of the
	// context given to Start) before the record was written.
	ErrStopped = errors.New("log writer stopped")

	// ErrRecordTooLarge: a record is above WriterConfig.MaxRecordBytes.
	ErrRecordTooLarge = errors.New("record too large for one batch")

	// ErrNoBatch: the follower's next batch is not in the store yet.
	ErrNoBatch = errors.New("no batch yet")

	// ErrTruncated: the batch a reader needs was deleted by log truncation;
	// the reader must restore from the newest snapshot (OpenLatest).
	ErrTruncated = errors.New("log truncated past the reader's position")

	// ErrLocalAhead: Fence was asked to go on after a batch the log does
	// not hold (and truncation did not delete): the caller's local store
	// applied writes the log lost, as a host crash can do to a log written
	// without fsync (dev's processCrashSafe). The local store must be
	// rebuilt from the log; fencing after it would leave a gap.
	ErrLocalAhead = errors.New("the local store is ahead of the log")

	// ErrConditionalWritesIgnored: the startup probe found that the durable
	// store does not enforce create-if-absent or replace-if-unchanged (G6).
	ErrConditionalWritesIgnored = errors.New("the durable store ignores conditional writes (If-None-Match/If-Match)")

	// ErrCorrupt matches every *CorruptError.
	ErrCorrupt = errors.New("corrupt object")
)

// CorruptError reports an object of the log (a batch, a snapshot, the
// manifest) that cannot be decoded or that contradicts its key. Corruption is
// never skipped: the reader stops and names the key.
type CorruptError struct {
	Key    string // the object's key
	Reason string // what is wrong, for people
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt object %q: %s", e.Key, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func corrupt(key, format string, args ...any) error {
	return &CorruptError{Key: key, Reason: fmt.Sprintf(format, args...)}
}
