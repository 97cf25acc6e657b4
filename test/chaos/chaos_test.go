// Package chaos runs real dex-server-zd processes under faults: a dev
// server, and a serve pair (active and standby) on MinIO and on
// PostgreSQL, each with the Go SDK's worker and callers that record every
// acknowledged start. The faults: SIGKILL and SIGSTOP/SIGCONT of the
// active; the durable store behind toxiproxy with latency and jitter, a
// bandwidth limit, connection resets and a 20 s outage; MinIO and
// PostgreSQL killed and restarted; and, as root, a dev data directory on a
// small tmpfs filling up. A process manager restarts every server process
// that exits. After the faults every acknowledged flow must have completed
// exactly once with the right output, and every process that exited must
// have exited as the requirements say (status 1, no panic).
//
// The services are the test's own (it kills them), built or found by
// scripts/testenv.sh, which exports their paths:
//
//	scripts/testenv.sh run -- go test ./test/chaos                  # the short run of make test
//	scripts/testenv.sh run -- go test ./test/chaos -chaos.cycles=40 # make chaos
package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

var (
	flagCycles      = flag.Int("chaos.cycles", 2, "SIGKILL cycles and SIGSTOP/SIGCONT cycles of the active, each, per topology")
	flagStoreCycles = flag.Int("chaos.storecycles", 1, "cycles of each store fault (each toxic, the outage, the store's restart) per serve topology, and of the full disk")
	flagPhase       = flag.Duration("chaos.phase", 3*time.Second, "how long each toxic stays applied")
	flagOutage      = flag.Duration("chaos.outage", 20*time.Second, "how long the store outage lasts")
	flagSeed        = flag.Uint64("chaos.seed", 0, "seed of the fault durations (0: from the clock; the test logs it)")
	flagReport      = flag.String("chaos.report", "", "also write the table (Markdown) to this file")
	flagOnly        = flag.String("chaos.only", "", "run only the topologies whose names contain this")
	flagLogs        = flag.String("chaos.logs", "", "write the log of every server process that exited into this directory")
	flagTimeline    = flag.Bool("chaos.timeline", false, "log each topology's timeline even when it passes")
)

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(envWorkerAddrs) != "" {
		os.Exit(runWorkerProcess())
	}
	// The server processes read the S3 credentials from the environment;
	// the test's MinIO is started with the same.
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if os.Getenv(v) == "" {
			b := make([]byte, 12)
			_, _ = rand.Read(b)
			_ = os.Setenv(v, "chaos"+hex.EncodeToString(b))
		}
	}
	_ = os.Setenv("AWS_REGION", "us-east-1")
	_ = os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	code := m.Run()
	if len(results) > 0 {
		table := renderTable()
		fmt.Print("\n" + table)
		if *flagReport != "" {
			if err := os.WriteFile(*flagReport, []byte(table), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, err)
				code = 1
			}
		}
	}
	testproc.Cleanup()
	os.Exit(code)
}

// leaseDuration is the serve pairs' lease.duration: short, so that a
// takeover after a kill or a freeze takes about 5 s.
const leaseDuration = 3 * time.Second

// Load: callers each start a flow, wait for the acknowledgement, pause.
const (
	callers = 4
	pace    = 40 * time.Millisecond
)

// How long the node may take to serve and acknowledge again after a fault
// ended; longer is a hang.
const (
	recoverAfterProcessFault = 60 * time.Second
	recoverAfterStoreFault   = 120 * time.Second
)

// Covers: G3, L11, L13, L15, D3, S1, T1, T2
func TestChaos(t *testing.T) {
	bins := findBinaries(t)
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay the fault durations with -chaos.seed=%d)", seed, seed)
	for i, tc := range []struct {
		name string
		run  func(t *testing.T, r *run)
	}{
		{"dev", runDev},
		{"serve-minio", func(t *testing.T, r *run) { runServe(t, r, "MinIO") }},
		{"serve-postgres", func(t *testing.T, r *run) { runServe(t, r, "PostgreSQL") }},
	} {
		if *flagOnly != "" && !strings.Contains(tc.name, *flagOnly) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, &run{t: t, topo: tc.name, bins: bins, tl: newTimeline(), rng: mrand.New(mrand.NewPCG(seed, uint64(i)))})
		})
	}
}

// A run is one topology's run: its node, load, faults and checks.
type run struct {
	t    *testing.T
	topo string
	bins binaries
	tl   *timeline
	rng  *mrand.Rand

	n        *node
	w        *workerProc
	ch       *checker
	problems []string
	stopped  bool // a fault left the node without service: no further faults
}

