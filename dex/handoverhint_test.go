package dex_test

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
)

// An UNAVAILABLE that carries a retry hint (a process stepping down, a hot
// standby about to take over) is retried after the hint, not after a
// backoff that grows towards RetryBackoff.Max: over 12 such answers the
// client waits about 12 hints (~0.3 s), where the backoff alone would wait
// 11 maxima (~5.5 s).
//
// Covers: P5
func TestClient_UnavailableWithHintRetriesSoon(t *testing.T) {
	t.Parallel()
	const hint = 20 * time.Millisecond
	var mu sync.Mutex
	calls := 0
	fs := &fakeFlowServer{getFlowSummary: func(*dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls <= 12 {
			st, _ := status.New(codes.Unavailable, "stepping down").WithDetails(
				&errdetails.RetryInfo{RetryDelay: durationpb.New(hint)})
			return nil, st.Err()
		}
		return &dexpb.GetFlowSummaryResponse{Summary: &dexpb.FlowSummary{FlowId: "f1", RunId: "r1"}}, nil
	}}
	c, err := dex.NewClient(dex.ClientOptions{
		Addresses:    []string{serve(t, nil, fs)},
		RetryBackoff: dex.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		Logger:       quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	began := time.Now()
	if _, err := c.GetFlowSummary(testCtx(t), "f1"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("13 calls took %v; want about 12 hints of %v, not a backoff growing to 500 ms", took, hint)
	}
}
