package wal

import (
	"bytes"
	"container/list"
	"hash/maphash"
	"sync"
)

// ValueCache keeps the bytes of the value objects a process wrote or read
// last, up to a budget of bytes, so that a large value's later trips
// through the server cost no store request and no SHA-256 of its bytes:
// the tasks that carry a flow's large input to its worker (a read each),
// the worker's results that echo it (a write each: the same bytes), and the
// client's read of the flow's result.
//
// An object never changes and is never deleted while its node's prefix
// exists, so an entry stays true for the life of the process, across its
// lease periods: a reference in the cache names an object that is durable
// in the store (it was written by Put, which returned once it was, or read
// from the store by Get, which only reads references that durable records
// name). A cache hit in Put therefore skips the write as a retry that finds
// the object does.
//
// Put finds bytes it has seen by a fingerprint (their length and a maphash
// of samples of them, see print) and compares the bytes themselves before
// it trusts the entry: the fingerprint and the comparison of 4 MiB cost a
// fraction of SHA-256, and a fingerprint collision only costs the hash it
// would have cost anyway.
//
// The cache holds the slices it is given; they must not be modified (no
// value's bytes are: requests, tasks and states share them). A nil cache
// keeps nothing.
type ValueCache struct {
	seed maphash.Seed
	max  int

	mu      sync.Mutex
	used    int
	lru     list.List // of *valueEntry, most recently used first
	byRef   map[string]*list.Element
	byPrint map[valuePrint]*list.Element
	stats   ValueCacheStats
}

// ValueCacheStats counts a cache's lookups.
type ValueCacheStats struct {
	// Hits and Misses count Get's and Put's lookups.
	Hits, Misses uint64
	// Bytes is the size of the values held.
	Bytes int
}

type valuePrint struct {
	n   int
	sum uint64
}

type valueEntry struct {
	ref   string
	print valuePrint
	data  []byte
}

// NewValueCache returns a cache of at most maxBytes bytes of values, or
// nil (no cache) if maxBytes is not positive.
func NewValueCache(maxBytes int) *ValueCache {
	if maxBytes <= 0 {
		return nil
	}
	return &ValueCache{seed: maphash.MakeSeed(), max: maxBytes,
		byRef: map[string]*list.Element{}, byPrint: map[valuePrint]*list.Element{}}
}

// Stats returns the cache's counts so far.
func (c *ValueCache) Stats() ValueCacheStats {
	if c == nil {
		return ValueCacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Bytes = c.used
	return s
}

// get returns the bytes of the object named ref, if the cache has them.
func (c *ValueCache) get(ref string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byRef[ref]
	if !ok {
		c.stats.Misses++
		return nil, false
	}
	c.stats.Hits++
	c.lru.MoveToFront(el)
	return el.Value.(*valueEntry).data, true
}

// lookup returns the reference of the object holding exactly data, if the
// cache has it.
func (c *ValueCache) lookup(data []byte) (string, bool) {
	if c == nil || len(data) > c.max {
		return "", false
	}
	p := c.print(data)
	c.mu.Lock()
	el, ok := c.byPrint[p]
	var e *valueEntry
	if ok {
		e = el.Value.(*valueEntry)
	}
	c.mu.Unlock()
	// The entry's bytes never change: compare them outside the lock.
	hit := ok && bytes.Equal(e.data, data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !hit {
		c.stats.Misses++
		return "", false
	}
	c.stats.Hits++
	if el, ok := c.byRef[e.ref]; ok {
		c.lru.MoveToFront(el)
	}
	return e.ref, true
}

// add keeps data as the bytes of the object named ref, evicting the least
// recently used entries beyond the budget. data larger than the whole
// budget is not kept.
func (c *ValueCache) add(ref string, data []byte) {
	if c == nil || len(data) > c.max {
		return
	}
	p := c.print(data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byRef[ref]; ok {
		c.lru.MoveToFront(el)
		return
	}
	e := &valueEntry{ref: ref, print: p, data: data}
	el := c.lru.PushFront(e)
	c.byRef[ref] = el
	c.byPrint[p] = el // a colliding older entry is only found by its reference now
	c.used += len(data)
	for c.used > c.max {
		last := c.lru.Back()
		old := last.Value.(*valueEntry)
		c.lru.Remove(last)
		delete(c.byRef, old.ref)
		if c.byPrint[old.print] == last {
			delete(c.byPrint, old.print)
		}
		c.used -= len(old.data)
	}
}

// The fingerprint of a value longer than printWhole hashes its first and
// last printEdge bytes and printSamples samples of printSample bytes spread
// evenly between them: about 12 KiB of a 4 MiB value instead of all of it
// (BenchmarkValueCache_Print4MiB: 1.5 µs, where a maphash of all 4 MiB
// takes 362 µs, twice per Put that misses). Values of one
// length that differ only between the samples share a fingerprint, which
// costs the comparison that tells them apart (bytes.Equal stops at the
// first difference) and, for the older, being found by reference only.
const (
	printEdge    = 4 << 10
	printSample  = 64
	printSamples = 64
	printWhole   = 2*printEdge + printSamples*printSample
)

func (c *ValueCache) print(data []byte) valuePrint {
	if len(data) <= printWhole {
		return valuePrint{n: len(data), sum: maphash.Bytes(c.seed, data)}
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.Write(data[:printEdge])
	mid := data[printEdge : len(data)-printEdge]
	step := (len(mid) - printSample) / (printSamples - 1)
	for i := range printSamples {
		h.Write(mid[i*step : i*step+printSample])
	}
	h.Write(data[len(data)-printEdge:])
	return valuePrint{n: len(data), sum: h.Sum64()}
}
