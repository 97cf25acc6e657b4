package seglog

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sort"
)

// badRecord is a record that scan could not read.
type badRecord struct {
	off  int64  // where the record starts
	what string // what is wrong with it
	// torn: it runs to the end of the file, a write that never completed
	// (see the package doc); otherwise it is corruption.
	torn bool
}

// load reads every segment, oldest first, and rebuilds the index. A torn
// tail is cut off: in the newest segment always; in an older one only
// without sync, together with every later segment. Anything else that
// cannot be read is corruption, returned before anything is changed.
func (s *Store) load() error {
	ids, err := s.segmentIDs()
	if err != nil {
		return err
	}
	for i, id := range ids {
		seg, bad, err := s.loadSegment(id)
		if err != nil {
			return err
		}
		s.cur = seg
		s.nextID = id + 1
		if bad == nil {
			continue
		}
		later := ids[i+1:]
		switch {
		case len(later) == 0:
			err = s.cutNewest(seg, bad)
		case !bad.torn:
			err = corrupt(seg, bad, "")
		case s.sync:
			err = corrupt(seg, bad, fmt.Sprintf(" (a torn tail, but %d newer segments follow, and in strict mode a segment is fsynced before the next is started)", len(later)))
		default:
			err = s.cutOlder(seg, bad, later)
			s.nextID = ids[len(ids)-1] + 1
		}
		if err != nil {
			return err
		}
		break
	}
	s.keys = s.keys[:0]
	for k := range s.index {
		s.keys = append(s.keys, k)
	}
	sort.Strings(s.keys)
	s.compactDue = true
	return nil
}

// loadSegment opens segment id and scans it into the index.
func (s *Store) loadSegment(id uint64) (*segment, *badRecord, error) {
	f, err := os.OpenFile(s.segPath(id), os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("seglog: %w", err)
	}
	// Whether an earlier process fsynced what it wrote is unknown.
	seg := &segment{id: id, f: f, dirty: true}
	s.segs[id] = seg
	_, bad, err := s.scan(seg, 0)
	return seg, bad, err
}

func corrupt(seg *segment, bad *badRecord, more string) error {
	return fmt.Errorf("seglog: corrupt segment %s at offset %d: %s%s", seg.f.Name(), bad.off, bad.what, more)
}

// cutNewest truncates the newest segment at a torn tail, or returns the
// corruption, changing nothing.
func (s *Store) cutNewest(seg *segment, bad *badRecord) error {
	if !bad.torn {
		return corrupt(seg, bad, "")
	}
	if err := seg.f.Truncate(bad.off); err != nil {
		return fmt.Errorf("seglog: cut the torn tail off %s at %d: %w", seg.f.Name(), bad.off, err)
	}
	seg.size = bad.off
	s.log.Warn("seglog: cut torn tail", "file", seg.f.Name(), "offset", bad.off, "reason", bad.what, "segmentsDropped", 0)
	return nil
}

// cutOlder handles a torn tail in a segment that is not the newest, without
// sync (D6): the later segments are removed, newest first, then seg is
// truncated at the tear, each step durable before the next, so that a
// crash in between leaves the tear to be found again. seg becomes the
// newest segment.
func (s *Store) cutOlder(seg *segment, bad *badRecord, later []uint64) error {
	for i := len(later) - 1; i >= 0; i-- {
		if err := os.Remove(s.segPath(later[i])); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("seglog: drop the segments after the torn tail of %s at %d: %w", seg.f.Name(), bad.off, err)
		}
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("seglog: drop the segments after the torn tail of %s at %d: %w", seg.f.Name(), bad.off, err)
	}
	if err := seg.f.Truncate(bad.off); err != nil {
		return fmt.Errorf("seglog: cut the torn tail off %s at %d: %w", seg.f.Name(), bad.off, err)
	}
	seg.size = bad.off
	if err := s.syncSegment(seg); err != nil {
		return err
	}
	s.log.Warn("seglog: cut torn tail", "file", seg.f.Name(), "offset", bad.off, "reason", bad.what,
		"segmentsDropped", len(later))
	return nil
}

