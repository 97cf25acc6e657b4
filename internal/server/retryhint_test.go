package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/server"
)

// A process that does not serve says when to retry: stepping down 50 ms, a
// standby (hot, lagging or cold) 100 ms. The answer stays UNAVAILABLE.
//
// Covers: P3, A4
func TestUnavailable_RetryHintWhenANewActiveIsNear(t *testing.T) {
	s, conn := serve(t, server.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	flows := dexpb.NewFlowServiceClient(conn)
	hint := func() (time.Duration, bool) {
		t.Helper()
		_, err := flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "f"})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("GetFlowSummary = %v, want UNAVAILABLE", err)
		}
		for _, d := range status.Convert(err).Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				return ri.GetRetryDelay().AsDuration(), true
			}
		}
		return 0, false
	}
	s.SetNotServingReason("this process is a standby; retry on the active process")
	if d, ok := hint(); !ok || d != server.StandbyRetryHint {
		t.Fatalf("cold standby: retry hint %v, %v; want %v", d, ok, server.StandbyRetryHint)
	}
	var hot atomic.Bool
	hot.Store(true)
	s.SetHotStandby(hot.Load)
	if d, ok := hint(); !ok || d != server.StandbyRetryHint {
		t.Fatalf("hot standby: retry hint %v, %v; want %v", d, ok, server.StandbyRetryHint)
	}
	s.SetSteppingDown("stepping down; retry on the next address")
	if d, ok := hint(); !ok || d != server.SteppingDownRetryHint {
		t.Fatalf("stepping down: retry hint %v, %v; want %v", d, ok, server.SteppingDownRetryHint)
	}
}
