package cli

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dexzd/dexzd/api/dexpb"
)

// blackHole returns the address of a listener that takes connections and
// never answers, as a frozen (SIGSTOPped) process's kernel does.
func blackHole(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return lis.Addr().String()
}

// stuckHealth is a health service that never answers.
type stuckHealth struct {
	grpc_health_v1.UnimplementedHealthServer
}

func (stuckHealth) Check(ctx context.Context, _ *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// frozenServer serves f and a health service that never answers: a server
// that froze after the connection was up. It returns its address.
func frozenServer(t *testing.T, f *fakeServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	dexpb.RegisterFlowServiceServer(srv, f)
	grpc_health_v1.RegisterHealthServer(srv, stuckHealth{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// A frozen server, before or after the connection is up, costs a dexcli
// call the detection bound, not its whole --timeout: a read moves on to the
// next address; a call that must not run twice stops and says the request
// may have taken effect. A long call on a server that still answers its
// health checks is not cut off. (Not parallel: it shortens the bound.)
func TestUnresponsiveServer_MovesOnWithinTheBound(t *testing.T) {
	old := unresponsiveAfter
	unresponsiveAfter = 400 * time.Millisecond
	defer func() { unresponsiveAfter = old }()

	hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	frozen := &fakeServer{
		describe: func(ctx context.Context, _ *dexpb.DescribeRequest) (*dexpb.DescribeResponse, error) {
			return nil, hang(ctx)
		},
		getSummary: func(ctx context.Context, _ *dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error) {
			return nil, hang(ctx)
		},
		invokeRPC: func(ctx context.Context, _ *dexpb.InvokeRPCRequest) (*dexpb.InvokeRPCResponse, error) {
			return nil, hang(ctx)
		},
	}
	frozenAddr := frozenServer(t, frozen)
	good := fixtureServer()
	goodAddr := good.start(t)

	began := time.Now()
	r := runCLI(t, "--server", blackHole(t)+","+frozenAddr+","+goodAddr, "flow", "describe", "order-42", "--timeout", "20s")
	r.wantCode(t, exitOK)
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("the read took %v past a frozen address and a black hole; want about two bounds (0.8 s)", took)
	}
	if n := len(frozen.callsTo("GetFlowSummary")); n != 1 {
		t.Errorf("GetFlowSummary reached the frozen server %d times, want 1", n)
	}

	began = time.Now()
	r = runCLI(t, "--server", frozenAddr+","+goodAddr, "flow", "rpc", "order-42", "status", "--timeout", "20s")
	r.wantCode(t, exitFailure)
	r.wantStderr(t, "unresponsive", "may have taken effect")
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("the RPC took %v on a frozen server; want about one bound", took)
	}
	if n := len(good.callsTo("InvokeRPC")); n != 0 {
		t.Errorf("InvokeRPC sent again to the next address after a frozen server took it")
	}

	// A long call on a server whose health service answers goes on.
	slow := fixtureServer()
	slow.waitForFlow = func(ctx context.Context, _ *dexpb.WaitForFlowRequest) (*dexpb.WaitForFlowResponse, error) {
		select {
		case <-time.After(3 * unresponsiveAfter):
			return &dexpb.WaitForFlowResponse{Result: fixtureResult()}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	slowAddr := slow.startWithHealth(t)
	r = runCLI(t, "--server", slowAddr, "flow", "wait", "order-42", "--timeout", "20s")
	r.wantCode(t, exitOK)
}
