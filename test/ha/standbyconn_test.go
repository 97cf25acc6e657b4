package ha

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// handOverBound is how soon after a process logs "serving" a client whose
// connection to it opened while it was a standby must be answered by it
// (issue 10, item 2).
const handOverBound = 500 * time.Millisecond

// A process that starts serving serves at once every client that reached
// it while it was a standby: the connections its standby phase accepted are
// closed (GOAWAY) as it starts serving, instead of answering "hot standby"
// until their 3 s age (H5), so clients reconnect straight to the serving
// instance. For a takeover after a SIGKILL of the active and for a step
// down handed over to the hot standby (dexcli), it measures the time from
// the new active's "serving" log line to
//
//   - the first successful call of an SDK client with both addresses that
//     calls every 10 ms and was refused by the standby ("hot standby")
//     before it served: under 0.5 s, and no "hot standby" answer once the
//     process served plus that bound;
//   - every connection the standby phase accepted (one opened every 200 ms,
//     each seen answering dex.HotStandby SERVING) either answering SERVING or
//     ending: under 0.5 s.
//
// Before the fix both were 1.7-3 s (the standby's connection age).
//
// Covers: H5, S7
func TestStandbyConnections_ServedOnceTheProcessServes(t *testing.T) {
	for _, backend := range []string{"fs", "s3"} {
		for _, handOver := range []bool{false, true} {
			name := backend + "/takeover-after-SIGKILL"
			if handOver {
				name = backend + "/step-down-hand-over"
			}
			t.Run(name, func(t *testing.T) { standbyConnsServed(t, backend, handOver) })
		}
	}
}

// attempt is one gRPC call attempt the SDK client made.
type attempt struct {
	at     time.Time // when it ended
	target string
	code   codes.Code
	msg    string
}

// attemptLog records every unary call attempt of an SDK client, with the
// address it went to.
type attemptLog struct {
	mu  sync.Mutex
	all []attempt
}

func (l *attemptLog) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if strings.HasSuffix(method, "/ListFlows") {
		st, _ := status.FromError(err)
		l.mu.Lock()
		l.all = append(l.all, attempt{at: time.Now(), target: cc.Target(), code: st.Code(), msg: st.Message()})
		l.mu.Unlock()
	}
	return err
}

func (l *attemptLog) snapshot() []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]attempt(nil), l.all...)
}

// standbyConn is a connection opened to the standby while it was one.
type standbyConn struct {
	conn   *grpc.ClientConn
	opened time.Time
}

var acquiredLine = regexp.MustCompile(`time=(\S+) level=INFO msg="lease acquired"`)

