package wal_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/wal"
	"github.com/dexzd/dexzd/internal/wal/waltest"
)

// The log's promise, tried over many random timelines instead of a few
// examples: after any sequence of freezes, resumes, takeovers, writes,
// lost replies, snapshots, truncations, kills and restarts, every
// acknowledged record is readable (newest snapshot plus the log from its
// nextSeq), once and in order, and every process's state is a prefix of
// what is readable.
//
// The adversary is stronger than the real world: a takeover may happen at
// any moment, whatever the old holder's lease says (clocks, suspends and
// clock jumps are not modelled because safety must not depend on them),
// and a frozen process resumes with its requests going out as if no time
// had passed. Each timeline runs in a synctest bubble, and the harness lets
// every goroutine settle between two steps, so a failing seed replays the
// same timeline; the failure prints it.
//
// DEX_WAL_TIMELINES (default 500) sets how many timelines run.
//
// Covers: G2, G3, G4, G5, G7, L4, T1
func TestLog_AcknowledgedSurvivesRandomTimelines(t *testing.T) {
	t.Parallel()
	n := envInt(t, "DEX_WAL_TIMELINES", 500)
	for seed := range uint64(n) {
		var trace []string
		var err error
		synctest.Test(t, func(t *testing.T) {
			trace, err = runTimeline(t, seed, 40)
		})
		if err != nil {
			t.Fatalf("seed %d: %v\ntimeline:\n  %s", seed, err, strings.Join(trace, "\n  "))
		}
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q is not a count", name, v)
	}
	return n
}

// timeline is the world of one random run: one store, three processes.
type timeline struct {
	store  *mem.Store
	layout wal.Layout
	procs  []*proc
	epoch  uint64 // the highest epoch handed out
	trace  []string

	mu     sync.Mutex // guards trace and broken
	broken []string   // a process applied a batch out of order
}

// apply applies b to m and records a gap as a broken invariant.
func (tl *timeline) apply(p int, m *model) func(wal.Batch) error {
	return func(b wal.Batch) error {
		err := m.apply(b)
		if err != nil {
			tl.mu.Lock()
			tl.broken = append(tl.broken, fmt.Sprintf("p%d: %v", p, err))
			tl.mu.Unlock()
		}
		return err
	}
}

// proc is one server process: a store client that can be frozen, the
// local state it keeps across restarts, and, while it believes it holds
// the lease, a writer.
type proc struct {
	tl    *timeline
	id    int
	local *model

	mu       sync.Mutex
	frozen   chan struct{} // non-nil while frozen
	freezeIn int           // freeze before the freezeIn-th next request (0: never)
	loseNext bool          // the next write lands but its reply is lost
	killed   chan struct{} // closed when the process dies

	epoch  uint64
	writer *wal.Writer
	subs   []sub
	ctx    context.Context // of the serving period, nil when idle
	cancel context.CancelFunc
	bg     sync.WaitGroup
}

type sub struct {
	epoch  uint64
	record []byte
	f      wal.Future
}

