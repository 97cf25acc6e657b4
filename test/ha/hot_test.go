package ha

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
)

// The active process is SIGKILLed while flows run; the hot standby, which
// followed the log into its local store, takes over once the lease has
// expired plus 1 s (not before, L13), replays only the last few batches
// (S3, S7), and every flow whose start was acknowledged completes (G3),
// with the recovery of T2, T4 and T5.
//
// Covers: S3, S7, L13, T1, T2, T4, T5, G3
func TestHotStandby_TakesOverAfterSIGKILL(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { killActive(t, backend, true) })
	}
}

// SIGTERM of the active releases the lease; the hot standby takes it
// within about one heldLeasePollInterval and serves after replaying only
// the last few batches (S7, L12).
//
// Covers: S7, L12
func TestHotStandby_TakesOverAtOnceAfterSIGTERM(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { terminateActive(t, backend, true) })
	}
}

// While the active serves, the hot standby follows the log: dex.HotStandby
// is SERVING on it and NOT_SERVING on the active, the readiness names are
// NOT_SERVING on it, public calls answer UNAVAILABLE naming a hot standby
// (S6), and its metrics report the state following with a lag below a
// second (S10). Flows the active completes reach the standby's log
// position, so its takeover (SIGTERM) replays only the last few batches.
//
// Covers: H3, S6, S10, S3
func TestHotStandby_HealthAndMetrics(t *testing.T) {
	a, b, pa, pb := startPairMode(t, storage(t, "fs"), leaseDuration, true)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	addrs := []string{a.addr, b.addr}
	stopWorker := runWorker(t, ctx, addrs, 0, chainFlow)
	c := dialClient(t, ctx, addrs)
	for i := range 10 {
		if _, err := c.StartFlow(ctx, chainFlow, fmt.Sprintf("h-%d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if res, err := c.WaitForFlow(ctx, fmt.Sprintf("h-%d", i)); err != nil || res.Status != dex.StatusCompleted {
			t.Fatalf("h-%d: %v, %v", i, res, err)
		}
	}
	time.Sleep(time.Second) // a few polls of the follower

	ca, cb := dial(t, a.addr), dial(t, b.addr)
	check := func(who string, hc grpc_health_v1.HealthClient, name string, want grpc_health_v1.HealthCheckResponse_ServingStatus) {
		t.Helper()
		r, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: name})
		if err != nil || r.GetStatus() != want {
			t.Errorf("Check(%q) on the %s = %v, %v; want %s", name, who, r, err, want)
		}
	}
	ha, hb := grpc_health_v1.NewHealthClient(ca), grpc_health_v1.NewHealthClient(cb)
	check("standby", hb, "dex.HotStandby", grpc_health_v1.HealthCheckResponse_SERVING)
	check("active", ha, "dex.HotStandby", grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	for _, n := range readinessNames {
		check("standby", hb, n, grpc_health_v1.HealthCheckResponse_NOT_SERVING)
		check("active", ha, n, grpc_health_v1.HealthCheckResponse_SERVING)
	}
	_, err := dexpb.NewFlowServiceClient(cb).GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "h-0"})
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "hot standby") {
		t.Errorf("GetFlowSummary on the hot standby = %v, want UNAVAILABLE naming a hot standby", err)
	}

	ma, mb := scrape(t, a.metrics), scrape(t, b.metrics)
	for _, c := range []struct {
		who, name, got, want string
	}{
		{"standby", "following", mb[followingState], "1"},
		{"standby", "behind", mb[`dexzd_hot_standby_state{state="behind"}`], "0"},
		{"standby", "not_standby", mb[`dexzd_hot_standby_state{state="not_standby"}`], "0"},
		{"standby", "dexzd_leader", mb["dexzd_leader"], "0"},
		{"active", "not_standby", ma[`dexzd_hot_standby_state{state="not_standby"}`], "1"},
		{"active", "following", ma[followingState], "0"},
		{"active", "lag", ma["dexzd_hot_standby_lag_seconds"], "0"},
	} {
		if c.got != c.want {
			t.Errorf("%s on the %s = %q, want %q", c.name, c.who, c.got, c.want)
		}
	}
	if lag, err := strconv.ParseFloat(mb["dexzd_hot_standby_lag_seconds"], 64); err != nil || lag >= 1 {
		t.Errorf("dexzd_hot_standby_lag_seconds on the standby = %q, want below 1", mb["dexzd_hot_standby_lag_seconds"])
	}

	stopWorker()
	pa.Signal(t, syscall.SIGTERM)
	if code := pa.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the active's graceful stop exited %d", code)
	}
	pb.Serving(t, 30*time.Second)
	if from, fence := replayed(t, pb); fence-from > hotReplayMax {
		t.Errorf("the hot standby replayed batches %d to %d at its takeover, want at most %d", from, fence, hotReplayMax)
	}
	check("new active", hb, "dex.HotStandby", grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	if m := scrape(t, b.metrics); m[followingState] != "0" || m[`dexzd_hot_standby_state{state="not_standby"}`] != "1" {
		t.Errorf("states on the new active: following %s, not_standby %s; want 0, 1", m[followingState],
			m[`dexzd_hot_standby_state{state="not_standby"}`])
	}
	if res, err := c.WaitForFlow(ctx, "h-9"); err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("h-9 on the new active: %v, %v", res, err)
	}
	pb.Signal(t, syscall.SIGTERM)
	if code := pb.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("graceful stop exited %d", code)
	}
}
