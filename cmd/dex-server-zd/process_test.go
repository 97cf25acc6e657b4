package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/node"
	"github.com/dexzd/dexzd/internal/testproc"
	"github.com/dexzd/dexzd/internal/wal"
)

// Process tests: they build the real binary and drive it with signals
// through internal/testproc.

func TestMain(m *testing.M) {
	code := m.Run()
	testproc.Cleanup()
	os.Exit(code)
}

// proc adapts testproc.Proc with the timeouts these tests use.
type proc struct{ *testproc.Proc }

func start(t *testing.T, args ...string) proc { return proc{testproc.Start(t, args...)} }

func (p proc) serving(t *testing.T) string { return p.Serving(t, 20*time.Second) }
func (p proc) wait(t *testing.T) int       { return p.Wait(t, 20*time.Second) }
func (p proc) log() string                 { return p.Log() }

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func readLease(t *testing.T, dir string) lease.Record {
	t.Helper()
	blobs, err := fs.Open(filepath.Join(dir, node.LogDir), fs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	rec, _, err := lease.Read(context.Background(), blobs, wal.MustLayout("", "node-1").LeaseKey())
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Covers: D2
func TestProcess_SecondProcessOnTheDirectoryFails(t *testing.T) {
	dir := t.TempDir()
	p1 := start(t, "dev", "--data-dir", dir, "--listen", "127.0.0.1:0")
	p1.serving(t)
	p2 := start(t, "dev", "--data-dir", dir, "--listen", "127.0.0.1:0")
	if code := p2.wait(t); code == 0 {
		t.Fatalf("second process exited 0:\n%s", p2.log())
	}
	if !strings.Contains(p2.log(), filepath.Join(dir, "dev.lock")) {
		t.Fatalf("the error does not name dev.lock:\n%s", p2.log())
	}
	if want := fmt.Sprintf("locked by dex-server-zd process %d", p1.Pid()); !strings.Contains(p2.log(), want) {
		t.Fatalf("the error does not name the holder (%q):\n%s", want, p2.log())
	}
	p1.Signal(t, syscall.SIGTERM)
	if code := p1.wait(t); code != 0 {
		t.Fatalf("first process exited %d:\n%s", code, p1.log())
	}
}

// SIGTERM drains, releases the lease and exits 0, so the next process
// acquires at once; after SIGKILL the next process takes the lease over at
// once too (dev.lock), with every acknowledged start kept.
//
// Covers: L12, K2, D3, D5, G3, H1, H2
func TestProcess_SigtermReleasesAndSigkillRestartDoesNotWait(t *testing.T) {
	dir := t.TempDir()
	p1 := start(t, "local", "--data-dir", dir, "--listen", "127.0.0.1:0")
	conn := dial(t, p1.serving(t))
	ctx := ctxT(t)
	if _, err := dexpb.NewFlowServiceClient(conn).StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "x", FlowId: "f-1"}); err != nil {
		t.Fatal(err)
	}
	p1.Signal(t, syscall.SIGTERM)
	if code := p1.wait(t); code != 0 {
		t.Fatalf("SIGTERM: exit %d:\n%s", code, p1.log())
	}
	if rec := readLease(t, dir); !rec.Released || rec.Epoch != 1 {
		t.Fatalf("lease after SIGTERM = %+v, want released epoch 1", rec)
	}

	began := time.Now()
	p2 := start(t, "local", "--data-dir", dir, "--listen", "127.0.0.1:0")
	conn = dial(t, p2.serving(t))
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("start after a release took %v", took)
	}
	flows := dexpb.NewFlowServiceClient(conn)
	if _, err := flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "x", FlowId: "f-2"}); err != nil {
		t.Fatal(err)
	}
	hc := grpc_health_v1.NewHealthClient(conn)
	if r, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "dex.FlowService"}); err != nil ||
		r.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v", r, err)
	}
	p2.Signal(t, syscall.SIGKILL)
	p2.wait(t)
	if rec := readLease(t, dir); rec.Released || rec.Epoch != 2 {
		t.Fatalf("lease after SIGKILL = %+v, want held epoch 2", rec)
	}

	began = time.Now()
	p3 := start(t, "local", "--data-dir", dir, "--listen", "127.0.0.1:0")
	conn = dial(t, p3.serving(t))
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("restart after SIGKILL took %v; with dev.lock it must not wait for the 30s lease", took)
	}
	flows = dexpb.NewFlowServiceClient(conn)
	for _, id := range []string{"f-1", "f-2"} {
		if _, err := flows.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: id}); err != nil {
			t.Fatalf("%s after restart: %v", id, err)
		}
	}
	d, err := dexpb.NewAdminServiceClient(conn).Describe(ctx, &dexpb.DescribeRequest{})
	if err != nil || d.GetNodeEpoch() != 3 {
		t.Fatalf("Describe = %v, %v; want epoch 3", d, err)
	}
	p3.Signal(t, syscall.SIGINT)
	if code := p3.wait(t); code != 0 {
		t.Fatalf("SIGINT: exit %d:\n%s", code, p3.log())
	}
}