func standbyConnsServed(t *testing.T, backend string, handOver bool) {
	a, b, pa, pb := startPairMode(t, storage(t, backend), leaseDuration, true)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	attempts := &attemptLog{}
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{a.addr, b.addr}, Logger: quietLogger(),
		RetryBackoff: fastBackoff, DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(attempts.interceptor)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ListFlows(ctx, dex.FlowQuery{PageSize: 1}); err != nil {
		t.Fatal(err)
	}

	// The client calls every 10 ms, each call with a deadline.
	lctx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for lctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(lctx, 2*time.Second)
			_, _ = c.ListFlows(cctx, dex.FlowQuery{PageSize: 1})
			ccancel()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer func() { stopLoad(); <-loadDone }()

	// Connections to the standby, one every 200 ms until it serves.
	var mu sync.Mutex
	var conns []standbyConn
	servingSeen := make(chan struct{})
	openerDone := make(chan struct{})
	go func() {
		defer close(openerDone)
		for {
			select {
			case <-servingSeen:
				return
			case <-ctx.Done():
				return
			default:
			}
			conn := testproc.PinnedConn(t, b.addr)
			opened := time.Now()
			if hotStandbyServing(ctx, conn) {
				mu.Lock()
				conns = append(conns, standbyConn{conn: conn, opened: opened})
				mu.Unlock()
			}
			select {
			case <-time.After(200 * time.Millisecond):
			case <-servingSeen:
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)

	var cli chan stepDownOut
	if handOver {
		cli = make(chan stepDownOut, 1)
		go func() {
			out, _ := cliStepDown(t, a.addr)
			cli <- out
		}()
	} else {
		pa.Signal(t, syscall.SIGKILL)
	}
	pb.Serving(t, leaseDuration+30*time.Second)
	close(servingSeen)
	<-openerDone
	served := servingTime(t, pb)

	// Each connection the standby phase accepted that is still open: how
	// long after "serving" it answers SERVING or ends.
	acquired := logStamp(t, pb, acquiredLine)
	mu.Lock()
	open := append([]standbyConn(nil), conns...)
	mu.Unlock()
	var worst time.Duration
	checked := 0
	for _, sc := range open {
		if !sc.opened.Before(acquired) {
			continue
		}
		checked++
		d, how := servedOrEnded(ctx, sc.conn, served)
		t.Logf("connection opened %v before serving: %s %v after serving", ms(served.Sub(sc.opened)), how, ms(d))
		worst = max(worst, d)
	}
	if checked == 0 {
		t.Fatalf("no connection to the standby was opened before it acquired the lease")
	}

	// The SDK client: its first success after "serving", and the calls the
	// standby refused.
	deadline := time.Now().Add(5 * time.Second)
	var first time.Time
	for first.IsZero() && time.Now().Before(deadline) {
		for _, at := range attempts.snapshot() {
			if at.code == codes.OK && at.at.After(served) {
				first = at.at
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopLoad()
	<-loadDone
	all := attempts.snapshot()
	var refusedBefore, refusedAfter, refusedLate int
	for _, at := range all {
		if at.code != codes.Unavailable || !strings.Contains(at.msg, "standby") || !strings.HasSuffix(at.target, b.addr) {
			continue
		}
		switch {
		case !at.at.After(served):
			refusedBefore++
		case at.at.After(served.Add(handOverBound)):
			refusedLate++
			refusedAfter++
		default:
			refusedAfter++
		}
	}
	if handOver {
		if out := <-cli; out.LeaseHolderAfterStepDown != "takenOverByAnotherProcess" {
			t.Fatalf("step down = %+v", out)
		}
	}
	if refusedBefore == 0 {
		t.Fatalf("the client was never refused by the standby before it served: it had no connection to the standby")
	}
	if first.IsZero() {
		t.Fatalf("no successful call within 5 s of serving")
	}
	clientDelay := first.Sub(served)
	t.Logf("%s: first successful SDK call %v after serving; the standby refused %d calls before serving, %d after (%d later than %v); its connections were served or ended at most %v after serving",
		backend, ms(clientDelay), refusedBefore, refusedAfter, refusedLate, handOverBound, ms(worst))
	if clientDelay > handOverBound {
		t.Errorf("the SDK client was first answered %v after the new active served, want under %v", ms(clientDelay), handOverBound)
	}
	if refusedLate > 0 {
		t.Errorf("%d calls were refused as by a standby more than %v after the process served", refusedLate, handOverBound)
	}
	if worst > handOverBound {
		t.Errorf("a connection accepted by the standby phase was neither served nor ended until %v after serving, want under %v",
			ms(worst), handOverBound)
	}
}

// hotStandbyServing reports whether conn's server answers dex.HotStandby
// SERVING: the connection is bound to a hot standby's phase.
func hotStandbyServing(ctx context.Context, conn *grpc.ClientConn) bool {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := grpc_health_v1.NewHealthClient(conn).Check(cctx, &grpc_health_v1.HealthCheckRequest{Service: "dex.HotStandby"})
	return err == nil && r.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING
}

// servedOrEnded polls conn's readiness every 10 ms until it answers
// SERVING or the connection is gone, and returns how long after served
// that was (at most 5 s) and which.
func servedOrEnded(ctx context.Context, conn *grpc.ClientConn, served time.Time) (time.Duration, string) {
	for {
		st, ok := testproc.Readiness(ctx, conn)
		now := time.Now()
		switch {
		case !ok:
			return now.Sub(served), "ended"
		case st == grpc_health_v1.HealthCheckResponse_SERVING:
			return now.Sub(served), "served"
		case now.Sub(served) > 5*time.Second || ctx.Err() != nil:
			return now.Sub(served), fmt.Sprintf("still %v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logStamp returns the time of the first line of p's log that re matches
// (its first group is the time).
func logStamp(t *testing.T, p *testproc.Proc, re *regexp.Regexp) time.Time {
	t.Helper()
	m := re.FindStringSubmatch(p.Log())
	if m == nil {
		t.Fatalf("no %v in the log:\n%s", re, p.Log())
	}
	ts, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatal(err)
	}
	return ts
}
