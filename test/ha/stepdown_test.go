package ha

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// runCLI runs dexcli with args and returns its stdout, stderr and exit
// status.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(testproc.CLI(t), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("dexcli %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// describeOut is `dexcli admin describe -o json`.
type describeOut struct {
	NodeID          string `json:"nodeId"`
	NodeEpoch       string `json:"nodeEpoch"`
	HolderProcessID string `json:"holderProcessId"`
}

// stepDownOut is `dexcli admin step-down -o json` (A12).
type stepDownOut struct {
	ExpectedNodeID            string `json:"expectedNodeId"`
	ExpectedNodeEpoch         string `json:"expectedNodeEpoch"`
	NodeID                    string `json:"nodeId"`
	ReleasedNodeEpoch         string `json:"releasedNodeEpoch"`
	LeaseReacquisitionHoldOff any    `json:"leaseReacquisitionHoldOff"`
	LeaseHolderAfterStepDown  string `json:"leaseHolderAfterStepDown"`
	LeaseHolderUnknownDetail  string `json:"leaseHolderUnknownDetail"`
	ActiveNodeEpoch           string `json:"activeNodeEpoch"`
	ActiveHolderProcessID     string `json:"activeHolderProcessId"`
}

func cliDescribe(t *testing.T, addr string) describeOut {
	t.Helper()
	stdout, stderr, code := runCLI(t, "admin", "describe", "-o", "json", "--server", addr)
	var d describeOut
	if code != 0 || json.Unmarshal([]byte(stdout), &d) != nil {
		t.Fatalf("dexcli admin describe --server %s: exit %d\n%s%s", addr, code, stdout, stderr)
	}
	return d
}

// cliStepDown steps the process at addr down with dexcli, expecting what
// describe returns (A11), and returns the outcome and how long the call
// took.
func cliStepDown(t *testing.T, addr string) (stepDownOut, time.Duration) {
	t.Helper()
	began := time.Now()
	stdout, stderr, code := runCLI(t, "admin", "step-down", "--yes", "-o", "json", "--server", addr)
	took := time.Since(began)
	var r stepDownOut
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
		t.Fatalf("dexcli admin step-down --server %s: exit %d\n%s%s", addr, code, stdout, stderr)
	}
	return r, took
}

// runChain starts a chain flow and waits for its result.
func runChain(t *testing.T, ctx context.Context, c *dex.Client, id string, input int) *dex.FlowResult {
	t.Helper()
	if _, err := c.StartFlow(ctx, chainFlow, id, input); err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	res, err := c.WaitForFlow(ctx, id)
	if err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("%s: %v, %v", id, res, err)
	}
	return res
}

// chainLoad starts chain flows one after another on c until stop is
// called, and records every flow whose start was acknowledged.
type chainLoad struct {
	acked sync.Map // flow ID -> input
	stop  func()
	done  chan struct{}
}