func (r *run) problemf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.tl.addf("PROBLEM: %s", msg)
	r.problems = append(r.problems, msg)
}

// between returns a random duration in [lo, hi).
func (r *run) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)))
}

// recover waits until a process serves, the callers have three more
// acknowledgements, and every start call sent before the fault ended has
// returned (so that no call spans two faults and a phase's slowest start
// is one fault's); after within it records a hang and stops the faults.
func (r *run) recover(after string, within time.Duration) bool {
	began := time.Now()
	if r.n.active(r.t.Context(), within) == nil {
		r.problemf("no process served within %v after %s", within, after)
		r.stopped = true
		return false
	}
	if !r.ch.progress(3, within-time.Since(began)) {
		r.problemf("no acknowledgement within %v after %s", within, after)
		r.stopped = true
		return false
	}
	if !r.ch.settled(began, within-time.Since(began)) {
		r.problemf("a start call sent before %s ended had not returned %v after it", after, within)
		r.stopped = true
		return false
	}
	return true
}

// A mark is the chain flow acknowledged last before a fault began.
type mark struct {
	a     ack
	ok    bool
	began time.Time
}

// mark returns the mark of a fault that begins now.
func (r *run) mark() mark {
	a, ok := r.ch.lastChainAck()
	return mark{a: a, ok: ok, began: time.Now()}
}

// completes waits until the flow of m ends, after the fault and its
// recovery, and records in p how long after the fault began it closed (its
// CloseTime, the server's clock on this machine): how long a flow in
// progress when the fault hit (its steps take stepWork each) waited for
// its end.
func (r *run) completes(p *phase, m mark, after string, within time.Duration) {
	if !m.ok || r.stopped {
		return
	}
	ctx, cancel := context.WithTimeout(r.t.Context(), within)
	defer cancel()
	res, err := r.ch.c.WaitForFlow(ctx, m.a.id)
	if err != nil {
		r.problemf("%s, acknowledged before %s, had not ended %v after it: %v", m.a.id, after, within, err)
		r.stopped = true
		return
	}
	r.ch.mu.Lock()
	p.slowestCompletion = max(p.slowestCompletion, res.CloseTime.Sub(m.began))
	r.ch.mu.Unlock()
}

