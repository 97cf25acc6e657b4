package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
)

// Protocol constants. doc.go explains each one.
const (
	// DefaultDuration is the lease duration when Config.Duration is zero.
	DefaultDuration = 10 * time.Second
	// MinDuration is the shortest lease duration Acquire accepts.
	MinDuration = time.Second
	// DefaultPollInterval is how often a waiting acquirer re-reads a lease
	// that another process holds, when Config.PollInterval is zero.
	DefaultPollInterval = time.Second
	// ExpiryMargin is added to a lease's period before a reader treats it
	// as expired; it covers the clock difference between hosts.
	ExpiryMargin = time.Second
	// CutoffMargin is how long before the end of its current lease period a
	// holder stops trying to renew.
	CutoffMargin = 100 * time.Millisecond
	// MinAttemptTimeout and MaxAttemptTimeout clamp the cut-off of a single
	// store request (Duration/6).
	MinAttemptTimeout = time.Second
	MaxAttemptTimeout = 5 * time.Second
	// FormatVersion is the version field of the lease object's JSON.
	FormatVersion = 1
)

// Retry backoff between renewal attempts: starts at backoffStart and doubles
// up to backoffMax. It is deterministic; the attempt schedule in doc.go
// relies on that.
const (
	backoffStart = 100 * time.Millisecond
	backoffMax   = time.Second
)

// RenewalInterval returns how long after its last successful renewal a
// holder renews: one third of the duration.
func RenewalInterval(d time.Duration) time.Duration { return d / 3 }

// AttemptTimeout returns the cut-off of one store request made for the lease
// (a renewal attempt, an acquisition write, a read): Duration/6 clamped to
// [MinAttemptTimeout, MaxAttemptTimeout]. The last renewal attempt before the
// renewal cutoff is exempt and may run up to the cutoff.
func AttemptTimeout(d time.Duration) time.Duration {
	return min(max(d/6, MinAttemptTimeout), MaxAttemptTimeout)
}

// Record is the content of the lease object.
type Record struct {
	// NodeID is the logical node the lease belongs to.
	NodeID string
	// Epoch is raised by exactly one on every acquisition; it fences log
	// writes of earlier holders.
	Epoch uint64
	// Holder is the process ID of the process that wrote the record; it is
	// unique per process start (see NewProcessID).
	Holder string
	// Duration is the holder's lease duration. Readers use it, not their
	// own configuration, to compute the expiry.
	Duration time.Duration
	// RenewedAt is the holder's wall-clock time when it sent this write.
	RenewedAt time.Time
	// Released is set by a graceful release: the lease is free at once.
	Released bool
	// Write numbers the writes of one holder (1 for the acquisition, then
	// one more for each renewal attempt and release attempt). With Holder
	// and Epoch it lets a holder recognise a write of its own whose reply it
	// never saw.
	Write uint64
}

// ExpiresAt returns the wall-clock time from which a reader treats the lease
// as expired: RenewedAt + Duration + ExpiryMargin.
func (r Record) ExpiresAt() time.Time { return r.RenewedAt.Add(r.Duration + ExpiryMargin) }

// ExpiredAt reports whether a reader whose wall clock shows now treats the
// lease as expired: now is at or after ExpiresAt. It ignores Released.
func (r Record) ExpiredAt(now time.Time) bool { return !now.Before(r.ExpiresAt()) }

// AvailableAt reports whether another process may acquire the lease at now:
// it was released or has expired.
func (r Record) AvailableAt(now time.Time) bool { return r.Released || r.ExpiredAt(now) }

// State is a lease's state as a reader sees it.
type State int

// The states of a lease as a reader sees it. StateAbsent is what a reader
// sees when Read returns an error matching blob.ErrNotFound.
const (
	StateAbsent State = iota
	StateHeld
	StateReleased
	StateExpired
)

func (s State) String() string {
	switch s {
	case StateAbsent:
		return "absent"
	case StateHeld:
		return "held"
	case StateReleased:
		return "released"
	case StateExpired:
		return "expired"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// StateAt returns the record's state for a reader whose wall clock shows now.
func (r Record) StateAt(now time.Time) State {
	switch {
	case r.Released:
		return StateReleased
	case r.ExpiredAt(now):
		return StateExpired
	default:
		return StateHeld
	}
}

// sameWrite reports whether r is the very write w (same holder, epoch and
// write number).
func (r Record) sameWrite(w Record) bool {
	return r.Holder == w.Holder && r.Epoch == w.Epoch && r.Write == w.Write
}

// recordJSON is the stored form. Field names are part of the format.
type recordJSON struct {
	Version    int    `json:"version"`
	NodeID     string `json:"nodeId"`
	Epoch      uint64 `json:"epoch"`
	Holder     string `json:"holder"`
	DurationMs int64  `json:"durationMs"`
	RenewedAt  string `json:"renewedAt"`
	Released   bool   `json:"released"`
	Write      uint64 `json:"write"`
}

// Encode returns the stored form of r: JSON with a version field. RenewedAt
// is written in UTC with nanoseconds, Duration in whole milliseconds.
func (r Record) Encode() []byte {
	data, err := json.Marshal(recordJSON{
		Version:    FormatVersion,
		NodeID:     r.NodeID,
		Epoch:      r.Epoch,
		Holder:     r.Holder,
		DurationMs: r.Duration.Milliseconds(),
		RenewedAt:  r.RenewedAt.UTC().Format(time.RFC3339Nano),
		Released:   r.Released,
		Write:      r.Write,
	})
	if err != nil {
		panic("lease: encode record: " + err.Error()) // strings and numbers only
	}
	return data
}

// Decode parses the stored form of a lease. It rejects unknown versions and
// records missing a required field.
func Decode(data []byte) (Record, error) {
	var j recordJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return Record{}, err
	}
	switch {
	case j.Version != FormatVersion:
		return Record{}, fmt.Errorf("unsupported version %d (this build reads %d)", j.Version, FormatVersion)
	case j.NodeID == "":
		return Record{}, errors.New("nodeId is empty")
	case j.Epoch == 0:
		return Record{}, errors.New("epoch is 0")
	case j.Holder == "":
		return Record{}, errors.New("holder is empty")
	case j.DurationMs <= 0:
		return Record{}, fmt.Errorf("durationMs is %d", j.DurationMs)
	}
	at, err := time.Parse(time.RFC3339Nano, j.RenewedAt)
	if err != nil {
		return Record{}, fmt.Errorf("renewedAt: %w", err)
	}
	return Record{
		NodeID:    j.NodeID,
		Epoch:     j.Epoch,
		Holder:    j.Holder,
		Duration:  time.Duration(j.DurationMs) * time.Millisecond,
		RenewedAt: at,
		Released:  j.Released,
		Write:     j.Write,
	}, nil
}

// Read reads and decodes the lease at key. An absent lease is an error
// matching blob.ErrNotFound; a malformed one is an error matching
// blob.ErrPermanent that names the key. Other store errors pass through
// (they name the key too).
func Read(ctx context.Context, store blob.Store, key string) (Record, blob.Version, error) {
	data, v, err := store.Get(ctx, key)
	if err != nil {
		return Record{}, "", err
	}
	r, err := Decode(data)
	if err != nil {
		return Record{}, "", blob.Permanent(blob.OpGet, key, fmt.Errorf("malformed lease object: %w", err))
	}
	return r, v, nil
}

// NewProcessID returns an ID that is unique per process start:
// hostname/pid/random.
func NewProcessID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b[:])
}

// wall strips the monotonic reading off t for storing it.
func wall(t time.Time) time.Time { return t.Round(0).UTC() }
