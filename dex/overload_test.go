package dex_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// refusal is the server's answer to new work beyond its capacity.
func refusal(hint time.Duration) error {
	st, _ := status.New(codes.ResourceExhausted, "server overloaded: limits.maxPendingRequests").WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(hint)})
	return st.Err()
}

// A call the server refused as overloaded (RESOURCE_EXHAUSTED with
// RetryInfo) is sent again after the hint, with the same request ID; a
// once call too, because the refusal says nothing was done.
//
// Covers: P5, E28
func TestClient_BacksOffOnOverload(t *testing.T) {
	t.Parallel()
	const hint = 40 * time.Millisecond
	var mu sync.Mutex
	var starts []*dexpb.StartFlowRequest
	var startTimes []time.Time
	rpcs := 0
	fs := &fakeFlowServer{
		startFlow: func(r *dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			starts, startTimes = append(starts, r), append(startTimes, time.Now())
			if len(starts) <= 2 {
				return nil, refusal(hint)
			}
			return &dexpb.StartFlowResponse{RunId: "run-1"}, nil
		},
		invokeRPC: func(*dexpb.InvokeRPCRequest) (*dexpb.InvokeRPCResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			rpcs++
			if rpcs == 1 {
				return nil, refusal(hint)
			}
			return &dexpb.InvokeRPCResponse{RunId: "run-1", Output: jsonValue(t, 6)}, nil
		},
	}
	c := dial(t, serve(t, nil, fs))
	run, err := c.StartFlow(testCtx(t), testFlow, "order-1", Order{ID: "1"})
	if err != nil || run.RunID != "run-1" {
		t.Fatalf("StartFlow = %+v, %v", run, err)
	}
	if len(starts) != 3 {
		t.Fatalf("StartFlow sent %d times, want 3", len(starts))
	}
	for i := 1; i < 3; i++ {
		if starts[i].GetRequestId() != starts[0].GetRequestId() {
			t.Errorf("attempt %d has request ID %q, want %q", i+1, starts[i].GetRequestId(), starts[0].GetRequestId())
		}
		if gap := startTimes[i].Sub(startTimes[i-1]); gap < hint {
			t.Errorf("attempt %d came %v after the refusal, before the hint %v", i+1, gap, hint)
		}
	}
	out, err := dex.InvokeRPC(testCtx(t), c, "counter-1", Add, 5)
	if err != nil || out != 6 {
		t.Fatalf("InvokeRPC = %d, %v", out, err)
	}
	if rpcs != 2 {
		t.Errorf("InvokeRPC sent %d times, want 2", rpcs)
	}
}

// RESOURCE_EXHAUSTED without RetryInfo (a value above a limit) is returned
// at once; so is a refusal whose hint would end after RetryTimeout.
//
// Covers: P5, E28
func TestClient_OverloadNotRetried(t *testing.T) {
	t.Parallel()
	fs := &fakeFlowServer{setAttributes: func(*dexpb.SetAttributesRequest) (*dexpb.SetAttributesResponse, error) {
		return nil, status.Error(codes.ResourceExhausted, "value: 5000000 bytes, above limits.maxPayloadBytes")
	}}
	c := dial(t, serve(t, nil, fs))
	err := c.SetAttributes(testCtx(t), "order-1", Status.Value("big"))
	if status.Code(err) != codes.ResourceExhausted || fs.count("SetAttributes") != 1 {
		t.Fatalf("err = %v after %d calls, want ErrResourceExhausted after 1", err, fs.count("SetAttributes"))
	}

	slow := &fakeFlowServer{startFlow: func(*dexpb.StartFlowRequest) (*dexpb.StartFlowResponse, error) {
		return nil, refusal(time.Hour)
	}}
	c2, err := dex.NewClient(dex.ClientOptions{Addresses: []string{serve(t, nil, slow)},
		RetryTimeout: time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	t0 := time.Now()
	_, err = c2.StartFlow(testCtx(t), testFlow, "order-2", Order{ID: "2"})
	var oe *dex.OutcomeUnknownError
	if status.Code(err) != codes.ResourceExhausted || errors.As(err, &oe) || slow.count("StartFlow") != 1 {
		t.Fatalf("err = %v after %d calls, want a plain ErrResourceExhausted after 1", err, slow.count("StartFlow"))
	}
	if d := time.Since(t0); d > 500*time.Millisecond {
		t.Errorf("returned after %v, want at once", d)
	}
}
