package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/bench"
)

func TestBenchChain_UsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--flows", "0"}, "--flows must be at least 1, not 0"},
		{[]string{"--steps", "-1"}, "--steps must be at least 1, not -1"},
		{[]string{"--callers", "0"}, "--callers must be at least 1"},
		{[]string{"--worker-concurrency", "0"}, "--worker-concurrency must be at least 1"},
		{[]string{"--payload-bytes", "-5"}, "--payload-bytes must be at least 0"},
		{[]string{"--warmup", "-1"}, "invalid value"},
		{[]string{"--flow-type", ""}, "--flow-type is empty"},
		{[]string{"--server-pid", "2147483647"}, "--server-pid: read the CPU time of process 2147483647"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--metrics-url", "127.0.0.1:9090"}, `--metrics-url "127.0.0.1:9090" is not an http:// or https:// URL`},
		{[]string{"--branches", "2"}, "unknown flag: --branches"},
	}
	for _, tt := range tests {
		r := runCLI(t, append([]string{"bench", "chain", "--server", "127.0.0.1:1"}, tt.args...)...)
		r.wantCode(t, exitUsage)
		r.wantStderr(t, tt.want, "usage: dexcli bench chain [flags]")
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"fanout", "--branches", "0"}, "--branches must be at least 1, not 0"},
		{[]string{"fanout", "--steps", "2"}, "unknown flag: --steps"},
		{[]string{"timer", "--timer", "500us"}, "--timer must be at least 1ms, not 500µs"},
		{[]string{"signal", "--callers", "0"}, "--callers must be at least 1"},
		{[]string{"signal", "--burst=maybe"}, "invalid boolean value"},
	} {
		r := runCLI(t, append([]string{"bench", tt.args[0], "--server", "127.0.0.1:1"}, tt.args[1:]...)...)
		r.wantCode(t, exitUsage)
		r.wantStderr(t, tt.want, "usage: dexcli bench "+tt.args[0]+" [flags]")
	}
}
func TestBenchChain_Help(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "help")
	r.wantCode(t, exitOK)
	r.wantStdout(t, "bench chain")
	r = runCLI(t, "bench", "chain", "--help")
	r.wantCode(t, exitOK)
	r.wantStdout(t, "--flows N", "--warmup N", "default min(100, flows/10)", "--server-pid PID", "--metrics-url URL", "--burst", "Ctrl-C")
	for w, flag := range map[string]string{"fanout": "--branches F", "timer": "--timer DURATION", "signal": "publishes"} {
		r = runCLI(t, "bench", w, "--help")
		r.wantCode(t, exitOK)
		r.wantStdout(t, "dexcli bench "+w+" [flags]", flag, "--burst", "--metrics-url URL")
	}
}

// Without a server the run stops at --timeout, before any flow, with the
// usual error document.
func TestBenchChain_NoServer(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "bench", "chain", "--server", "127.0.0.1:1", "--timeout", "300ms", "-o", "json")
	r.wantCode(t, exitFailure)
	r.wantStdout(t, `"code": "DEADLINE_EXCEEDED"`)
	if strings.Contains(r.stdout, "completed") {
		t.Errorf("a run that started no flow printed results:\n%s", r.stdout)
	}
}

// The command end to end against the real dev server: a complete run, then
// a run interrupted as Ctrl-C does.
func TestBenchChain_DevServer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs dex-server-zd")
	}
	dir := t.TempDir()
	bin := dir + "/dex-server-zd"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := bench.BuildServer(ctx, bin); err != nil {
		t.Fatal(err)
	}
	srv, err := bench.StartDevServer(ctx, bench.DevOptions{Binary: bin, DataDir: dir + "/data", Durability: "processCrashSafe"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)

	var out, errb bytes.Buffer
	code := run(ctx, []string{"bench", "chain", "--server", srv.Addr, "--flows", "60", "--callers", "4", "--steps", "2",
		"--payload-bytes", "10", "--server-pid", fmt.Sprint(srv.PID()), "-o", "json"}, &out, &errb, os.Getenv)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	var doc struct {
		Completed, Failures, Warmup int
		FlowsPerSecond              float64
		LatencyMs                   struct{ P99 float64 }
		ServerCPU                   *struct{ Pid int } `json:"serverCpu"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if doc.Completed != 60 || doc.Failures != 0 || doc.Warmup != 6 || doc.FlowsPerSecond <= 0 || doc.LatencyMs.P99 <= 0 ||
		doc.ServerCPU == nil || doc.ServerCPU.Pid != srv.PID() {
		t.Errorf("unexpected result:\n%s", out.String())
	}

	// Ctrl-C: the command's context ends midway.
	ictx, interrupt := context.WithCancel(ctx)
	out.Reset()
	errb.Reset()
	done := make(chan int)
	go func() {
		done <- run(ictx, []string{"bench", "chain", "--server", srv.Addr, "--flows", "1000000", "--warmup", "0",
			"--flow-type", "bench-interrupted", "-o", "json"}, &out, &errb, os.Getenv)
	}()
	waitCompleted(t, srv.Addr, "bench-interrupted", 20)
	interrupt()
	select {
	case code = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("bench chain did not stop within 20s of the interruption")
	}
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitInterrupted, out.String(), errb.String())
	}
	var idoc struct {
		Error       struct{ Code string }
		Interrupted bool
		Completed   int
	}
	if err := json.Unmarshal(out.Bytes(), &idoc); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if idoc.Error.Code != "CANCELLED" || !idoc.Interrupted || idoc.Completed == 0 {
		t.Errorf("unexpected result after the interruption:\n%s", out.String())
	}
	if err := srv.Stop(30 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, srv.Log())
	}
}

// waitCompleted waits until n flows of flowType have completed.
func waitCompleted(t *testing.T, addr, flowType string, n int) {
	t.Helper()
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := c.ListFlows(ctx, dex.FlowQuery{FlowType: flowType, Statuses: []dex.FlowStatus{dex.StatusCompleted}, PageSize: n})
		cancel()
		if err == nil && len(l.Flows) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d flows of %s not completed within 30s (last error %v)", n, flowType, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
