package e2e

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// replyLoser is a client interceptor that loses the reply of the first
// call to each method it is armed for: the call reaches the server and is
// applied, and the client sees UNAVAILABLE instead of the answer (a
// connection cut after the commit, a server that lost its lease after
// committing). It records the request ID of every call it sees.
type replyLoser struct {
	mu    sync.Mutex
	armed map[string]bool // full method name -> lose its next reply
	ids   map[string][]string
}

func (l *replyLoser) arm(method string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed[method] = true
}

func (l *replyLoser) requestIDs(method string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids[method]...)
}

func (l *replyLoser) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(interface{ GetRequestId() string }); ok {
		l.mu.Lock()
		l.ids[method] = append(l.ids[method], r.GetRequestId())
		l.mu.Unlock()
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	l.mu.Lock()
	lose := l.armed[method] && err == nil
	l.armed[method] = false
	l.mu.Unlock()
	if lose {
		return status.Error(codes.Unavailable, "test: the reply was lost")
	}
	return err
}

// A Reset and a ContinueAsNew whose replies are lost after the server
// applied them (issue 14): the SDK sends each again with the same request
// ID, and the retry answers the run the first send made. Exactly one reset
// and one continuation happen (three runs of the flow ID, the last one
// running and linked to the others); before the fix the retry failed
// (FAILED_PRECONDITION / NOT_FOUND: the run it names is no longer the
// latest). A caller retrying by hand with the same request ID, after the
// new run has itself moved on, still gets the run its request made.
//
// Covers: E37
func TestReset_AndContinueAsNewRetriedAfterALostReplyApplyOnce(t *testing.T) {
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", dir, "--listen", addr)
	p.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	loser := &replyLoser{armed: map[string]bool{}, ids: map[string][]string{}}
	fast := dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}, ReconnectBackoff: fast},
		dex.ClientOptions{RetryBackoff: fast, DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(loser.intercept)}},
		resetFlow)

	run, err := dex.Start[Pack](ctx, c, resetFlow, "reset-retry", "box")
	if err != nil {
		t.Fatal(err)
	}
	waitWaiting(t, ctx, c, run.FlowID, "Ship-1")

	loser.arm(dexpb.FlowService_ResetFlow_FullMethodName)
	reset, err := c.Reset(ctx, run.FlowID, run.RunID, dex.ResetToBeginning(), dex.WithResetReason("lost reply"))
	if err != nil {
		t.Fatalf("Reset after a lost reply: %v", err)
	}
	ids := loser.requestIDs(dexpb.FlowService_ResetFlow_FullMethodName)
	if len(ids) != 2 || ids[0] == "" || ids[0] != ids[1] {
		t.Fatalf("ResetFlow sent with request IDs %q, want twice the same", ids)
	}
	resetID := ids[0]
	hist, err := c.GetFlowHistory(ctx, run.FlowID, dex.HistoryQuery{}, dex.WithRunID(reset))
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Events) == 0 || hist.Events[0].ResetRequestID != resetID {
		t.Fatalf("the reset run's first event %+v, want its FlowStarted naming request %q", hist.Events, resetID)
	}
	st, err := c.GetFlowState(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Summary.RunID != reset || st.ResetFromRunID != run.RunID || st.Summary.Status != dex.StatusRunning || st.ResetRunID != "" {
		t.Fatalf("latest run %s (%v, reset from %q, reset to %q), want %s RUNNING reset from %s, not reset again",
			st.Summary.RunID, st.Summary.Status, st.ResetFromRunID, st.ResetRunID, reset, run.RunID)
	}

	waitWaiting(t, ctx, c, run.FlowID, "Ship-1")
	loser.arm(dexpb.FlowService_ContinueAsNew_FullMethodName)
	cont, err := c.ContinueAsNew(ctx, run.FlowID, reset, "lost reply")
	if err != nil {
		t.Fatalf("ContinueAsNew after a lost reply: %v", err)
	}
	ids = loser.requestIDs(dexpb.FlowService_ContinueAsNew_FullMethodName)
	if len(ids) != 2 || ids[0] == "" || ids[0] != ids[1] {
		t.Fatalf("ContinueAsNew sent with request IDs %q, want twice the same", ids)
	}
	st, err = c.GetFlowState(ctx, run.FlowID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Summary.RunID != cont || cont != reset+".continued-1" || st.Summary.Status != dex.StatusRunning {
		t.Fatalf("latest run %s (%v), want %s = %s.continued-1 RUNNING: continued once", st.Summary.RunID, st.Summary.Status, cont, reset)
	}

	// By hand, later: the reset's request ID still answers the reset's
	// run, though that run has continued since, and resets nothing.
	again, err := c.Reset(ctx, run.FlowID, run.RunID, dex.ResetToBeginning(), dex.WithRequestID(resetID))
	if err != nil || again != reset {
		t.Fatalf("Reset retried by hand: %q, %v; want %s", again, err, reset)
	}
	again, err = c.ContinueAsNew(ctx, run.FlowID, reset, "", dex.WithRequestID(ids[0]))
	if err != nil || again != cont {
		t.Fatalf("ContinueAsNew retried by hand: %q, %v; want %s", again, err, cont)
	}
	// Another request ID is a new reset of a run that is not the latest.
	if _, err := c.Reset(ctx, run.FlowID, run.RunID, dex.ResetToBeginning()); !errors.Is(err, dex.ErrFailedPrecondition) {
		t.Fatalf("Reset of a replaced run with a new request ID: %v, want FAILED_PRECONDITION", err)
	}

	page, err := c.ListFlows(ctx, dex.FlowQuery{FlowType: "reset"})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, f := range page.Flows {
		if f.FlowID == run.FlowID {
			runs++
		}
	}
	if runs != 3 {
		t.Fatalf("%d runs of %s, want 3: the first, its reset and its continuation", runs, run.FlowID)
	}

	waitWaiting(t, ctx, c, run.FlowID, "Ship-1")
	if err := c.Publish(ctx, run.FlowID, []dex.Message{Go.Message("go")}); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, run.FlowID)
	if err != nil || res.RunID != cont || res.Status != dex.StatusCompleted {
		t.Fatalf("the flow: %v, %v; want %s COMPLETED", res, err, cont)
	}
}