func runTimeline(t *testing.T, seed uint64, steps int) ([]string, error) {
	rnd := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	tl := &timeline{store: mem.New(), layout: wal.MustLayout("inv/", "n1")}
	for i := range 3 {
		tl.procs = append(tl.procs, &proc{tl: tl, id: i, local: &model{}, killed: make(chan struct{})})
	}
	defer func() {
		for _, p := range tl.procs {
			p.kill()
		}
		for _, p := range tl.procs {
			p.bg.Wait()
		}
	}()
	for range steps {
		p := tl.procs[rnd.IntN(len(tl.procs))]
		switch x := rnd.IntN(100); {
		case x < 30:
			p.write(1 + rnd.IntN(3))
		case x < 40:
			p.freeze(0)
		case x < 48:
			p.freeze(1 + rnd.IntN(6))
		case x < 62:
			p.resume()
		case x < 74:
			p.takeover(rnd.IntN(4) == 0)
		case x < 86:
			p.snapshot()
		case x < 92:
			p.restart(rnd.IntN(2) == 0)
		default:
			p.loseReply()
		}
		synctest.Wait()
	}
	// Let every process finish what it started: resumed, a fenced writer
	// stops, the current one acknowledges what it queued.
	tl.log("end: resume all")
	for _, p := range tl.procs {
		p.resume()
	}
	synctest.Wait()
	var acked [][]byte
	var all []sub
	for _, p := range tl.procs {
		p.mu.Lock()
		all = append(all, p.subs...)
		p.mu.Unlock()
	}
	// Records of one epoch are in submission order; a lower epoch's
	// records all precede a higher one's in the log (its fence separates
	// them).
	slices.SortStableFunc(all, func(a, b sub) int { return cmp.Compare(a.epoch, b.epoch) })
	for _, s := range all {
		select {
		case <-s.f.Done():
			if _, err := s.f.Result(); err == nil {
				acked = append(acked, s.record)
			}
		default:
		}
	}
	if len(tl.broken) > 0 {
		return tl.trace, errors.New(strings.Join(tl.broken, "; "))
	}
	readable, _, err := waltest.Readable(context.Background(), tl.store, tl.layout)
	if err != nil {
		return tl.trace, fmt.Errorf("read back: %w", err)
	}
	if err := waltest.CheckAcked(acked, readable); err != nil {
		return tl.trace, err
	}
	for _, p := range tl.procs {
		p.local.mu.Lock()
		local := slices.Clone(p.local.records)
		p.local.mu.Unlock()
		if len(local) > len(readable) || !slices.EqualFunc(local, readable[:len(local)], func(a, b []byte) bool { return string(a) == string(b) }) {
			return tl.trace, fmt.Errorf("process %d's state (%d records) is not a prefix of what is readable (%d records)", p.id, len(local), len(readable))
		}
	}
	t.Logf("seed %d: %d acknowledged, %d readable", seed, len(acked), len(readable))
	return tl.trace, nil
}

func (tl *timeline) log(format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.trace = append(tl.trace, fmt.Sprintf(format, args...))
}

// gate is where each request of p waits while p is frozen. It returns
// false if p was killed meanwhile: the request is never sent.
func (p *proc) gate(killed chan struct{}) bool {
	p.mu.Lock()
	if p.freezeIn > 0 {
		p.freezeIn--
		if p.freezeIn == 0 && p.frozen == nil {
			p.frozen = make(chan struct{})
		}
	}
	frozen := p.frozen
	p.mu.Unlock()
	if frozen == nil {
		select {
		case <-killed:
			return false
		default:
			return true
		}
	}
	select {
	case <-frozen:
		return true
	case <-killed:
		return false
	}
}

func (p *proc) freeze(after int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if after == 0 {
		if p.frozen == nil {
			p.frozen = make(chan struct{})
		}
		p.tl.log("p%d freeze", p.id)
		return
	}
	p.freezeIn = after
	p.tl.log("p%d freeze before its request %d from now", p.id, after)
}

func (p *proc) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.freezeIn = 0
	if p.frozen != nil {
		close(p.frozen)
		p.frozen = nil
		p.tl.log("p%d resume", p.id)
	}
}

func (p *proc) loseReply() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loseNext = true
	p.tl.log("p%d: its next write will land and lose its reply", p.id)
}

// kill ends the process: its requests still waiting at the gate are never
// sent, its goroutines stop. Its local state stays (on disk).
func (p *proc) kill() {
	p.mu.Lock()
	cancel := p.cancel
	select {
	case <-p.killed:
	default:
		close(p.killed)
	}
	p.cancel, p.writer = nil, nil
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// restart kills p and starts it again, idle, with its local state or
// (wipe) an empty one.
func (p *proc) restart(wipe bool) {
	p.kill()
	p.mu.Lock()
	p.killed = make(chan struct{})
	p.frozen, p.freezeIn, p.loseNext = nil, 0, false
	if wipe {
		p.local = &model{}
	}
	p.mu.Unlock()
	p.tl.log("p%d restart (wipe local state: %v)", p.id, wipe)
}

func (p *proc) frozenNow() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen != nil
}

