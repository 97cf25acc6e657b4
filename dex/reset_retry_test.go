package dex_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Reset and ContinueAsNew carry a request ID per call (issue 14): the
// first send answers UNAVAILABLE (the server may have applied it and lost
// the reply), the SDK sends it again with the same request ID and returns
// the new run the server answers; the next call has another ID, a caller's
// WithRequestID is sent as given, and WithRequestID("") is sent once.
//
// Covers: E37
func TestClient_ResetAndContinueAsNewRetryWithTheirRequestID(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var resets []*dexpb.ResetFlowRequest
	var continues []*dexpb.ContinueAsNewRequest
	srv := &fakeFlowServer{
		resetFlow: func(r *dexpb.ResetFlowRequest) (*dexpb.ResetFlowResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			resets = append(resets, r)
			if len(resets)%2 == 1 {
				return nil, status.Error(codes.Unavailable, "lease lost") // maybe applied
			}
			return &dexpb.ResetFlowResponse{RunId: "run-2", ResetRunId: r.GetRunId()}, nil
		},
		continueAsNew: func(r *dexpb.ContinueAsNewRequest) (*dexpb.ContinueAsNewResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			continues = append(continues, r)
			if len(continues)%2 == 1 {
				return nil, status.Error(codes.Unavailable, "lease lost")
			}
			return &dexpb.ContinueAsNewResponse{NewRunId: "run-1.continued-1",
				Status: dexpb.FlowStatus_FLOW_STATUS_CONTINUED_AS_NEW}, nil
		},
	}
	c := dial(t, serve(t, nil, srv))
	ctx := testCtx(t)

	run, err := c.Reset(ctx, "order-42", "run-1", dex.ResetToBeginning(), dex.WithResetReason("fix"))
	if err != nil || run != "run-2" {
		t.Fatalf("Reset = %q, %v", run, err)
	}
	if len(resets) != 2 || resets[0].GetRequestId() == "" || resets[0].GetRequestId() != resets[1].GetRequestId() {
		t.Fatalf("reset request IDs = %v", resets)
	}
	if _, err := c.Reset(ctx, "order-42", "run-1", dex.ResetToBeginning(), dex.WithRequestID("mine")); err != nil {
		t.Fatal(err)
	}
	if resets[2].GetRequestId() != "mine" || resets[3].GetRequestId() != "mine" {
		t.Errorf("WithRequestID: sent %q, %q", resets[2].GetRequestId(), resets[3].GetRequestId())
	}
	run, err = c.ContinueAsNew(ctx, "order-42", "run-1", "manual")
	if err != nil || run != "run-1.continued-1" {
		t.Fatalf("ContinueAsNew = %q, %v", run, err)
	}
	if len(continues) != 2 || continues[0].GetRequestId() == "" || continues[0].GetRequestId() != continues[1].GetRequestId() {
		t.Fatalf("continue request IDs = %v", continues)
	}
	if continues[0].GetRequestId() == resets[0].GetRequestId() {
		t.Error("two calls share a request ID")
	}

	// Without a request ID the call is sent at most once.
	_, err = c.Reset(ctx, "order-42", "run-1", dex.ResetToBeginning(), dex.WithRequestID(""))
	var unknown *dex.OutcomeUnknownError
	if !errors.As(err, &unknown) || len(resets) != 5 {
		t.Fatalf("Reset without a request ID: %v after %d sends, want an *OutcomeUnknownError after one", err, len(resets)-4)
	}
	_, err = c.ContinueAsNew(ctx, "order-42", "run-1", "", dex.WithRequestID(""))
	if !errors.As(err, &unknown) || len(continues) != 3 {
		t.Fatalf("ContinueAsNew without a request ID: %v after %d sends", err, len(continues)-2)
	}
}
