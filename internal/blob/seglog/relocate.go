package seglog

import (
	"cmp"
	"fmt"
	"slices"
)

// relocateFraction: a segment that is not the active one is relocated
// when its live bytes are at most 1/relocateFraction of its size.
const relocateFraction = 8

// tidy runs compact when it is due. A failure changes nothing the caller
// must do (the operation that ran before it is complete, and the
// segment stays as it was); it is logged and compact is tried again after
// the next delete or put.
func (s *Store) tidy() {
	if err := s.compact(); err != nil {
		s.log.Warn("seglog: relocation failed; will retry", "err", err)
	}
}

// compact removes the segments other than the active one that have no
// live puts, and relocates the live puts of those whose live bytes are at
// most 1/relocateFraction of their size (see the package doc).
func (s *Store) compact() error {
	if !s.compactDue {
		return nil
	}
	s.compactDue = false
	var empty, move []*segment
	for _, seg := range s.segs {
		switch {
		case seg == s.cur:
		case seg.live == 0:
			empty = append(empty, seg)
		case seg.liveBytes*relocateFraction <= seg.size:
			move = append(move, seg)
		}
	}
	if len(empty) > 0 {
		// A segment may have no live puts because later copies of them
		// (a relocation, by us or by a process that was killed before
		// its fsync) supersede them: those copies must be on disk before
		// the originals go, or a power loss loses both.
		if err := s.syncDirty(); err != nil {
			s.compactDue = true
			return fmt.Errorf("seglog: remove empty segments: %w", err)
		}
		for _, seg := range empty {
			s.removeSegment(seg)
		}
	}
	if len(move) == 0 {
		return nil
	}
	slices.SortFunc(move, func(a, b *segment) int { return cmp.Compare(a.id, b.id) })
	if err := s.relocate(move); err != nil {
		s.compactDue = true
		return err
	}
	return nil
}

// relocate copies the live puts of the segments in from into the active
// segment, makes the copies durable and removes the segments.
func (s *Store) relocate(from []*segment) error {
	// No torn tail, and so no D6 cut, may come before a copy: whatever is
	// not on disk yet, in any segment, goes first.
	if err := s.syncDirty(); err != nil {
		return fmt.Errorf("seglog: relocate: %w", err)
	}
	type rec struct {
		key string
		l   loc
	}
	var recs []rec
	for k, l := range s.index {
		if slices.Contains(from, l.seg) {
			recs = append(recs, rec{k, l})
		}
	}
	slices.SortFunc(recs, func(a, b rec) int {
		return cmp.Or(cmp.Compare(a.l.seg.id, b.l.seg.id), cmp.Compare(a.l.off, b.l.off))
	})
	for _, r := range recs {
		data := make([]byte, r.l.length)
		if _, err := r.l.seg.f.ReadAt(data, r.l.off); err != nil {
			return fmt.Errorf("seglog: relocate %s: %w", r.key, err)
		}
		seq, _ := logSeq(r.key)
		nl, err := s.append(kindPut, seq, data, false)
		if err != nil {
			return fmt.Errorf("seglog: relocate %s: %w", r.key, err)
		}
		// The copy is read from now on; until the old segment is removed
		// either is a valid record of the key.
		dropLive(r.l)
		s.index[r.key] = nl
		addLive(nl)
	}
	if err := s.syncDirty(); err != nil {
		return fmt.Errorf("seglog: relocate: %w", err)
	}
	// A segment started for the copies has a durable directory entry only
	// in strict mode.
	s.fsyncs.Add(1)
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("seglog: relocate: %w", err)
	}
	for _, seg := range from {
		if seg.live == 0 && seg != s.cur {
			s.removeSegment(seg)
		}
	}
	return nil
}

// syncDirty fsyncs every segment written since its last fsync, oldest
// first.
func (s *Store) syncDirty() error {
	var dirty []*segment
	for _, seg := range s.segs {
		if seg.dirty {
			dirty = append(dirty, seg)
		}
	}
	slices.SortFunc(dirty, func(a, b *segment) int { return cmp.Compare(a.id, b.id) })
	for _, seg := range dirty {
		if err := s.syncSegment(seg); err != nil {
			return err
		}
	}
	return nil
}