// start runs the node's slots under supervision, waits until one serves,
// and starts the worker and the callers. The returned function stops the
// callers (the worker and the slots stop when the test ends).
func (r *run) start(slots ...*slot) (stopLoad func()) {
	t := r.t
	r.n = &node{slots: slots}
	// The test's context ends before its cleanups kill the processes: the
	// process manager stops first and restarts nothing.
	var waits []func()
	for _, s := range slots {
		waits = append(waits, s.supervise(t, t.Context()))
	}
	t.Cleanup(func() {
		for _, w := range waits {
			w()
		}
	})
	if r.n.active(t.Context(), 60*time.Second) == nil {
		t.Fatalf("no process served within 60 s:\n%s", r.tl)
	}
	addrs := r.n.addrs()
	r.w = newWorkerProc(t, addrs, r.tl)
	c, err := dex.NewClient(dex.ClientOptions{Addresses: addrs, Logger: quietLogger(), RetryBackoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r.ch = newChecker(r.topo, c, r.tl)
	r.ch.execLog = r.w.execLog
	lctx, stop := context.WithCancel(t.Context())
	wait := r.ch.run(lctx, callers, pace)
	if !r.ch.progress(20, 30*time.Second) {
		t.Fatalf("fewer than 20 starts acknowledged in 30 s:\n%s", r.tl)
	}
	return func() { stop(); wait() }
}

// killCycles SIGKILLs the active process cycles times; the process
// manager restarts it (a dev node on its directory, a serve process as a
// standby).
func (r *run) killCycles(cycles int) {
	p := r.ch.begin("SIGKILL of the active")
	for range cycles {
		if r.stopped {
			return
		}
		a := r.n.active(r.t.Context(), recoverAfterProcessFault)
		if a == nil {
			r.problemf("no active to kill")
			r.stopped = true
			return
		}
		m := r.mark()
		a.signal(syscall.SIGKILL)
		p.cycles++
		if r.recover("a SIGKILL", recoverAfterProcessFault) {
			r.completes(p, m, "a SIGKILL", recoverAfterProcessFault)
		}
	}
}

// workerKillCycles SIGKILLs the worker process cycles times and starts it
// again after 0-1 s. The tasks it held are handed out again when their
// attempts time out (3 s, workloadOptions) and every flow completes.
func (r *run) workerKillCycles(cycles int) {
	p := r.ch.begin("SIGKILL of the worker process, restarted 0-1 s later")
	for range cycles {
		if r.stopped {
			return
		}
		m := r.mark()
		r.w.kill()
		time.Sleep(r.between(0, time.Second))
		r.w.start(r.t)
		p.cycles++
		r.completes(p, m, "a worker's SIGKILL", recoverAfterProcessFault)
		if !r.recover("a worker's SIGKILL", recoverAfterProcessFault) {
			return
		}
		// One more flow, started after the restart, must complete too.
		r.completes(p, r.mark(), "the worker's restart", recoverAfterProcessFault)
	}
}

// freezeCycles freezes the active, then resumes it, cycles times: the
// first freeze lasts a random time in [long, hi), past a lease, the second
// one in [lo, short), within it, and the others in [lo, hi).
func (r *run) freezeCycles(cycles int, lo, short, long, hi time.Duration) {
	p := r.ch.begin(fmt.Sprintf("SIGSTOP of the active for %.1f-%.1f s, then SIGCONT", lo.Seconds(), hi.Seconds()))
	for i := range cycles {
		if r.stopped {
			return
		}
		a := r.n.active(r.t.Context(), recoverAfterProcessFault)
		if a == nil {
			r.problemf("no active to freeze")
			r.stopped = true
			return
		}
		var d time.Duration
		switch i {
		case 0:
			d = r.between(long, hi)
		case 1:
			d = r.between(lo, short)
		default:
			d = r.between(lo, hi)
		}
		m := r.mark()
		if !a.signal(syscall.SIGSTOP) {
			continue
		}
		time.Sleep(d)
		a.signal(syscall.SIGCONT)
		r.tl.addf("%s: resumed after %v", a.name, d.Round(time.Millisecond))
		p.cycles++
		if r.recover("a freeze", recoverAfterProcessFault) {
			r.completes(p, m, "a freeze", recoverAfterProcessFault)
		}
	}
}

// calm ends the faults: the node runs on without any for a few seconds, and
// no process may exit meanwhile (a crash loop).
func (r *run) calm() {
	r.ch.begin("none (warm-up and calm)")
	counts := make([]int, len(r.n.slots))
	for i, s := range r.n.slots {
		counts[i] = s.exitCount()
	}
	if !r.ch.progress(20, recoverAfterStoreFault) {
		r.problemf("fewer than 20 acknowledgements in %v without faults", recoverAfterStoreFault)
	}
	for i, s := range r.n.slots {
		for _, e := range s.exitsSince(counts[i]) {
			r.problemf("%s exited %d with no fault applied: %s", s.name, e.code, e.last)
		}
	}
}

// finish stops the load, checks every acknowledged flow and every exit,
// and reports the topology's rows.
func (r *run) finish(stopLoad func()) {
	t := r.t
	stopLoad()
	failures := r.ch.verify(t, t.Context(), 5*time.Minute)
	restarts := 0
	for _, s := range r.n.slots {
		s.mu.Lock()
		restarts += s.starts - 1
		exits := append([]exit(nil), s.exits...)
		s.mu.Unlock()
		for _, e := range exits {
			switch {
			case e.panicked:
				r.problemf("%s panicked: %s", s.name, e.last)
			case e.expected && e.code == -1:
			case e.code != 1:
				r.problemf("%s exited %d, want 1 (L11): %s", s.name, e.code, e.last)
			}
		}
	}
	if msg := r.w.exitedEarly(); msg != "" {
		r.problemf("%s", msg)
	}
	acks := r.report()
	t.Logf("%s: %d starts acknowledged, %d process restarts", r.topo, acks, restarts)
	if len(failures) > 0 {
		if len(failures) > 30 {
			failures = append(failures[:30], fmt.Sprintf("… and %d more", len(failures)-30))
		}
		t.Errorf("%d acknowledged flows lost, duplicated or wrong:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	if len(r.problems) > 0 {
		t.Errorf("problems:\n%s", strings.Join(r.problems, "\n"))
	}
	if t.Failed() || *flagTimeline {
		t.Logf("timeline of %s:\n%s", r.topo, r.tl)
	}
}

// report adds the topology's rows to the table and returns the number of
// acknowledgements.
func (r *run) report() int {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	byFault := map[string]*row{}
	var order []string
	total := 0
	for _, p := range r.ch.phases {
		fault := p.fault
		if fault == "warm-up" {
			fault = "none (warm-up and calm)"
		}
		rw, ok := byFault[fault]
		if !ok {
			rw = &row{topo: r.topo, fault: fault, errors: map[string]int{}}
			byFault[fault] = rw
			order = append(order, fault)
		}
		rw.cycles += p.cycles
		rw.acks += p.acks
		rw.lost += p.lost
		rw.duplicated += p.duplicated
		rw.rerun += p.rerun
		rw.longestPause = max(rw.longestPause, p.longestPause)
		rw.slowestCall = max(rw.slowestCall, p.slowestCall)
		rw.slowestCompletion = max(rw.slowestCompletion, p.slowestCompletion)
		for k, v := range p.errors {
			rw.errors[k] += v
		}
		total += p.acks
	}
	for _, f := range order {
		results = append(results, *byFault[f])
	}
	return total
}

// runDev runs a dev node (strict durability), on a small tmpfs as root.
func runDev(t *testing.T, r *run) {
	dir, disk := t.TempDir(), ""
	if os.Geteuid() == 0 {
		disk = smallDisk(t, 512<<20)
		dir = filepath.Join(disk, "data")
	}
	addr := testproc.FreeAddr(t)
	s := newSlot(t, "dev", addr, r.tl, "dev", "--data-dir", dir, "--listen", addr, "--durability", "strict")
	stopLoad := r.start(s)
	r.workerKillCycles(*flagCycles)
	r.killCycles(*flagCycles)
	r.freezeCycles(*flagCycles, 200*time.Millisecond, time.Second, 2*time.Second, 3*time.Second)
	if disk != "" {
		r.diskFull(s, disk, *flagStoreCycles)
	} else {
		t.Log("not root: the full-disk fault needs a tmpfs mount and is left out")
	}
	r.calm()
	r.finish(stopLoad)
}

// runServe runs a serve pair on MinIO (hot standby) or PostgreSQL (cold
// standby), the store behind toxiproxy.
func runServe(t *testing.T, r *run, backend string) {
	tp := startToxiproxy(t, r.bins.toxiproxy)
	var (
		store   *service
		storage string
		extra   string
	)
	switch backend {
	case "MinIO":
		var addr string
		store, addr = startMinIO(t, r.bins.minio, "dex-chaos")
		via := tp.proxy(t, "store", addr)
		storage = fmt.Sprintf("storage:\n  backend: s3\n  s3:\n    bucket: dex-chaos\n    prefix: chaos/\n    endpoint: %q\n    region: us-east-1\n    pathStyle: true\n", "http://"+via)
		extra = "standby:\n  mode: hot\n"
	case "PostgreSQL":
		var addr string
		store, addr = startPostgres(t, r.bins.pgBin)
		via := tp.proxy(t, "store", addr)
		storage = fmt.Sprintf("storage:\n  backend: postgres\n  postgres:\n    dsn: %q\n    table: dex_chaos\n", postgresDSN(via))
	}
	var slots []*slot
	for _, name := range []string{"a", "b"} {
		dir := t.TempDir()
		addr := testproc.FreeAddr(t)
		cfg := filepath.Join(dir, "serve.yaml")
		yaml := fmt.Sprintf("nodeId: chaos\nlease:\n  duration: %v\napi:\n  listen: %q\nlocalStore:\n  dir: %q\n%s%s",
			leaseDuration, addr, filepath.Join(dir, "local"), storage, extra)
		if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		slots = append(slots, newSlot(t, name, addr, r.tl, "serve", "--config", cfg))
	}
	stopLoad := r.start(slots...)
	r.workerKillCycles(*flagCycles)
	r.killCycles(*flagCycles)
	r.freezeCycles(*flagCycles, leaseDuration/3, leaseDuration-500*time.Millisecond, leaseDuration+time.Second, 2*leaseDuration+2*time.Second)
	for _, tx := range []struct {
		fault string
		toxic toxic
	}{
		{"store latency 50 ms ± 50 ms each way", toxic{kind: "latency", toxicity: 1, attrs: map[string]int{"latency": 50, "jitter": 50}}},
		{"store bandwidth 64 KB/s each way", toxic{kind: "bandwidth", toxicity: 1, attrs: map[string]int{"rate": 64}}},
		{"store connections reset 0.5 s after they open (half of them)", toxic{kind: "reset_peer", toxicity: 0.5, attrs: map[string]int{"timeout": 500}}},
	} {
		r.toxicCycles(tp, tx.fault, tx.toxic, *flagPhase, *flagStoreCycles)
	}
	r.toxicCycles(tp, fmt.Sprintf("store outage of %v (no packet passes)", *flagOutage),
		toxic{kind: "timeout", toxicity: 1, attrs: map[string]int{"timeout": 0}}, *flagOutage, *flagStoreCycles)
	r.storeRestarts(store, *flagStoreCycles)
	r.calm()
	r.finish(stopLoad)
}

// toxicCycles applies a toxic to the store's proxy for d, cycles times.
func (r *run) toxicCycles(tp *toxiproxy, fault string, tx toxic, d time.Duration, cycles int) {
	p := r.ch.begin(fault)
	for range cycles {
		if r.stopped {
			return
		}
		m := r.mark()
		tp.add(r.t, "store", tx)
		time.Sleep(d)
		tp.clear(r.t)
		r.tl.addf("toxic removed")
		p.cycles++
		if r.recover(fault, recoverAfterStoreFault) {
			r.completes(p, m, fault, recoverAfterStoreFault)
		}
	}
}

// storeRestarts SIGKILLs the store (MinIO, or PostgreSQL with its
// backends) and restarts it 1-4 s later on the same data, cycles times.
func (r *run) storeRestarts(store *service, cycles int) {
	p := r.ch.begin(store.name + " killed and restarted")
	for range cycles {
		if r.stopped {
			return
		}
		m := r.mark()
		r.tl.addf("%s: SIGKILL", store.name)
		store.kill()
		time.Sleep(r.between(time.Second, 4*time.Second))
		if err := store.startErr(r.t.Context()); err != nil {
			r.problemf("restart %s: %v", store.name, err)
			r.stopped = true
			return
		}
		r.tl.addf("%s: restarted", store.name)
		p.cycles++
		if r.recover(store.name+" restart", recoverAfterStoreFault) {
			r.completes(p, m, store.name+" restart", recoverAfterStoreFault)
		}
	}
}

// diskFull fills the dev node's disk: the server must exit 1 with one line
// naming the path, restarts on the full disk must fail the same way, and
// once space returns the node must serve again.
func (r *run) diskFull(s *slot, disk string, cycles int) {
	p := r.ch.begin("data directory's tmpfs full (ENOSPC)")
	for range cycles {
		if r.stopped {
			return
		}
		before := s.exitCount()
		m := r.mark()
		filler := filepath.Join(disk, "filler")
		if err := fill(filler); err != nil {
			r.problemf("fill %s: %v", disk, err)
			r.stopped = true
			return
		}
		r.tl.addf("disk full")
		deadline := time.Now().Add(60 * time.Second)
		for s.exitCount() == before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Second) // restarts on the full disk fail meanwhile
		if err := os.Remove(filler); err != nil {
			r.t.Fatal(err)
		}
		r.tl.addf("space returned")
		exits := s.exitsSince(before)
		if len(exits) == 0 {
			r.problemf("the dev server did not exit within 60 s of its disk filling up")
		}
		for _, e := range exits {
			if e.code != 1 || e.panicked || !strings.Contains(e.last, "disk full") || !strings.Contains(e.last, disk) {
				r.problemf("on a full disk the dev server exited %d (panic: %v) with %q; want 1 and a disk-full line naming a path under %s",
					e.code, e.panicked, e.last, disk)
			}
		}
		p.cycles++
		if r.recover("space returned", recoverAfterProcessFault) {
			r.completes(p, m, "space returned", recoverAfterProcessFault)
		}
	}
}

// smallDisk mounts a tmpfs of size bytes (unmounted when the test ends).
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes path until its file system is full.
func fill(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			return err
		}
	}
	small := make([]byte, 4096)
	for {
		if _, err := f.Write(small); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
}

// A row of the table: one fault on one topology.
type row struct {
	topo, fault               string
	cycles, acks              int
	lost, duplicated, rerun   int
	errors                    map[string]int
	longestPause, slowestCall time.Duration
	slowestCompletion         time.Duration
}

var (
	resultsMu sync.Mutex
	results   []row
)

func renderTable() string {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	var b strings.Builder
	b.WriteString("| topology | fault | cycles | flows acknowledged | lost | duplicated | steps run again | client errors | longest pause between acks | slowest start | flow in progress closed after |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|\n")
	for _, rw := range results {
		var errs []string
		for k, v := range rw.errors {
			errs = append(errs, fmt.Sprintf("%d %s", v, k))
		}
		sort.Strings(errs)
		e := "none"
		if len(errs) > 0 {
			e = strings.Join(errs, ", ")
		}
		cycles := fmt.Sprint(rw.cycles)
		if rw.cycles == 0 {
			cycles = "-"
		}
		completion := "-"
		if rw.slowestCompletion > 0 {
			completion = fmt.Sprintf("%.1f s", rw.slowestCompletion.Seconds())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %d | %s | %.1f s | %.1f s | %s |\n", rw.topo, rw.fault, cycles, rw.acks,
			rw.lost, rw.duplicated, rw.rerun, e, rw.longestPause.Seconds(), rw.slowestCall.Seconds(), completion)
	}
	return b.String()
}