func startChainLoad(ctx context.Context, c *dex.Client, prefix string) *chainLoad {
	lctx, cancel := context.WithCancel(ctx)
	l := &chainLoad{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i := 0; lctx.Err() == nil; i++ {
			id := fmt.Sprintf("%s-%d", prefix, i)
			if _, err := c.StartFlow(lctx, chainFlow, id, i); err == nil {
				l.acked.Store(id, i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return l
}

// check stops the load and checks that every acknowledged flow completed
// with its input + 3.
func (l *chainLoad) check(t *testing.T, ctx context.Context, c *dex.Client) int {
	t.Helper()
	l.stop()
	<-l.done
	n := 0
	l.acked.Range(func(k, v any) bool {
		res, err := c.WaitForFlow(ctx, k.(string))
		if err != nil || res.Status != dex.StatusCompleted {
			t.Fatalf("%s: %v, %v", k, res, err)
		}
		if out, err := dex.Output[int](res); err != nil || out != v.(int)+3 {
			t.Fatalf("%s output = %d (%v), want %d", k, out, err, v.(int)+3)
		}
		n++
		return true
	})
	return n
}

// An operator steps the active down with dexcli while clients and a
// worker run chain flows through both addresses: the hot standby takes
// over within a poll interval, the step down answers as soon as it has
// (long before the 5 s hold-off) naming the new holder, the stepped-down
// process stays up as a hot standby, and every acknowledged flow
// completes. A step down that reaches the new active through a connection
// opened while it was a standby changes nothing. Stepping the new active
// down hands the node back.
//
// Covers: A1, A3, A5, A6, A7, A10, A11, A12, A14, S7, P5
func TestStepDown_HandsOverToAHotStandby(t *testing.T) {
	for _, backend := range []string{"s3", "postgres"} {
		t.Run(backend, func(t *testing.T) { stepDownHandOver(t, backend) })
	}
}

func stepDownHandOver(t *testing.T, backend string) {
	a, b, pa, pb := startPairMode(t, storage(t, backend), leaseDuration, true)
	addrs := []string{a.addr, b.addr}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	runWorker(t, ctx, addrs, 16, chainFlow)
	c := dialClient(t, ctx, addrs)

	load := startChainLoad(ctx, c, "sd")
	time.Sleep(500 * time.Millisecond)
	before := cliDescribe(t, a.addr)
	if before.NodeEpoch != "1" || before.NodeID != nodeID {
		t.Fatalf("describe before = %+v", before)
	}
	// A connection to the standby, opened before it takes over.
	standbyConn := testproc.PinnedConn(t, b.addr)
	if st, ok := testproc.Readiness(ctx, standbyConn); !ok || st != grpc_health_v1.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("readiness of the standby = %v (ok %v)", st, ok)
	}
	r, took := cliStepDown(t, a.addr)
	pb.Serving(t, 10*time.Second)
	// A step down reaching the standby's connection of the process that
	// has just taken over changes nothing (A6): it answers
	// FAILED_PRECONDITION, or, once the serving instance has closed the
	// connections its standby phase accepted (so that their clients
	// reconnect to it), it cannot reach the process through that
	// connection at all (the pinned connection may not redial).
	_, err := dexpb.NewAdminServiceClient(standbyConn).StepDown(ctx,
		&dexpb.StepDownRequest{ExpectedNodeId: nodeID, ExpectedNodeEpoch: 2})
	if c := status.Code(err); c != codes.FailedPrecondition &&
		(c != codes.Unavailable || !strings.Contains(err.Error(), "dialed only once")) {
		t.Fatalf("StepDown on the standby connection of the new active = %v, want FAILED_PRECONDITION or the connection ended", err)
	}
	after := cliDescribe(t, b.addr)
	if r.LeaseHolderAfterStepDown != "takenOverByAnotherProcess" || r.ExpectedNodeID != nodeID || r.ExpectedNodeEpoch != "1" ||
		r.ReleasedNodeEpoch != "1" || r.ActiveNodeEpoch != "2" || r.ActiveHolderProcessID != after.HolderProcessID ||
		after.HolderProcessID == before.HolderProcessID || after.NodeEpoch != "2" {
		t.Fatalf("step down = %+v; describe after = %+v", r, after)
	}
	t.Logf("%s: the step down answered after %v", backend, took.Round(time.Millisecond))
	if took > 4*time.Second {
		t.Errorf("the step down took %v; it must answer once the standby took over, before the 5 s hold-off", took)
	}
	select {
	case <-pa.Exited():
		t.Fatalf("the stepped-down process exited %d:\n%s", pa.ExitCode(), pa.Log())
	default:
	}
	n := load.check(t, ctx, c)
	t.Logf("%s: %d flows acknowledged across the step down, all completed", backend, n)

	// The stepped-down process follows the log again and takes the node
	// back when the new active steps down.
	waitFollowing(t, a, 30*time.Second)
	r2, _ := cliStepDown(t, b.addr)
	pa.Serving(t, 10*time.Second)
	if r2.LeaseHolderAfterStepDown != "takenOverByAnotherProcess" || r2.ReleasedNodeEpoch != "2" || r2.ActiveNodeEpoch != "3" ||
		r2.ActiveHolderProcessID != before.HolderProcessID {
		t.Fatalf("second step down = %+v", r2)
	}
	runChain(t, ctx, c, "after-hand-back", 10)
}

// A step down of a process without a standby ends in a take-back after
// the hold-off, with a new epoch. One connection kept open to the
// stepped-down serving instance across the step down and the take-back
// never reports readiness SERVING once a public call on it said "stepped
// down", and after the take-back its readiness Check still answers
// NOT_SERVING (H6). Clients and workers carry on at the new epoch.
//
// Covers: A3, A5, A7, A8, A12, H6
func TestStepDown_TakeBackOnASingleProcess(t *testing.T) {
	for _, backend := range []string{"s3", "postgres"} {
		t.Run(backend, func(t *testing.T) { stepDownTakeBack(t, backend) })
	}
}

func stepDownTakeBack(t *testing.T, backend string) {
	s := newServer(t, storage(t, backend), "standby:\n  stepDownHoldOff: 1s\n")
	p := s.start(t)
	p.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	runWorker(t, ctx, []string{s.addr}, 0, chainFlow)
	c := dialClient(t, ctx, []string{s.addr})
	runChain(t, ctx, c, "before", 1)

	pinned := testproc.PinnedConn(t, s.addr)
	if st, ok := testproc.Readiness(ctx, pinned); !ok || st != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("readiness before the step down = %v (ok %v)", st, ok)
	}
	wctx2, stopWatching := context.WithCancel(ctx)
	observations := testproc.WatchConn(wctx2, pinned)
	began := time.Now()
	r, took := cliStepDown(t, s.addr)
	if r.LeaseHolderAfterStepDown != "takenBackByThisProcess" || r.ReleasedNodeEpoch != "1" || r.ActiveNodeEpoch != "2" {
		t.Fatalf("step down = %+v", r)
	}
	t.Logf("%s: the step down with take-back answered after %v", backend, took.Round(time.Millisecond))
	if took < time.Second || took > 8*time.Second {
		t.Errorf("the step down took %v, want the 1 s hold-off plus a takeover", took)
	}
	if st, ok := testproc.Readiness(ctx, pinned); !ok || st != grpc_health_v1.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("readiness on the stepped-down instance's connection after the take-back = %v (ok %v), want NOT_SERVING", st, ok)
	}
	stopWatching()
	testproc.CheckH6(t, observations(), began)

	if d := cliDescribe(t, s.addr); d.NodeEpoch != "2" {
		t.Fatalf("describe after the take-back = %+v", d)
	}
	res := runChain(t, ctx, c, "after", 5)
	if out, err := dex.Output[int](res); err != nil || out != 8 {
		t.Fatalf("after the take-back: output %d (%v), want 8", out, err)
	}
}
