package node_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/node"
	"github.com/dexzd/dexzd/internal/testproc"
)

func describeNode(ctx context.Context, conn *grpc.ClientConn) (*dexpb.DescribeResponse, error) {
	return dexpb.NewAdminServiceClient(conn).Describe(ctx, &dexpb.DescribeRequest{})
}

// A step down of a process that has no standby: it drains (a running
// attempt's result is still accepted, workers are told to drain), releases
// the lease, holds off (Describe answers FAILED_PRECONDITION, public calls
// "stepped down"), and takes the lease back with a new epoch; the call
// answers takenBackByThisProcess. An attempt still running when the drain
// ends fails with NOT_COMPLETED and is retried; one never handed out is
// dispatched. A connection opened to the stepped-down instance never sees
// readiness SERVING once a public call on it said "stepped down", even
// after the take-back (H6).
//
// Covers: A3, A4, A5, A7, A8, A12, H6, T2, T4
func TestStepDown_TakeBackOnASingleProcess(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, func(c *config.Config) {
		c.Lifecycle.AttemptDrainTimeout = 700 * time.Millisecond
		c.Standby.StepDownHoldOff = 800 * time.Millisecond
		c.Standby.HeldLeasePollInterval = 50 * time.Millisecond
	})
	ctx := ctxT(t)
	w := connectWorker(t, n.conn, orderHello("w1", 2))
	start := func(id string) {
		t.Helper()
		if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: id,
			StartStep: &dexpb.Movement{StepType: "Start"}}); err != nil {
			t.Fatal(err)
		}
	}
	start("sd-1")
	start("sd-2")
	running := map[string]*dexpb.Task{}
	for range 2 {
		task := w.next()
		running[task.GetFlowId()] = task
	}
	before, err := describeNode(ctx, n.conn)
	if err != nil || before.GetNodeEpoch() != 1 {
		t.Fatalf("Describe = %v, %v", before, err)
	}

	pinned := testproc.PinnedConn(t, n.addr)
	if st, ok := testproc.Readiness(ctx, pinned); !ok || st != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("readiness before the step down = %v (ok %v)", st, ok)
	}
	wctx, stopWatching := context.WithCancel(ctx)
	observations := testproc.WatchConn(wctx, pinned)

	type answer struct {
		r   *dexpb.StepDownResponse
		err error
	}
	answered := make(chan answer, 1)
	began := time.Now()
	go func() {
		r, err := dexpb.NewAdminServiceClient(pinned).StepDown(ctx, &dexpb.StepDownRequest{
			ExpectedNodeId: before.GetNodeId(), ExpectedNodeEpoch: before.GetNodeEpoch()})
		answered <- answer{r, err}
	}()

	// The worker is told to drain; a result sent during the drain commits.
	select {
	case d := <-w.drains:
		if d.GetReason() != dexpb.DrainReason_DRAIN_REASON_STEP_DOWN {
			t.Fatalf("drain = %v, want DRAIN_REASON_STEP_DOWN", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the worker was not told to drain")
	}
	expectAck(t, w.result(running["sd-1"], decide(complete(jsonValue(1)), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	// Meanwhile the step down is in progress: Describe refuses (A8).
	fresh := testproc.PinnedConn(t, n.addr)
	if _, err := describeNode(ctx, fresh); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Describe during the step down = %v, want FAILED_PRECONDITION", err)
	}
	if code, msg := testproc.PublicCall(ctx, fresh); code != codes.Unavailable || !strings.Contains(msg, "stepped down") {
		t.Fatalf("public call during the step down = %s %q, want UNAVAILABLE naming the step down", code, msg)
	}

	var a answer
	select {
	case a = <-answered:
	case <-time.After(15 * time.Second):
		t.Fatal("the step down did not answer within 15s")
	}
	took := time.Since(began)
	if a.err != nil {
		t.Fatalf("StepDown = %v", a.err)
	}
	r := a.r
	if r.GetLeaseHolderAfterStepDown() != dexpb.LeaseHolderAfterStepDown_LEASE_HOLDER_AFTER_STEP_DOWN_TAKEN_BACK_BY_THIS_PROCESS ||
		r.GetReleasedNodeEpoch() != 1 || r.GetActiveNodeEpoch() != 2 || r.GetNodeId() != before.GetNodeId() ||
		r.GetActiveHolderProcessId() != before.GetHolderProcessId() ||
		r.GetLeaseReacquisitionHoldOff().AsDuration() != 800*time.Millisecond || r.GetLeaseHolderUnknownDetail() != "" {
		t.Fatalf("StepDown = %v", r)
	}
	// Drain (the worker answered one attempt, the other kept it until the
	// drain timeout), then the hold-off: at least 0.8 s, well under 10 s.
	if took < 800*time.Millisecond || took > 10*time.Second {
		t.Fatalf("the step down took %v", took)
	}
	// H6: the pinned connection still reaches the stepped-down instance
	// after the take-back: NOT_SERVING and "stepped down", never SERVING.
	st, ok := testproc.Readiness(ctx, pinned)
	if !ok || st != grpc_health_v1.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("readiness on the stepped-down instance's connection after the take-back = %v (ok %v), want NOT_SERVING", st, ok)
	}
	stopWatching()
	testproc.CheckH6(t, observations(), began)

	// The node serves again at epoch 2 on new connections: the committed
	// result is there, the attempt that outlived the drain failed with
	// NOT_COMPLETED and is retried.
	conn := testproc.PinnedConn(t, n.addr)
	d, err := describeNode(ctx, conn)
	if err != nil || d.GetNodeEpoch() != 2 || d.GetHolderProcessId() != before.GetHolderProcessId() {
		t.Fatalf("Describe after the take-back = %v, %v", d, err)
	}
	flows := dexpb.NewFlowServiceClient(conn)
	sum, err := flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "sd-1"})
	if err != nil || sum.GetSummary().GetStatus() != dexpb.FlowStatus_FLOW_STATUS_COMPLETED {
		t.Fatalf("sd-1 (answered during the drain) = %v, %v", sum, err)
	}
	w2 := connectWorker(t, conn, orderHello("w2", 2))
	task := w2.next()
	if task.GetFlowId() != "sd-2" || task.GetAttempt() != 2 {
		t.Fatalf("task after the take-back = %v, want sd-2 attempt 2", task)
	}
	stF, err := flows.GetFlowState(ctx, &dexpb.GetFlowStateRequest{FlowId: "sd-2"})
	if err != nil {
		t.Fatal(err)
	}
	if f := stF.GetState().GetStepExecutions()[0].GetLastFailure(); f.GetKind() != dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_NOT_COMPLETED {
		t.Fatalf("sd-2's first attempt failure = %v, want NOT_COMPLETED (A4)", f)
	}
	expectAck(t, w2.result(task, decide(complete(jsonValue(2)), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	// The old epoch's result is refused.
	expectAck(t, w2.result(running["sd-2"], decide(complete(nil), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_STALE_EPOCH)
}

// A second step down while one is in progress, and one with a stale
// precondition, answer FAILED_PRECONDITION and change nothing.
//
// Covers: A2, A8
func TestStepDown_RefusedWhileInProgressOrStale(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *config.Config) {
		c.Standby.StepDownHoldOff = 600 * time.Millisecond
		c.Standby.HeldLeasePollInterval = 50 * time.Millisecond
	})
	ctx := ctxT(t)
	admin := dexpb.NewAdminServiceClient(n.conn)
	if _, err := admin.StepDown(ctx, &dexpb.StepDownRequest{ExpectedNodeId: "dev", ExpectedNodeEpoch: 7}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("StepDown with a stale epoch = %v, want FAILED_PRECONDITION", err)
	}
	d, err := describeNode(ctx, n.conn)
	if err != nil || d.GetNodeEpoch() != 1 {
		t.Fatalf("Describe after the refused step down = %v, %v", d, err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := admin.StepDown(ctx, &dexpb.StepDownRequest{ExpectedNodeId: d.GetNodeId(), ExpectedNodeEpoch: 1})
		first <- err
	}()
	// Once Describe says a step down is in progress, a second one is
	// refused.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := describeNode(ctx, n.conn)
		if status.Code(err) == codes.FailedPrecondition {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Describe = %v; the first step down never showed", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := admin.StepDown(ctx, &dexpb.StepDownRequest{ExpectedNodeId: d.GetNodeId(), ExpectedNodeEpoch: 1}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second StepDown = %v, want FAILED_PRECONDITION while the first is in progress", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first StepDown = %v", err)
	}
}

// stuckStore is a local store whose Close blocks until released: a task
// stuck on the store.
type stuckStore struct {
	flowstore.Store
	release chan struct{}
}

func (s *stuckStore) Close() error {
	<-s.release
	return s.Store.Close()
}

// A task stuck on the old lease period's local store keeps the process
// from serving again: with nobody taking over, the step down answers
// INTERNAL after the bound and the process exits 1 without taking the
// lease back.
//
// Covers: A7, L11
func TestStepDown_StuckStoreExitsWithoutTakingTheLease(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse(nil, config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Standby.StepDownHoldOff = 200 * time.Millisecond
	cfg.Standby.HeldLeasePollInterval = 50 * time.Millisecond
	cfg.Lifecycle.AttemptDrainTimeout = 200 * time.Millisecond
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	done := make(chan error, 1)
	ready := make(chan net.Addr, 1)
	go func() {
		done <- node.RunLocal(ctx, node.LocalOptions{Mode: config.ModeDev, Config: cfg, DataDir: dir, Listener: lis,
			Ready: func(a net.Addr) { ready <- a }, StuckStoreBound: 1500 * time.Millisecond,
			OpenStore: func(d string) (flowstore.Store, error) {
				s, err := flowstore.OpenLocal(d, nil)
				if err != nil {
					return nil, err
				}
				return &stuckStore{Store: s, release: release}, nil
			}})
	}()
	addr := (<-ready).String()
	conn := testproc.PinnedConn(t, addr)
	began := time.Now()
	_, err = dexpb.NewAdminServiceClient(conn).StepDown(ctx, &dexpb.StepDownRequest{ExpectedNodeId: cfg.NodeID, ExpectedNodeEpoch: 1})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "still open") {
		t.Fatalf("StepDown with a stuck store = %v, want INTERNAL naming the open store", err)
	}
	if took := time.Since(began); took < 1500*time.Millisecond || took > 8*time.Second {
		t.Fatalf("the step down answered after %v, want about the 1.5 s bound", took)
	}
	select {
	case err := <-done:
		if !errors.Is(err, node.ErrStuckStore) || node.ExitCode(err) != 1 {
			t.Fatalf("RunLocal = %v (exit %d), want ErrStuckStore and exit 1", err, node.ExitCode(err))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the process did not exit after the stuck step down")
	}
	select {
	case <-ready:
		t.Fatal("the process served again (took the lease back) with the store stuck")
	default:
	}
}
