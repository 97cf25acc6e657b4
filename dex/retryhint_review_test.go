package dex_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
)

// Review (adversarial, today's retry hints): a once call (StopFlow) that a
// server answers UNAVAILABLE with a RetryInfo hint, as a process stepping
// down does after it may have applied the call, is sent exactly once and
// ends in an *OutcomeUnknownError; only the overload refusal
// (RESOURCE_EXHAUSTED + RetryInfo) lets a once call be sent again.
//
// Covers: P5
func TestReview_OnceCallNotResentAfterHintedUnavailable(t *testing.T) {
	t.Parallel()
	fs := &fakeFlowServer{stopFlow: func(*dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error) {
		st, _ := status.New(codes.Unavailable, "stepping down").WithDetails(
			&errdetails.RetryInfo{RetryDelay: durationpb.New(10 * time.Millisecond)})
		return nil, st.Err()
	}}
	c := dial(t, serve(t, nil, fs))
	_, err := c.StopFlow(testCtx(t), "order-1", dex.StopCancel, "")
	var unknown *dex.OutcomeUnknownError
	if !errors.As(err, &unknown) {
		t.Fatalf("StopFlow = %v, want an *OutcomeUnknownError", err)
	}
	if n := fs.count("StopFlow"); n != 1 {
		t.Fatalf("StopFlow sent %d times after a hinted UNAVAILABLE, want 1", n)
	}
}