// Relaxed mode leaves a marker while it runs; after SIGKILL the node
// refuses to start until the directory is deleted. A clean stop removes
// the marker.
//
// Covers: D7, D8
func TestProcess_RelaxedAbruptExitRefusesRestart(t *testing.T) {
	dir := t.TempDir()
	p1 := start(t, "dev", "--data-dir", dir, "--listen", "127.0.0.1:0", "--durability", "relaxed")
	p1.serving(t)
	p1.Signal(t, syscall.SIGTERM)
	if code := p1.wait(t); code != 0 {
		t.Fatalf("SIGTERM: exit %d:\n%s", code, p1.log())
	}
	p2 := start(t, "dev", "--data-dir", dir, "--listen", "127.0.0.1:0", "--durability", "relaxed")
	p2.serving(t)
	p2.Signal(t, syscall.SIGKILL)
	p2.wait(t)

	p3 := start(t, "dev", "--data-dir", dir, "--listen", "127.0.0.1:0")
	if code := p3.wait(t); code == 0 {
		t.Fatalf("restart after an abrupt relaxed exit exited 0:\n%s", p3.log())
	}
	if !strings.Contains(p3.log(), "delete the data directory "+dir) {
		t.Fatalf("the message does not say to delete the data directory:\n%s", p3.log())
	}
}

// processCrashSafe skips fsync but keeps every acknowledged write across a
// process kill.
//
// Covers: D6, D8
func TestProcess_ProcessCrashSafeSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	p1 := start(t, "dev", "--data-dir", dir, "--listen", "127.0.0.1:0", "--durability", "processCrashSafe")
	conn := dial(t, p1.serving(t))
	ctx := ctxT(t)
	if !strings.Contains(p1.log(), "durability=processCrashSafe") {
		t.Fatalf("the flag did not set the mode:\n%s", p1.log())
	}
	flows := dexpb.NewFlowServiceClient(conn)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "x", FlowId: id}); err != nil {
			t.Fatal(err)
		}
	}
	p1.Signal(t, syscall.SIGKILL)
	p1.wait(t)
	p2 := start(t, "dev", "--data-dir", dir, "--listen", "127.0.0.1:0", "--durability", "processCrashSafe")
	flows = dexpb.NewFlowServiceClient(dial(t, p2.serving(t)))
	list, err := flows.ListFlows(ctx, &dexpb.ListFlowsRequest{})
	if err != nil || len(list.GetFlows()) != 3 {
		t.Fatalf("after SIGKILL: %v, %v; want the 3 acknowledged flows", list, err)
	}
}

// Another process takes the lease over and fences the log: the old
// process acknowledges nothing further, stops answering at once and exits
// 1.
//
// Covers: G4, L9, L11, L15
func TestProcess_FencedProcessExits1(t *testing.T) {
	dir := t.TempDir()
	p := start(t, "dev", "--data-dir", dir, "--listen", "127.0.0.1:0")
	conn := dial(t, p.serving(t))
	ctx := ctxT(t)
	flows := dexpb.NewFlowServiceClient(conn)
	if _, err := flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "x", FlowId: "f-1"}); err != nil {
		t.Fatal(err)
	}

	blobs, err := node.OpenDataLog(dir, fs.Strict, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	layout := wal.MustLayout("", "node-1")
	h, err := lease.Acquire(ctx, lease.Config{Store: blobs, Key: layout.LeaseKey(), NodeID: "node-1",
		ProcessID: "usurper/1/x", TakeOverHeld: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wal.Fence(ctx, blobs, layout, h.Epoch(), 0, func(wal.Batch) error { return nil }); err != nil {
		t.Fatal(err)
	}

	_, err = flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "x", FlowId: "f-2"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a start after the fence = %v, want UNAVAILABLE (nothing acknowledged)", err)
	}
	if code := p.wait(t); code != 1 {
		t.Fatalf("fenced process exited %d, want 1:\n%s", code, p.log())
	}
	if !strings.Contains(p.log(), "fenced by a higher epoch") {
		t.Fatalf("the exit does not say why:\n%s", p.log())
	}
}

// Covers: D1, D10
func TestProcess_ConfigErrorsAndDefaults(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "dex.yaml")
	if err := os.WriteFile(cfg, []byte("lease:\n  duratoin: 5s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, "dev", "--data-dir", dir, "--config", cfg)
	if code := p.wait(t); code != 2 || !strings.Contains(p.log(), `"lease.duratoin"`) {
		t.Fatalf("unknown key: exit %d:\n%s", code, p.log())
	}
	if err := os.WriteFile(cfg, []byte("standby:\n  mode: hot\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p = start(t, "local", "--data-dir", dir, "--config", cfg)
	if code := p.wait(t); code != 2 || !strings.Contains(p.log(), "standby.mode") {
		t.Fatalf("hot standby in local: exit %d:\n%s", code, p.log())
	}
	p = start(t, "local")
	if code := p.wait(t); code != 2 || !strings.Contains(p.log(), "--data-dir") {
		t.Fatalf("local without --data-dir: exit %d:\n%s", code, p.log())
	}
	p = start(t, "dev", "--data-dir", dir, "--listen", "127.0.0.1:0")
	p.serving(t)
	if !strings.Contains(p.log(), "leaseDuration=30s") {
		t.Fatalf("dev lease default:\n%s", p.log())
	}
}

// `dev --metrics-listen ADDR` (what `make dev` passes) serves /metrics,
// /readyz and /livez there, /metrics with the Go runtime's and the
// process's own series beside the node's.
//
// Covers: H2
func TestProcess_DevServesMetricsWhereTold(t *testing.T) {
	addr := testproc.FreeAddr(t)
	p := start(t, "dev", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics-listen", addr)
	p.serving(t)
	get := func(path string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, p.log())
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v\n%s", path, resp.StatusCode, err, body)
		}
		return string(body)
	}
	m := get("/metrics")
	for _, want := range []string{"\ndexzd_leader 1\n", "\ngo_goroutines ", "\nprocess_resident_memory_bytes "} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	get("/readyz")
	get("/livez")
	p.Signal(t, syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exited %d:\n%s", code, p.log())
	}
}