// scan reads seg's records from off on into the index and returns the keys
// it put and the first record it could not read, if any; seg.size is then
// that record's offset, else the end of the last record.
func (s *Store) scan(seg *segment, off int64) ([]string, *badRecord, error) {
	prefix, err := s.keyPrefix()
	if err != nil {
		return nil, nil, fmt.Errorf("seglog: %w", err)
	}
	fi, err := seg.f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("seglog: %w", err)
	}
	end := fi.Size()
	if _, err := seg.f.Seek(off, io.SeekStart); err != nil {
		return nil, nil, fmt.Errorf("seglog: %w", err)
	}
	r := bufio.NewReaderSize(seg.f, 1<<20)
	var added []string
	// bad classifies the record at off; toEnd says whether it runs to the
	// end of the file by its header; zeroAfter is where the rest of the
	// file must be all zeros for it to be torn: the end of the extent its
	// length claims (a torn write leaves zeros where it did not reach,
	// the length field included, so a torn length is never larger than
	// the real one), or off when the length cannot be trusted.
	bad := func(what string, toEnd bool, zeroAfter int64) ([]string, *badRecord, error) {
		seg.size = off
		b := &badRecord{off: off, what: what, torn: toEnd}
		if !b.torn {
			zero, err := zeroFrom(seg.f, zeroAfter, end)
			if err != nil {
				return added, nil, fmt.Errorf("seglog: read %s: %w", seg.f.Name(), err)
			}
			b.torn = zero
		}
		return added, b, nil
	}
	hdr := make([]byte, recordHeader)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return bad("a record header is cut short", true, off)
			}
			return added, nil, fmt.Errorf("seglog: read %s: %w", seg.f.Name(), err)
		}
		n := binary.BigEndian.Uint32(hdr)
		sum := binary.BigEndian.Uint32(hdr[4:])
		claimedEnd := off + recordHeader + int64(n)
		reachesEnd := claimedEnd >= end
		if n > maxRecord {
			return bad(fmt.Sprintf("a record says %d bytes, above the record limit", n), false, off)
		}
		if n < bodyHeader {
			return bad(fmt.Sprintf("a record says %d bytes", n), reachesEnd, claimedEnd)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return bad("a record is cut short", true, off)
			}
			return added, nil, fmt.Errorf("seglog: read %s: %w", seg.f.Name(), err)
		}
		if crc32.Checksum(body, castagnoli) != sum {
			return bad("a record fails its checksum", reachesEnd, claimedEnd)
		}
		seq := binary.BigEndian.Uint64(body[1:])
		key := prefix + padSeq(seq)
		switch body[0] {
		case kindPut:
			if old, ok := s.index[key]; ok {
				dropLive(old) // a relocated copy supersedes the original
			}
			l := loc{seg: seg, off: off + recordHeader + bodyHeader, length: int(n) - bodyHeader}
			s.index[key] = l
			addLive(l)
			added = append(added, key)
		case kindDelete:
			if old, ok := s.index[key]; ok {
				dropLive(old)
				delete(s.index, key)
			}
		default:
			// Complete and checksummed: not a torn write.
			return bad(fmt.Sprintf("a record has the unknown kind %d", body[0]), false, off)
		}
		off += recordHeader + int64(n)
	}
	seg.size = off
	return added, nil, nil
}

// zeroFrom reports whether every byte of f from off to end is zero.
func zeroFrom(f *os.File, off, end int64) (bool, error) {
	buf, zeros := make([]byte, 64<<10), make([]byte, 64<<10)
	for off < end {
		n := int(min(int64(len(buf)), end-off))
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return false, err
		}
		if !bytes.Equal(buf[:n], zeros[:n]) {
			return false, nil
		}
		off += int64(n)
	}
	return true, nil
}
