package testproc

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
)

// PinnedConn returns a client connection to addr that can dial only once:
// every call on it goes over that one HTTP/2 connection, and once the
// server closes it every call fails. It shows what one connection sees.
func PinnedConn(tb testing.TB, addr string) *grpc.ClientConn {
	tb.Helper()
	var dialed atomic.Bool
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			if dialed.Swap(true) {
				return nil, errors.New("pinned: this connection may be dialed only once")
			}
			return (&net.Dialer{}).DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Readiness is one readiness Check of dex.FlowService on conn; ok is
// false when the call failed (the connection is gone).
func Readiness(ctx context.Context, conn *grpc.ClientConn) (st grpc_health_v1.HealthCheckResponse_ServingStatus, ok bool) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := grpc_health_v1.NewHealthClient(conn).Check(cctx, &grpc_health_v1.HealthCheckRequest{Service: "dex.FlowService"})
	if err != nil {
		return 0, false
	}
	return r.GetStatus(), true
}

// PublicCall is one public call (ListFlows) on conn: its status code and
// message (codes.OK and "" when it succeeded).
func PublicCall(ctx context.Context, conn *grpc.ClientConn) (codes.Code, string) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := dexpb.NewFlowServiceClient(conn).ListFlows(cctx, &dexpb.ListFlowsRequest{})
	st, _ := status.FromError(err)
	return st.Code(), st.Message()
}

// Observation is what one connection answered at one moment: a readiness
// Check, then a public call.
type Observation struct {
	At        time.Time
	Readiness grpc_health_v1.HealthCheckResponse_ServingStatus
	ReadyOK   bool
	Code      codes.Code
	Msg       string
}

// SteppedDown reports whether the public call answered that the process
// stepped down.
func (o Observation) SteppedDown() bool {
	return o.Code == codes.Unavailable && strings.Contains(o.Msg, "stepped down")
}

// WatchConn alternates readiness Checks and public calls on conn until
// ctx ends; the returned function waits for that and returns what it saw.
func WatchConn(ctx context.Context, conn *grpc.ClientConn) func() []Observation {
	var mu sync.Mutex
	var seen []Observation
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			o := Observation{At: time.Now()}
			o.Readiness, o.ReadyOK = Readiness(ctx, conn)
			o.Code, o.Msg = PublicCall(ctx, conn)
			mu.Lock()
			seen = append(seen, o)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() []Observation {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// CheckH6 fails the test if a readiness Check in seen answered SERVING
// after a public call on the same connection answered "stepped down"
// (H6), or if no public call said so (the test saw nothing).
func CheckH6(tb testing.TB, seen []Observation, began time.Time) {
	tb.Helper()
	stepped := false
	for i, o := range seen {
		if stepped && o.ReadyOK && o.Readiness == grpc_health_v1.HealthCheckResponse_SERVING {
			tb.Fatalf("observation %d at %v: readiness SERVING on a connection whose public calls said stepped down (H6)",
				i, o.At.Sub(began))
		}
		if o.SteppedDown() {
			stepped = true
		}
	}
	if !stepped {
		tb.Fatalf("none of %d observations saw the step down", len(seen))
	}
}
