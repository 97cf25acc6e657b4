package dex_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
)

// A request larger than the server's message limit is refused by gRPC
// before the server reads it ("received message larger than max"): the
// error says which limit that is and matches ErrTooLarge, and the call is
// not retried.
//
// Covers: E28
func TestClient_RequestAboveTheMessageLimitNamesTheLimit(t *testing.T) {
	t.Parallel()
	fs := &fakeFlowServer{startFlow: func(*dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
		return &dexpb.StartFlowResponse{RunId: "r"}, nil
	}}
	c := dial(t, serve(t, nil, fs)) // the fake's server keeps gRPC's 4 MiB limit
	_, err := c.StartFlow(testCtx(t), testFlow, "big", Order{ID: strings.Repeat("x", 5<<20)})
	if !errors.Is(err, dex.ErrTooLarge) || !strings.Contains(err.Error(), "limits.maxRequestBytes") {
		t.Fatalf("StartFlow of a 5 MiB input = %v; want ErrTooLarge naming limits.maxRequestBytes", err)
	}
	if n := fs.count("StartFlow"); n != 0 {
		t.Errorf("the server's handler saw %d StartFlow calls, want 0", n)
	}
}
