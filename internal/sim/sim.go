package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

const (
	nodeID        = "n1"
	leaseDuration = 3 * time.Second
	restartDelay  = 500 * time.Millisecond
	// stepDownHoldOff is how long a process that stepped down waits
	// before it competes for the lease again.
	stepDownHoldOff = 2 * time.Second
)

// Config is one simulation run.
type Config struct {
	Seed uint64
	// Processes of the node (default 3).
	Processes int
	// Flows the clients start (default 25, dealt to the flow types in
	// turn: four chain, fan, wait and timer flows, three stop, reset and
	// count flows).
	Flows int
	// ContinueAsNewHistoryEvents is the processes'
	// limits.continueAsNewHistoryEvents (default defaultContinueAfter,
	// low, so that long runs continue as new, E37).
	ContinueAsNewHistoryEvents int
	// Faults is how long faults are injected (virtual time, default 40 s);
	// then the run heals and waits for every flow to complete.
	Faults time.Duration
	// Settle bounds the wait for completion after the faults (default
	// 3 min of virtual time).
	Settle time.Duration
	// Logger receives the processes' logs (nil: discard).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Processes == 0 {
		c.Processes = 3
	}
	if c.Flows == 0 {
		c.Flows = 25
	}
	if c.ContinueAsNewHistoryEvents == 0 {
		c.ContinueAsNewHistoryEvents = defaultContinueAfter
	}
	if c.Faults == 0 {
		c.Faults = 40 * time.Second
	}
	if c.Settle == 0 {
		c.Settle = 3 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = discard
	}
	return c
}

// step is one scheduled fault.
type step struct {
	at   time.Duration
	what string
	do   func(s *sim)
}

// plan is the run's fault schedule, drawn from the seed before the run
// starts, so that it does not depend on the goroutines' order.
type plan struct {
	steps []step
	// per 1000 tasks.
	disconnectRate, duplicateRate int
}

func (p plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker disconnects %d/1000 tasks, duplicate results %d/1000 tasks\n", p.disconnectRate, p.duplicateRate)
	for _, s := range p.steps {
		fmt.Fprintf(&b, "  %8v  %s\n", s.at, s.what)
	}
	return b.String()
}

// newPlan draws the fault schedule of a run.
func newPlan(cfg Config) plan {
	r := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	pl := plan{disconnectRate: r.IntN(40), duplicateRate: r.IntN(200)}
	at := time.Duration(0)
	for {
		at += time.Duration(500+r.IntN(6000)) * time.Millisecond
		if at >= cfg.Faults {
			break
		}
		// Two faults in three hit whichever process serves when the fault
		// comes; the others a given process.
		pi, who := r.IntN(cfg.Processes), ""
		if r.IntN(3) > 0 {
			pi = -1
		}
		if who = "the active"; pi >= 0 {
			who = fmt.Sprintf("p%d", pi)
		}
		target := func(s *sim) *proc {
			if pi >= 0 {
				return s.procs[pi]
			}
			if p, _ := s.serving(); p != nil {
				return p
			}
			return s.procs[0]
		}
		switch r.IntN(5) {
		case 0:
			drop := r.IntN(3) == 0
			down := time.Duration(100+r.IntN(5000)) * time.Millisecond
			pl.steps = append(pl.steps, step{at: at, what: fmt.Sprintf("kill %s (drop local store: %v), restart after %v", who, drop, down),
				do: func(s *sim) {
					p := target(s)
					s.event("kill p%d", p.id)
					p.kill(drop)
					s.later(down, func() { p.start(s.ctx) })
				}})
		case 1:
			// Frozen past the lease often: 3 s lease, standby expiry 4 s.
			d := time.Duration(200+r.IntN(9000)) * time.Millisecond
			if r.IntN(3) == 0 {
				// A host suspend: frozen, and its monotonic clock stops
				// meanwhile (the wall clock does not).
				pl.steps = append(pl.steps, step{at: at, what: fmt.Sprintf("suspend the host of %s for %v", who, d),
					do: func(s *sim) {
						p := target(s)
						s.event("suspend p%d", p.id)
						p.suspend(s, d)
					}})
				break
			}
			pl.steps = append(pl.steps, step{at: at, what: fmt.Sprintf("freeze %s for %v", who, d),
				do: func(s *sim) {
					p := target(s)
					s.event("freeze p%d", p.id)
					p.gate.freeze()
					s.later(d, func() { p.gate.resume() })
				}})
		case 2:
			d := time.Duration(500+r.IntN(5000)) * time.Millisecond
			rate := 50 + r.IntN(500)
			pl.steps = append(pl.steps, step{at: at, what: fmt.Sprintf("store faults for %s: %d/1000 requests for %v", who, rate, d),
				do: func(s *sim) {
					now := time.Now()
					p := target(s)
					s.event("store faults for p%d", p.id)
					p.store.addFaults(storeFaults{from: now, to: now.Add(d), rate: rate})
				}})
		case 3:
			pl.steps = append(pl.steps, step{at: at, what: fmt.Sprintf("step down %s", who),
				do: func(s *sim) {
					p := target(s)
					s.event("step down p%d", p.id)
					select {
					case p.stepDown <- struct{}{}:
					default:
					}
				}})
		default:
			// A quiet spell lets work progress between faults.
		}
	}
	return pl
}

