package ha

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
)

var readinessNames = []string{"", "dex.FlowService", "dex.WorkerTaskService"}

// While the active serves, the cold standby keeps its API open but refuses
// every public call with UNAVAILABLE and a message that sends the caller to
// the active process (S6, P3), refuses worker streams, and answers
// NOT_SERVING to the readiness names while the active answers SERVING (H1,
// H2). Describe on the standby is UNAVAILABLE too: it is not the active
// process. dexzd_leader is 1 on the active and 0 on the standby, whose
// dexzd_hot_standby_state is "cold" (P4). On the HTTP surface (the metrics
// listener) /readyz answers 503 on the standby with the same reason (P3).
//
// Covers: S6, P3, H1, H2, P4
func TestColdStandby_RefusesPublicCallsAndIsNotReady(t *testing.T) {
	a, b, _, _ := startPair(t, storage(t, "fs"))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ca, cb := dial(t, a.addr), dial(t, b.addr)

	for _, name := range readinessNames {
		for _, tc := range []struct {
			who  string
			hc   grpc_health_v1.HealthClient
			want grpc_health_v1.HealthCheckResponse_ServingStatus
		}{
			{"active", grpc_health_v1.NewHealthClient(ca), grpc_health_v1.HealthCheckResponse_SERVING},
			{"standby", grpc_health_v1.NewHealthClient(cb), grpc_health_v1.HealthCheckResponse_NOT_SERVING},
		} {
			r, err := tc.hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: name})
			if err != nil || r.GetStatus() != tc.want {
				t.Errorf("Check(%q) on the %s = %v, %v; want %s", name, tc.who, r, err, tc.want)
			}
		}
	}

	unavailable := func(what string, err error) {
		t.Helper()
		st, _ := status.FromError(err)
		if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "standby") ||
			!strings.Contains(st.Message(), "retry on the active") {
			t.Errorf("%s on the standby = %v; want UNAVAILABLE saying it is a standby and to retry on the active", what, err)
		}
	}
	flows := dexpb.NewFlowServiceClient(cb)
	_, err := flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowId: "f", FlowType: "chain3"})
	unavailable("StartFlow", err)
	_, err = flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "f"})
	unavailable("GetFlowSummary", err)
	_, err = flows.ListFlows(ctx, &dexpb.ListFlowsRequest{})
	unavailable("ListFlows", err)
	_, err = dexpb.NewAdminServiceClient(cb).Describe(ctx, &dexpb.DescribeRequest{})
	unavailable("Describe", err)
	stream, err := dexpb.NewWorkerTaskServiceClient(cb).PollWorkerTask(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	unavailable("PollWorkerTask", err)

	// The active answers, with epoch 1.
	d, err := dexpb.NewAdminServiceClient(ca).Describe(ctx, &dexpb.DescribeRequest{})
	if err != nil || d.GetNodeEpoch() != 1 || d.GetNodeId() != "ha" {
		t.Fatalf("Describe on the active = %v, %v", d, err)
	}

	ma, mb := scrape(t, a.metrics), scrape(t, b.metrics)
	for _, c := range []struct {
		who, name, got, want string
	}{
		{"active", "dexzd_leader", ma["dexzd_leader"], "1"},
		{"standby", "dexzd_leader", mb["dexzd_leader"], "0"},
		{"active", "dexzd_node_epoch", ma["dexzd_node_epoch"], "1"},
		{"standby", "dexzd_node_epoch", mb["dexzd_node_epoch"], "0"},
		{"active", "not_standby", ma[`dexzd_hot_standby_state{state="not_standby"}`], "1"},
		{"active", "cold", ma[`dexzd_hot_standby_state{state="cold"}`], "0"},
		{"standby", "cold", mb[`dexzd_hot_standby_state{state="cold"}`], "1"},
		{"standby", "not_standby", mb[`dexzd_hot_standby_state{state="not_standby"}`], "0"},
		{"standby", "following", mb[`dexzd_hot_standby_state{state="following"}`], "0"},
	} {
		if c.got != c.want {
			t.Errorf("%s on the %s = %q, want %q", c.name, c.who, c.got, c.want)
		}
	}

	// The HTTP surface: /readyz is 200 on the active, 503 naming the
	// standby on the standby; /livez is 200 on both.
	for _, c := range []struct {
		who, addr, path string
		code            int
		body            string
	}{
		{"active", a.metrics, "/readyz", http.StatusOK, "serving"},
		{"standby", b.metrics, "/readyz", http.StatusServiceUnavailable, "cold standby of node"},
		{"active", a.metrics, "/livez", http.StatusOK, "alive"},
		{"standby", b.metrics, "/livez", http.StatusOK, "alive"},
	} {
		code, body := httpGet(t, "http://"+c.addr+c.path)
		if code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("GET %s on the %s = %d %q, want %d containing %q", c.path, c.who, code, body, c.code, c.body)
		}
	}
}

