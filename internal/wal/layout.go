package wal

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dexzd/dexzd/internal/blob"
)

// seqDigits is the width of a zero-padded sequence number in a key: enough
// for every uint64, so that byte order of keys is numeric order.
const seqDigits = 20

// Layout names the objects of one node in the durable store:
//
//	<prefix>nodes/<nodeId>/lease
//	<prefix>nodes/<nodeId>/log/<seq, 20 digits>
//	<prefix>nodes/<nodeId>/snapshots/<nextSeq, 20 digits>
//	<prefix>nodes/<nodeId>/manifest
//	<prefix>nodes/<nodeId>/probe/<random>   (startup probe, deleted after)
//
// The zero value is not usable; call NewLayout. A Layout is a small value,
// safe to copy and share.
type Layout struct {
	node string // "<prefix>nodes/<nodeId>/"
}

// NewLayout returns the layout for nodeID under prefix. A non-empty prefix
// that does not end in '/' gets one ("prod" and "prod/" are the same). The
// node ID must be a single valid key segment (no '/').
func NewLayout(prefix, nodeID string) (Layout, error) {
	if nodeID == "" || strings.Contains(nodeID, "/") {
		return Layout{}, fmt.Errorf("node ID %q must be non-empty and contain no '/'", nodeID)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	l := Layout{node: prefix + "nodes/" + nodeID + "/"}
	// The longest key must be valid for every backend.
	if err := blob.CheckKey(l.SnapshotKey(^uint64(0))); err != nil {
		return Layout{}, fmt.Errorf("layout for prefix %q and node %q: %w", prefix, nodeID, err)
	}
	return l, nil
}

// MustLayout is NewLayout for constants in tests and examples; it panics on
// an invalid prefix or node ID.
func MustLayout(prefix, nodeID string) Layout {
	l, err := NewLayout(prefix, nodeID)
	if err != nil {
		panic(err)
	}
	return l
}

// NodePrefix is the prefix of every key of the node, ending in '/'.
func (l Layout) NodePrefix() string { return l.node }

// LeaseKey is the key of the node's lease object.
func (l Layout) LeaseKey() string { return l.node + "lease" }

// ManifestKey is the key of the snapshot manifest.
func (l Layout) ManifestKey() string { return l.node + "manifest" }

// LogPrefix is the prefix of every log batch key, ending in '/'.
func (l Layout) LogPrefix() string { return l.node + "log/" }

// LogKey is the key of the batch with sequence number seq.
func (l Layout) LogKey(seq uint64) string { return l.LogPrefix() + padSeq(seq) }

// SnapshotPrefix is the prefix of every snapshot key, ending in '/'.
func (l Layout) SnapshotPrefix() string { return l.node + "snapshots/" }

// SnapshotKey is the key of the snapshot that covers the batches below
// nextSeq.
func (l Layout) SnapshotKey(nextSeq uint64) string { return l.SnapshotPrefix() + padSeq(nextSeq) }

// SnapshotPartKey is the key of part i of the snapshot for nextSeq that
// the write attempt named attempt stores (the head, at SnapshotKey, names
// the attempt and its parts).
func (l Layout) SnapshotPartKey(nextSeq uint64, attempt string, i int) string {
	return fmt.Sprintf("%s.%s.%06d", l.SnapshotKey(nextSeq), attempt, i)
}

// ParseSnapshotPartKey returns the sequence number of a snapshot part key,
// or false if key is not one of this layout's snapshot part keys.
func (l Layout) ParseSnapshotPartKey(key string) (uint64, bool) {
	head, rest, ok := strings.Cut(strings.TrimPrefix(key, l.SnapshotPrefix()), ".")
	if !ok || !strings.HasPrefix(key, l.SnapshotPrefix()) || strings.Count(rest, ".") != 1 {
		return 0, false
	}
	return parseSeq(l.SnapshotPrefix()+head, l.SnapshotPrefix())
}

// ProbeKey is the key the startup probe writes and deletes.
func (l Layout) ProbeKey(unique string) string { return l.node + "probe/" + unique }

// ParseLogKey returns the sequence number of a log batch key, or false if
// key is not one of this layout's log keys.
func (l Layout) ParseLogKey(key string) (uint64, bool) {
	return parseSeq(key, l.LogPrefix())
}

// ParseSnapshotKey returns the sequence number of a snapshot key, or false
// if key is not one of this layout's snapshot keys.
func (l Layout) ParseSnapshotKey(key string) (uint64, bool) {
	return parseSeq(key, l.SnapshotPrefix())
}

func padSeq(seq uint64) string {
	s := strconv.FormatUint(seq, 10)
	return strings.Repeat("0", seqDigits-len(s)) + s
}

func parseSeq(key, prefix string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || len(rest) != seqDigits {
		return 0, false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] < '0' || rest[i] > '9' {
			return 0, false
		}
	}
	seq, err := strconv.ParseUint(rest, 10, 64)
	if err != nil {
		return 0, false
	}
	return seq, true
}
