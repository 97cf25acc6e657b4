// Package mem is an in-memory blob.Store with injectable faults, for unit
// tests of the lease and log rules. Latency is modelled with timers, so
// tests run it under testing/synctest and see seconds pass in microseconds.
package mem

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
)

// Fault describes what happens to one request.
type Fault struct {
	// Latency delays the request. If the context ends first the request
	// returns a transient error (unless Lands, the write is not applied).
	Latency time.Duration
	// Err is returned instead of performing the request. An error that does
	// not already match a blob sentinel is wrapped as transient.
	Err error
	// Lands applies a write although the caller sees Err or a context
	// cut-off: the write landed but its reply was lost. A write whose
	// context ends during Latency lands when Latency has elapsed.
	Lands bool
}

// FaultFunc decides the fault for a request; op is one of the blob.Op*
// constants. It is called with no lock held.
type FaultFunc func(op, key string) Fault

// Errors tests commonly inject.
var (
	ErrServer    = errors.New("500 internal server error")
	ErrThrottled = errors.New("503 slow down")
	ErrConflict  = errors.New("409 conditional request conflict")
	ErrDenied    = errors.New("403 access denied")
)

type object struct {
	data    []byte
	version blob.Version
}

// Store is the in-memory store. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	objects  map[string]object
	next     uint64
	faults   FaultFunc
	counts   map[string]int
	ignoreIf bool
}

var _ blob.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{objects: map[string]object{}, counts: map[string]int{}}
}

// SetFaults installs f (nil removes it).
func (s *Store) SetFaults(f FaultFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
}

// SetIgnoreConditions makes conditional writes unconditional, like an
// S3-compatible store that ignores If-None-Match and If-Match. Only the
// startup probe's tests use it.
func (s *Store) SetIgnoreConditions(ignore bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ignoreIf = ignore
}

// Count returns how many requests of op were made (faulted ones included).
func (s *Store) Count(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[op]
}

// Keys returns every key in byte order.
func (s *Store) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.objects))
	for k := range s.objects {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Raw returns a copy of the data at key without faults or counting.
func (s *Store) Raw(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	return slices.Clone(o.data), ok
}

// SetRaw stores data at key unconditionally, bypassing faults; tests use it
// to plant corrupt or foreign objects.
func (s *Store) SetRaw(key string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = object{data: slices.Clone(data), version: s.newVersion()}
}

func (s *Store) newVersion() blob.Version {
	s.next++
	return blob.Version("m" + strconv.FormatUint(s.next, 10))
}

// before runs the fault for a request. It returns done=true with err when the
// request must not be performed; apply (for writes) is run when the fault
// says the write lands anyway.
func (s *Store) before(ctx context.Context, op, key string, apply func()) (bool, error) {
	s.mu.Lock()
	s.counts[op]++
	f := s.faults
	s.mu.Unlock()
	if err := blob.CheckedKey(op, key); err != nil && op != blob.OpList {
		return true, err
	}
	if f == nil {
		return false, ctxErr(ctx, op, key)
	}
	fault := f(op, key)
	if fault.Latency > 0 {
		start := time.Now()
		t := time.NewTimer(fault.Latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if fault.Lands && apply != nil {
				go func() {
					time.Sleep(fault.Latency - time.Since(start))
					apply()
				}()
			}
			return true, blob.Transient(op, key, ctx.Err())
		}
	}
	if fault.Err != nil {
		if fault.Lands && apply != nil {
			apply()
		}
		if blob.Classify(fault.Err) == blob.ErrTransient && !errors.Is(fault.Err, blob.ErrTransient) {
			return true, blob.Transient(op, key, fault.Err)
		}
		return true, fault.Err
	}
	if fault.Lands && apply != nil {
		apply()
		return true, blob.Transient(op, key, errors.New("reply lost"))
	}
	return false, ctxErr(ctx, op, key)
}

func ctxErr(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return blob.Transient(op, key, err)
	}
	return nil
}

// Get implements blob.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, blob.Version, error) {
	if done, err := s.before(ctx, blob.OpGet, key, nil); done || err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return nil, "", blob.NotFound(blob.OpGet, key)
	}
	return slices.Clone(o.data), o.version, nil
}

// PutIfAbsent implements blob.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) (blob.Version, error) {
	data = slices.Clone(data)
	put := func() (blob.Version, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.objects[key]; ok && !s.ignoreIf {
			return "", blob.Precondition(blob.OpPutIfAbsent, key)
		}
		v := s.newVersion()
		s.objects[key] = object{data: data, version: v}
		return v, nil
	}
	if done, err := s.before(ctx, blob.OpPutIfAbsent, key, func() { _, _ = put() }); done || err != nil {
		return "", err
	}
	return put()
}

// PutIfMatch implements blob.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, v blob.Version) (blob.Version, error) {
	data = slices.Clone(data)
	put := func() (blob.Version, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		o, ok := s.objects[key]
		if (!ok || o.version != v) && !s.ignoreIf {
			return "", blob.Precondition(blob.OpPutIfMatch, key)
		}
		nv := s.newVersion()
		s.objects[key] = object{data: data, version: nv}
		return nv, nil
	}
	if done, err := s.before(ctx, blob.OpPutIfMatch, key, func() { _, _ = put() }); done || err != nil {
		return "", err
	}
	return put()
}

// List implements blob.Store.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]string, error) {
	if done, err := s.before(ctx, blob.OpList, prefix, nil); done || err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.objects {
		if strings.HasPrefix(k, prefix) && k > startAfter {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	return keys, nil
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	del := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.objects, key)
	}
	if done, err := s.before(ctx, blob.OpDelete, key, del); done || err != nil {
		return err
	}
	del()
	return nil
}

// Close implements blob.Store.
func (s *Store) Close() error { return nil }