// httpGet returns the status code and body of a GET of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// With lease.failIfHeld a process that finds the lease held fails startup
// with a non-zero status and a message naming the holder's process ID,
// instead of waiting as a standby.
//
// Covers: L14
func TestServe_FailIfHeldFailsNamingTheHolder(t *testing.T) {
	st := storage(t, "fs")
	a := newServer(t, st, "")
	pa := a.start(t)
	pa.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d, err := dexpb.NewAdminServiceClient(dial(t, a.addr)).Describe(ctx, &dexpb.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}

	failing := newServer(t, st, "")
	raw, err := os.ReadFile(failing.cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw = []byte(strings.Replace(string(raw), "lease:\n", "lease:\n  failIfHeld: true\n", 1))
	if err := os.WriteFile(failing.cfg, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	p := failing.start(t)
	if code := p.Wait(t, 30*time.Second); code == 0 {
		t.Fatalf("a second process with lease.failIfHeld exited 0 while the lease was held:\n%s", p.Log())
	}
	if log := p.Log(); !strings.Contains(log, d.GetHolderProcessId()) || !strings.Contains(log, "lease.failIfHeld") {
		t.Fatalf("the failure does not name lease.failIfHeld and the holder %q:\n%s", d.GetHolderProcessId(), log)
	}
}

// Two processes cannot share a local store directory: the second fails at
// once naming the directory. A hot standby with lease.failIfHeld is a
// configuration error (status 2) naming the key (S5).
func TestServe_RefusesASharedLocalStoreAndHotWithFailIfHeld(t *testing.T) {
	st := storage(t, "fs")
	a := newServer(t, st, "")
	pa := a.start(t)
	pa.Serving(t, 30*time.Second)

	p := newServerOn(t, st, "", a.dir).start(t)
	if code := p.Wait(t, 30*time.Second); code != 1 {
		t.Fatalf("a process on another's local store exited %d, want 1:\n%s", code, p.Log())
	}
	if !strings.Contains(p.Log(), "localStore.dir") || !strings.Contains(p.Log(), a.dir) {
		t.Fatalf("the failure does not name localStore.dir %s:\n%s", a.dir, p.Log())
	}

	hot := newServer(t, st, hotYAML)
	raw, err := os.ReadFile(hot.cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw = []byte(strings.Replace(string(raw), "lease:\n", "lease:\n  failIfHeld: true\n", 1))
	if err := os.WriteFile(hot.cfg, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	ph := hot.start(t)
	if code := ph.Wait(t, 30*time.Second); code != 2 {
		t.Fatalf("standby.mode hot with lease.failIfHeld exited %d, want 2:\n%s", code, ph.Log())
	}
	if !strings.Contains(ph.Log(), "standby.mode") || !strings.Contains(ph.Log(), "lease.failIfHeld") {
		t.Fatalf("the refusal does not name standby.mode and lease.failIfHeld:\n%s", ph.Log())
	}
}

// An active process frozen (SIGSTOP) past its lease is replaced by the
// standby once the lease has expired plus 1 s. Resumed, it answers the
// calls that reached it while frozen, on a connection it had accepted
// before, with readiness NOT_SERVING and public calls UNAVAILABLE (never
// SERVING: its lease is no longer valid, whatever its renewal timers say),
// then exits with status 1.
//
// Covers: L15, L11, L13
func TestServe_FrozenActiveStopsServingAndExits1(t *testing.T) {
	a, b, pa, pb := startPair(t, storage(t, "fs"))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ca := dial(t, a.addr)
	hc := grpc_health_v1.NewHealthClient(ca)
	if r, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{}); err != nil || r.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("the active's readiness = %v, %v", r, err)
	}

	pa.Signal(t, syscall.SIGSTOP)
	frozenAt := time.Now()
	pb.Serving(t, 30*time.Second)
	t.Logf("the standby served %v after the freeze", time.Since(frozenAt).Round(time.Millisecond))
	// Calls sent while it is frozen wait in its socket; it answers them
	// when it resumes, racing its own exit.
	type answer struct {
		what string
		err  error
	}
	answers := make(chan answer, len(readinessNames)+1)
	for _, name := range readinessNames {
		go func() {
			r, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: name})
			if err == nil && r.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING {
				err = fmt.Errorf("SERVING")
			} else if err == nil {
				err = fmt.Errorf("%v", r.GetStatus())
			}
			answers <- answer{fmt.Sprintf("Check(%q)", name), err}
		}()
	}
	go func() {
		_, err := dexpb.NewFlowServiceClient(ca).GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: "f"})
		answers <- answer{"GetFlowSummary", err}
	}()
	time.Sleep(200 * time.Millisecond)
	pa.Signal(t, syscall.SIGCONT)
	gate := 0 // answers given by the closed gate, not by a closed connection
	for range len(readinessNames) + 1 {
		a := <-answers
		t.Logf("%s on the resumed process: %v", a.what, a.err)
		switch {
		case strings.HasPrefix(a.what, "Check") && a.err.Error() == "SERVING":
			t.Errorf("the resumed process answered %s SERVING after its lease ended", a.what)
		case strings.HasPrefix(a.what, "Check") && a.err.Error() == "NOT_SERVING":
			gate++
		case strings.HasPrefix(a.what, "Check"):
			if status.Code(a.err) != codes.Unavailable {
				t.Errorf("%s on the resumed process = %v, want NOT_SERVING", a.what, a.err)
			}
		case status.Code(a.err) != codes.Unavailable:
			t.Errorf("%s on the resumed process = %v, want UNAVAILABLE", a.what, a.err)
		case strings.Contains(status.Convert(a.err).Message(), "not serving"):
			gate++
		}
	}
	if gate == 0 {
		t.Errorf("no call sent while the process was frozen got the closed gate's answer before it exited")
	}
	if code := pa.Wait(t, 20*time.Second); code != 1 {
		t.Fatalf("the resumed process exited %d, want 1 (L11):\n%s", code, pa.Log())
	}
	d, err := dexpb.NewAdminServiceClient(dial(t, b.addr)).Describe(ctx, &dexpb.DescribeRequest{})
	if err != nil || d.GetNodeEpoch() != 2 {
		t.Fatalf("Describe on the new active = %v, %v; want epoch 2", d, err)
	}
}