// sim is one run.
type sim struct {
	cfg    Config
	plan   plan
	ctx    context.Context
	log    *slog.Logger
	layout wal.Layout
	blobs  *archive
	procs  []*proc
	ledger *ledger
	start  time.Time

	mu     sync.Mutex
	events []string
	seen   map[string]uint64
	timers sync.WaitGroup
	fails  []string
	ends   map[string]int
	hist   history
}

// Result is what a run saw.
type Result struct {
	Seed   uint64
	Plan   string
	Events []string
	// Acks counts the acknowledged starts, publishes and results.
	Acks  int
	Flows int
	// Ends counts the ends of lease periods by cause, and the results'
	// answers.
	Ends map[string]int
	// Faults counts the store faults injected, by kind.
	Faults map[string]int
}

// Run runs one simulation. Call it inside a testing/synctest bubble: it
// takes minutes of virtual time. It returns an error naming the first
// invariant that failed; the Result holds the schedule and the events.
func Run(cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	s := &sim{cfg: cfg, plan: newPlan(cfg), log: cfg.Logger, layout: wal.MustLayout("", nodeID),
		ledger: newLedger(), seen: map[string]uint64{}, start: time.Now(), ends: map[string]int{}}
	s.blobs = &archive{Store: mem.New(), sim: s, batches: map[uint64][]byte{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.ctx = ctx
	for i := range cfg.Processes {
		// p1 is a hot standby, the others cold.
		p := &proc{id: i, sim: s, local: newLocalStore(), hot: i == 1, stepDown: make(chan struct{}, 1), srv: server.New(server.Options{})}
		p.store = newProcStore(s.blobs, p)
		s.procs = append(s.procs, p)
	}
	res := &Result{Seed: cfg.Seed, Plan: s.plan.String(), Flows: cfg.Flows}
	defer func() {
		s.mu.Lock()
		res.Events = slices.Clone(s.events)
		res.Ends = s.ends
		s.mu.Unlock()
		res.Faults = map[string]int{}
		for _, p := range s.procs {
			p.store.mu.Lock()
			for k, v := range p.store.injected {
				res.Faults[k] += v
			}
			p.store.mu.Unlock()
		}
		s.ledger.mu.Lock()
		res.Acks = s.ledger.acks
		s.ledger.mu.Unlock()
	}()

	for _, p := range s.procs {
		p.start(ctx)
	}
	monDone := make(chan struct{})
	monCtx, stopMon := context.WithCancel(ctx)
	go func() { defer close(monDone); s.monitor(monCtx) }()

	wctx, stopWork := context.WithCancel(ctx)
	var work sync.WaitGroup
	for i := range 2 {
		work.Go(func() { s.worker(wctx, fmt.Sprintf("w%d", i)) })
	}
	var clients sync.WaitGroup
	for i := range cfg.Flows {
		// The flows start in four bursts, so that tasks queue for the
		// workers' slots.
		id, typ := fmt.Sprintf("f%02d", i), flowTypes[i%len(flowTypes)]
		burst := time.Duration(hash(cfg.Seed, id, 0)%4) * cfg.Faults / 4
		delay := burst + time.Duration(hash(cfg.Seed, id, 1)%500)*time.Millisecond
		clients.Go(func() {
			if lease.Sleep(wctx, delay) {
				s.client(wctx, id, typ)
			}
		})
	}

	// The schedule, then heal: resume and restart every process.
	for _, st := range s.plan.steps {
		if d := st.at - time.Since(s.start); d > 0 {
			time.Sleep(d)
		}
		s.event("fault: %s", st.what)
		st.do(s)
	}
	if d := cfg.Faults - time.Since(s.start); d > 0 {
		time.Sleep(d)
	}
	s.timers.Wait()
	s.event("heal")
	for _, p := range s.procs {
		p.store.mu.Lock()
		p.store.faults = nil
		p.store.mu.Unlock()
		p.gate.heal()
		p.start(ctx)
	}

	settled := make(chan struct{})
	go func() { clients.Wait(); close(settled) }()
	var err error
	select {
	case <-settled:
	case <-time.After(cfg.Settle):
		err = fmt.Errorf("liveness: flows not done %v after the faults ended: %s", cfg.Settle, s.pending())
	}
	stopWork()
	clients.Wait()
	work.Wait()
	stopMon()
	<-monDone
	for _, p := range s.procs {
		p.kill(false)
	}
	if f := s.failure(); f != "" {
		return res, fmt.Errorf("%s", f)
	}
	if err != nil {
		return res, err
	}
	return res, s.check(context.Background())
}

// serving returns a process that serves now, if any.
func (s *sim) serving() (*proc, *serving.Core) {
	for _, p := range s.procs {
		if c := p.active(); c != nil && c.Serving() {
			return p, c
		}
	}
	return nil, nil
}

// later runs fn after d (virtual time); the run waits for it before it
// heals.
func (s *sim) later(d time.Duration, fn func()) {
	s.timers.Add(1)
	go func() {
		defer s.timers.Done()
		time.Sleep(d)
		s.event("fault ends")
		fn()
	}()
}

func (s *sim) event(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, fmt.Sprintf("%10v  %s", time.Since(s.start), fmt.Sprintf(format, args...)))
}

// fail records a broken invariant seen during the run.
func (s *sim) fail(format string, args ...any) {
	msg := fmt.Sprintf("at %v: ", time.Since(s.start)) + fmt.Sprintf(format, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails = append(s.fails, msg)
	s.events = append(s.events, "INVARIANT BROKEN "+msg)
}

func (s *sim) failure() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fails) == 0 {
		return ""
	}
	return s.fails[0]
}

