package sim

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
)

// errKilled is what a request of a killed process returns: it was never
// sent.
var errKilled = errors.New("process killed")

// gate freezes one simulated process: while it is closed, every request
// the process makes to the store, and every call of its clients and
// workers, waits, whatever its context says (a stopped process does not
// notice its deadlines). Opening it lets them go on as if no time had
// passed: a write that was on its way lands now. A kill opens it for good
// and makes the waiting requests fail unsent.
type gate struct {
	mu     sync.Mutex
	ch     chan struct{} // nil: open
	n      int           // freezes not yet resumed (they may overlap)
	killed bool
}

func (g *gate) freeze() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	if g.ch == nil && !g.killed {
		g.ch = make(chan struct{})
	}
}

// resume ends one freeze; the gate opens when the last one ends.
func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n = max(0, g.n-1)
	if g.n == 0 {
		g.open()
	}
}

// heal opens the gate, whatever freezes are pending.
func (g *gate) heal() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n = 0
	g.open()
}

func (g *gate) open() {
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
}

// kill opens the gate; wait reports false from now on until revive.
func (g *gate) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.killed = true
	g.open()
}

func (g *gate) revive() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.killed = false
}

// wait blocks while the gate is frozen; false means the process was
// killed.
func (g *gate) wait() bool {
	g.mu.Lock()
	ch, killed := g.ch, g.killed
	g.mu.Unlock()
	if ch != nil {
		<-ch
		g.mu.Lock()
		killed = g.killed
		g.mu.Unlock()
	}
	return !killed
}

// storeFaults is a window of store faults for one process.
type storeFaults struct {
	from, to time.Time
	// rate in 1/1000 of requests that meet a fault.
	rate int
}

// procStore is the durable store as one process sees it: the shared
// memory store behind the process's gate, with the faults of the
// schedule's windows. A fault is chosen by hashing the seed, the process,
// the request and how many such requests the process made before, not by
// a shared random stream, so that the same schedule gives the same faults
// whatever the goroutines' order.
type procStore struct {
	inner blob.Store
	p     *proc

	mu     sync.Mutex
	counts map[string]uint64
	faults []storeFaults
	// log counts the faults injected (for the report).
	injected map[string]int
}

var _ blob.Store = (*procStore)(nil)

func newProcStore(inner blob.Store, p *proc) *procStore {
	return &procStore{inner: inner, p: p, counts: map[string]uint64{}, injected: map[string]int{}}
}

func (s *procStore) addFaults(f storeFaults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// fault kinds.
const (
	faultNone = iota
	faultError
	faultLostReply
	faultLatency
	// faultLandedConflict: the conditional write lands and the caller
	// sees a precondition failure, as from a store client that retried
	// its own write after a lost reply and found it there (an S3 SDK's
	// retry of a PUT with If-None-Match or If-Match answers 412).
	faultLandedConflict
	// faultSpuriousConflict: a precondition failure of a PutIfMatch that
	// did not land, whose key holds the version it named (no other
	// writer's write stands in its way). Only for PutIfMatch: a
	// PutIfAbsent that fails its precondition says the key exists, and
	// Values.Put relies on that (a value object's key names its bytes);
	// a store that said so of an absent key would lose value objects
	// (seeds 14, 37 and 45 with it: a record whose object is missing).
	faultSpuriousConflict
)

// isConditional says whether op is a conditional write.
func isConditional(op string) bool { return op == blob.OpPutIfAbsent || op == blob.OpPutIfMatch }

// pick decides the fault of one request.
func (s *procStore) pick(op, key string) (kind int, lat time.Duration, err error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := op + " " + key
	n := s.counts[k]
	s.counts[k] = n + 1
	rate := 0
	for _, f := range s.faults {
		if !now.Before(f.from) && now.Before(f.to) {
			rate = max(rate, f.rate)
		}
	}
	if rate == 0 {
		return faultNone, 0, nil
	}
	h := fnv.New64a()
	var b [8]byte
	for i, v := range []uint64{s.p.sim.cfg.Seed, uint64(s.p.id), n} {
		_ = i
		for j := range 8 {
			b[j] = byte(v >> (8 * j))
		}
		_, _ = h.Write(b[:])
	}
	_, _ = h.Write([]byte(k))
	x := h.Sum64()
	if int(x%1000) >= rate {
		return faultNone, 0, nil
	}
	x /= 1000
	switch x % 5 {
	case 0:
		s.injected["latency"]++
		return faultLatency, time.Duration(50+(x/5)%2950) * time.Millisecond, nil
	case 1:
		if isConditional(op) || op == blob.OpDelete {
			s.injected["lost reply"]++
			return faultLostReply, 0, nil
		}
		fallthrough
	case 2:
		if isConditional(op) {
			switch (x / 5) % 3 {
			case 0:
				// S3's 409 ConditionalRequestConflict: a transient
				// refusal, nothing written.
				s.injected["409 conflict"]++
				return faultError, 0, errConflict409
			case 1:
				s.injected["412, landed"]++
				return faultLandedConflict, 0, nil
			default:
				if op == blob.OpPutIfMatch {
					s.injected["412, nothing written"]++
					return faultSpuriousConflict, 0, nil
				}
				s.injected["412, landed"]++
				return faultLandedConflict, 0, nil
			}
		}
		fallthrough
	case 3:
		s.injected["5xx"]++
		return faultError, 0, mem.ErrServer
	default:
		s.injected["throttled"]++
		return faultError, 0, mem.ErrThrottled
	}
}

// before passes the gate and applies the fault: err is the request's
// answer without making it, or kind says how a write is made and
// answered (faultLostReply, faultLandedConflict, faultSpuriousConflict).
func (s *procStore) before(ctx context.Context, op, key string) (kind int, err error) {
	if !s.p.gate.wait() {
		return faultNone, blob.Transient(op, key, errKilled)
	}
	kind, lat, ferr := s.pick(op, key)
	switch kind {
	case faultError:
		return faultNone, blob.Transient(op, key, ferr)
	case faultLatency:
		t := time.NewTimer(lat)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return faultNone, blob.Transient(op, key, ctx.Err())
		}
		if !s.p.gate.wait() {
			return faultNone, blob.Transient(op, key, errKilled)
		}
		kind = faultNone
	}
	return kind, nil
}