// takeover gives p the lease with a new epoch (whatever the last holder
// believes) and starts its recovery: restore if truncation passed its
// local state, fence, then a writer.
func (p *proc) takeover(wipe bool) {
	if p.frozenNow() {
		return
	}
	p.restart(wipe)
	tl := p.tl
	tl.epoch++
	epoch := tl.epoch
	tl.store.SetRaw(tl.layout.LeaseKey(), fmt.Append(nil, epoch))
	tl.log("p%d takes the lease, epoch %d", p.id, epoch)
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	p.epoch, p.ctx, p.cancel = epoch, ctx, cancel
	local := p.local
	store := &procStore{Store: tl.store, p: p, killed: p.killed}
	p.mu.Unlock()
	apply := tl.apply(p.id, local)
	p.bg.Go(func() {
		next, err := wal.Fence(ctx, store, tl.layout, epoch, local.next, apply)
		if errors.Is(err, wal.ErrTruncated) {
			seq, data, ok, lerr := waltest.LoadLatest(ctx, store, tl.layout)
			if lerr != nil || !ok {
				return
			}
			records, derr := waltest.DecodeState(data)
			if derr != nil {
				panic(derr)
			}
			local.mu.Lock()
			local.records, local.next = records, seq
			local.mu.Unlock()
			next, err = wal.Fence(ctx, store, tl.layout, epoch, local.next, apply)
		}
		if err != nil {
			return
		}
		w, err := wal.NewWriter(wal.WriterConfig{Store: store, Layout: tl.layout, Epoch: epoch, NextSeq: next, OnDurable: apply})
		if err != nil {
			panic(err)
		}
		p.mu.Lock()
		if p.cancel != nil && ctx.Err() == nil {
			p.writer = w
			w.Start(ctx)
		}
		p.mu.Unlock()
	})
}

func (p *proc) write(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.writer == nil {
		return
	}
	for range n {
		r := fmt.Appendf(nil, "p%d-e%d-%d", p.id, p.epoch, len(p.subs))
		p.subs = append(p.subs, sub{epoch: p.epoch, record: r, f: p.writer.SubmitAsync(r)})
		p.tl.log("p%d submits %s", p.id, r)
	}
}

// snapshot has p, if it believes it is active, write a snapshot of its
// state and truncate, each step behind the lease check (which a frozen
// process may pass just before it freezes).
func (p *proc) snapshot() {
	p.mu.Lock()
	epoch, active, ctx := p.epoch, p.cancel != nil && p.writer != nil, p.ctx
	local := p.local
	store := &procStore{Store: p.tl.store, p: p, killed: p.killed}
	p.mu.Unlock()
	if !active {
		return
	}
	tl := p.tl
	check := leaseAt(store, tl.layout, epoch)
	seq, data := local.snapshot()
	tl.log("p%d snapshots at %d and truncates", p.id, seq)
	p.bg.Go(func() {
		if err := waltest.WriteSnapshot(ctx, store, tl.layout, seq, data, check, 0); err != nil {
			return
		}
		_, _ = wal.Truncate(ctx, store, tl.layout, check)
	})
}

// procStore is the store as process p reaches it: every request waits at
// p's gate, and a write may land and lose its reply.
type procStore struct {
	blob.Store
	p      *proc
	killed chan struct{} // of the incarnation that makes the requests
}

func (s *procStore) dead(op, key string) error {
	return blob.Transient(op, key, errors.New("the process was killed"))
}

func (s *procStore) lose() bool {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	lose := s.p.loseNext
	s.p.loseNext = false
	return lose
}

// Requests go out with a context of their own: a resumed process sends
// what it held as if no time had passed.
func (s *procStore) Get(_ context.Context, key string) ([]byte, blob.Version, error) {
	if !s.p.gate(s.killed) {
		return nil, "", s.dead(blob.OpGet, key)
	}
	return s.Store.Get(context.Background(), key)
}

func (s *procStore) PutIfAbsent(_ context.Context, key string, data []byte) (blob.Version, error) {
	if !s.p.gate(s.killed) {
		return "", s.dead(blob.OpPutIfAbsent, key)
	}
	v, err := s.Store.PutIfAbsent(context.Background(), key, data)
	if err == nil && s.lose() {
		s.p.tl.log("p%d: the reply to put %s is lost", s.p.id, key)
		return "", blob.Transient(blob.OpPutIfAbsent, key, errors.New("reply lost"))
	}
	return v, err
}

func (s *procStore) PutIfMatch(_ context.Context, key string, data []byte, v blob.Version) (blob.Version, error) {
	if !s.p.gate(s.killed) {
		return "", s.dead(blob.OpPutIfMatch, key)
	}
	return s.Store.PutIfMatch(context.Background(), key, data, v)
}

func (s *procStore) List(_ context.Context, prefix, startAfter string, limit int) ([]string, error) {
	if !s.p.gate(s.killed) {
		return nil, s.dead(blob.OpList, prefix)
	}
	return s.Store.List(context.Background(), prefix, startAfter, limit)
}

func (s *procStore) Delete(_ context.Context, key string) error {
	if !s.p.gate(s.killed) {
		return s.dead(blob.OpDelete, key)
	}
	return s.Store.Delete(context.Background(), key)
}
