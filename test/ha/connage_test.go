package ha

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
)

// countingConn is a client connection to addr that counts the TCP
// connections it opens and records when each was opened.
type countingConn struct {
	conn  *grpc.ClientConn
	mu    sync.Mutex
	dials []time.Time
}

func dialCounting(t *testing.T, addr string) *countingConn {
	t.Helper()
	c := &countingConn{}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			c.mu.Lock()
			c.dials = append(c.dials, time.Now())
			c.mu.Unlock()
			return (&net.Dialer{}).DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c.conn = conn
	return c
}

func (c *countingConn) dialed() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.dials...)
}

// A standby closes each client connection after about 3 s with GOAWAY: a
// client that keeps calling it opens a new TCP connection 3 s (+/-10%)
// after the first, and again after the next. A connection to the active
// process stays open: a health Watch stream on it keeps working and no
// second TCP connection is opened, for longer than the standby's age.
//
// Covers: H5
func TestStandby_ClosesConnectionsAfterAbout3s(t *testing.T) {
	a, b, _, _ := startPair(t, storage(t, "fs"))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ca, cb := dialCounting(t, a.addr), dialCounting(t, b.addr)

	// The active: a Watch stream that must stay open.
	watch, err := grpc_health_v1.NewHealthClient(ca.conn).Watch(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("Watch on the active = %v, %v; want SERVING", r, err)
	}
	watchErr := make(chan error, 1)
	go func() {
		for {
			if _, err := watch.Recv(); err != nil {
				watchErr <- err
				return
			}
		}
	}()

	// The standby: a readiness Check every 100 ms, each NOT_SERVING.
	hb, ha := grpc_health_v1.NewHealthClient(cb.conn), grpc_health_v1.NewHealthClient(ca.conn)
	const watchFor = 7 * time.Second
	for start := time.Now(); time.Since(start) < watchFor; time.Sleep(100 * time.Millisecond) {
		r, err := hb.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		if err != nil || r.GetStatus() != grpc_health_v1.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("Check on the standby = %v, %v; want NOT_SERVING (a GOAWAY must not fail a call)", r, err)
		}
		if r, err := ha.Check(ctx, &grpc_health_v1.HealthCheckRequest{}); err != nil ||
			r.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Fatalf("Check on the active = %v, %v; want SERVING", r, err)
		}
	}
	select {
	case err := <-watchErr:
		t.Fatalf("the Watch stream on the active ended: %v", err)
	default:
	}
	if d := ca.dialed(); len(d) != 1 {
		t.Errorf("the client opened %d connections to the active in %v, want 1", len(d), watchFor)
	}

	d := cb.dialed()
	if len(d) < 2 {
		t.Fatalf("the client kept one connection to the standby for %v; want a new one after about 3 s", watchFor)
	}
	for i := 1; i < len(d); i++ {
		age := d[i].Sub(d[i-1])
		t.Logf("connection %d to the standby lasted %v", i, age.Round(time.Millisecond))
		if age < 2500*time.Millisecond || age > 5*time.Second {
			t.Errorf("connection %d to the standby lasted %v; want about 3 s", i, age.Round(time.Millisecond))
		}
	}
}