// count counts an occurrence of what (reported with the period ends).
func (s *sim) count(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ends[what]++
}

func (s *sim) periodEnded(err error) {
	cause := "other"
	switch msg := fmt.Sprint(err); {
	case strings.Contains(msg, "fenced"):
		cause = "fenced"
	case strings.Contains(msg, "renewal timed out"):
		cause = "renewal timeout"
	case strings.Contains(msg, "lost"):
		cause = "lease lost"
	case strings.Contains(msg, "no longer valid"):
		cause = "not valid"
	case strings.Contains(msg, "log write not accepted"):
		cause = "log write limit"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ends[cause]++
}

func (s *sim) pending() string {
	s.ledger.mu.Lock()
	defer s.ledger.mu.Unlock()
	var missing []string
	for i := range s.cfg.Flows {
		id := fmt.Sprintf("f%02d", i)
		if _, ok := s.ledger.started[id]; !ok {
			missing = append(missing, id+" (start not acknowledged)")
		} else if !s.ledger.done[id] {
			missing = append(missing, id+" (not done"+s.describe(id)+")")
		}
	}
	return fmt.Sprintf("%d starts acknowledged; waiting for %v", len(s.ledger.started), missing)
}

// describe tells how a flow stands on a process that serves, if any.
func (s *sim) describe(flowID string) string {
	_, c := s.serving()
	if c == nil {
		return ""
	}
	st, err := c.Flow(context.Background(), flowID, "")
	if err != nil || st == nil {
		return fmt.Sprintf(": %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, ": run %s %s, history %d events", st.RunID, st.Status, len(st.History))
	for _, x := range st.Steps {
		fmt.Fprintf(&b, ", %s %s %s attempt %d %s", x.ID, x.Phase, x.Attempt.Method, x.Attempt.Number, x.Attempt.State)
	}
	for ch, q := range st.Channels {
		fmt.Fprintf(&b, ", channel %s: %d queued", ch, len(q))
	}
	return b.String()
}

// chance decides, from the seed and the task, whether a worker does
// something with probability rate/1000.
func (s *sim) chance(worker, what string, n uint64, rate int) bool {
	return int(hash(s.cfg.Seed, worker+what, n)%1000) < rate
}

// hash is FNV-1a of the seed, a string and a number.
func hash(seed uint64, k string, n uint64) uint64 {
	h := fnv.New64a()
	var b [16]byte
	for i := range 8 {
		b[i] = byte(seed >> (8 * i))
		b[8+i] = byte(n >> (8 * i))
	}
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(k))
	return h.Sum64()
}