var (
	errReplyLost   = errors.New("reply lost")
	errConflict409 = errors.New("409 ConditionalRequestConflict")
)

// conditional makes a conditional write with its fault: write makes it on
// the shared store.
func (s *procStore) conditional(ctx context.Context, op, key string, write func(context.Context) (blob.Version, error)) (blob.Version, error) {
	kind, err := s.before(ctx, op, key)
	if err != nil {
		return "", err
	}
	switch kind {
	case faultLostReply:
		_, _ = write(context.WithoutCancel(ctx))
		return "", blob.Transient(op, key, errReplyLost)
	case faultLandedConflict:
		if _, err := write(context.WithoutCancel(ctx)); err != nil {
			return "", err // its precondition failed: the answer is true
		}
		return "", blob.Precondition(op, key)
	case faultSpuriousConflict:
		return "", blob.Precondition(op, key)
	}
	return write(ctx)
}

// Get implements blob.Store.
func (s *procStore) Get(ctx context.Context, key string) ([]byte, blob.Version, error) {
	if _, err := s.before(ctx, blob.OpGet, key); err != nil {
		return nil, "", err
	}
	return s.inner.Get(ctx, key)
}

// PutIfAbsent implements blob.Store.
func (s *procStore) PutIfAbsent(ctx context.Context, key string, data []byte) (blob.Version, error) {
	return s.conditional(ctx, blob.OpPutIfAbsent, key, func(ctx context.Context) (blob.Version, error) {
		return s.inner.PutIfAbsent(ctx, key, data)
	})
}

// PutIfMatch implements blob.Store.
func (s *procStore) PutIfMatch(ctx context.Context, key string, data []byte, v blob.Version) (blob.Version, error) {
	return s.conditional(ctx, blob.OpPutIfMatch, key, func(ctx context.Context) (blob.Version, error) {
		return s.inner.PutIfMatch(ctx, key, data, v)
	})
}

// List implements blob.Store.
func (s *procStore) List(ctx context.Context, prefix, startAfter string, limit int) ([]string, error) {
	if _, err := s.before(ctx, blob.OpList, prefix); err != nil {
		return nil, err
	}
	return s.inner.List(ctx, prefix, startAfter, limit)
}

// Delete implements blob.Store.
func (s *procStore) Delete(ctx context.Context, key string) error {
	kind, err := s.before(ctx, blob.OpDelete, key)
	if err != nil {
		return err
	}
	if kind == faultLostReply {
		_ = s.inner.Delete(context.WithoutCancel(ctx), key)
		return blob.Transient(blob.OpDelete, key, errReplyLost)
	}
	return s.inner.Delete(ctx, key)
}

// Close implements blob.Store; the shared store outlives every process.
func (s *procStore) Close() error { return nil }
