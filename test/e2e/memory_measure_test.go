package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// Bulky completes with an output and an attribute of the size its input
// says; Swollen writes 12 attributes of 4 MiB (the worker result of issue
// 11).
type (
	Bulky   struct{ dex.Step[int] }
	Swollen struct{ dex.Step[int] }
)

var swollenAttrs = func() []dex.Attribute[string] {
	var as []dex.Attribute[string]
	for i := range 12 {
		as = append(as, dex.DefineAttribute[string](fmt.Sprintf("s%d", i)))
	}
	return as
}()

func (Bulky) Execute(ctx dex.Context, n int) (dex.Decision, error) {
	attrA.Set(ctx, jsonString(n))
	return dex.GracefulComplete(jsonString(n)), nil
}

func (Swollen) Execute(ctx dex.Context, _ int) (dex.Decision, error) {
	for _, a := range swollenAttrs {
		a.Set(ctx, jsonString(4<<20-64))
	}
	return dex.GracefulComplete(0), nil
}

var oneTry = dex.StepOptions{Execute: dex.MethodOptions{Retry: &dex.RetryPolicy{MaximumAttempts: 1}}}

func (Bulky) Options() dex.StepOptions   { return oneTry }
func (Swollen) Options() dex.StepOptions { return oneTry }

var (
	bulkyFlow   = dex.NewFlow("bulky").Start(Bulky{}).Attributes(attrA)
	swollenFlow = func() *dex.Flow {
		f := dex.NewFlow("swollen").Start(Swollen{})
		for _, a := range swollenAttrs {
			f = f.Attributes(a)
		}
		return f
	}()
)

// procMem is the resident and peak resident memory of pid in MiB.
func procMem(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "?"
	}
	var rss, hwm string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
			kb, _ := strconv.Atoi(f[1])
			if f[0] == "VmRSS:" {
				rss = strconv.Itoa(kb >> 10)
			} else {
				hwm = strconv.Itoa(kb >> 10)
			}
		}
	}
	return "RSS " + rss + " MiB (peak " + hwm + " MiB)"
}

// TestMeasure_MemoryOfLargeRequests measures the server's memory in the
// scenarios of issue 11 item 2 with the default configuration: a StartFlow
// with 12 attributes of 4 MiB, 11 worker results of 12 attributes of
// 4 MiB, 11 results of 8 MiB (a 4 MiB output and a 4 MiB attribute, within
// the limits), and a restart. It only reports (t.Log); it runs when
// DEX_MEASURE_MEMORY is set.
func TestMeasure_MemoryOfLargeRequests(t *testing.T) {
	if os.Getenv("DEX_MEASURE_MEMORY") == "" {
		t.Skip("set DEX_MEASURE_MEMORY=1 to measure")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	data := filepath.Join(t.TempDir(), "data")
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", data, "--listen", addr)
	p.Serving(t, 30*time.Second)
	t.Logf("started: %s", procMem(p.Pid()))
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()

	var twelve []dex.AttributeValue
	for _, a := range swollenAttrs {
		twelve = append(twelve, a.Value(jsonString(4<<20-64)))
	}
	_, err = c.StartFlow(ctx, swollenFlow, "start-12x4", 0, dex.WithAttributes(twelve...))
	t.Logf("StartFlow with 12 attributes of 4 MiB: err=%v; %s", err, procMem(p.Pid()))

	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{addr}, Logger: quietLogger(), MaxConcurrentTasks: 11},
		swollenFlow, bulkyFlow)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	stopWorker := sync.OnceFunc(func() { wcancel(); <-done })
	defer stopWorker()

	run := func(name string, flow *dex.Flow, input int) {
		begin := time.Now()
		for i := range 11 {
			if _, err := c.StartFlow(ctx, flow, fmt.Sprintf("%s-%d", name, i), input); err != nil {
				t.Fatalf("start %s %d: %v", name, i, err)
			}
		}
		statuses := map[string]int{}
		var msg string
		for i := range 11 {
			res, err := c.WaitForFlow(ctx, fmt.Sprintf("%s-%d", name, i))
			if err != nil {
				statuses["error "+status.Code(err).String()]++
				msg = err.Error()
				continue
			}
			statuses[fmt.Sprint(res.Status)]++
			if res.Error != nil {
				msg = res.Error.Message
			}
		}
		t.Logf("11 %s results in %v: %v %q; %s", name, time.Since(begin).Round(time.Millisecond), statuses, msg, procMem(p.Pid()))
	}
	run("swollen-12x4", swollenFlow, 0)
	run("bulky-2x4", bulkyFlow, 4<<20-64)
	heapProfile(t, "bulky")

	stopWorker()
	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	p2 := testproc.Start(t, "dev", "--data-dir", data, "--listen", addr)
	p2.Serving(t, 60*time.Second)
	t.Logf("restarted: %s", procMem(p2.Pid()))
	c2, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c2.Close() }()
	for i := range 11 {
		if _, err := c2.GetFlowSummary(ctx, fmt.Sprintf("bulky-2x4-%d", i)); err != nil {
			t.Logf("read bulky-2x4-%d: %v", i, err)
		}
	}
	t.Logf("restarted, after reading the 11 flows: %s", procMem(p2.Pid()))
}

// heapProfile saves the server's heap profile to $DEX_MEASURE_HEAP.name
// when DEX_MEASURE_HEAP is set and the server serves pprof (DEXZD_PPROF).
func heapProfile(t *testing.T, name string) {
	dst, addr := os.Getenv("DEX_MEASURE_HEAP"), os.Getenv("DEXZD_PPROF")
	if dst == "" || addr == "" {
		return
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap")
	if err != nil {
		t.Logf("heap profile: %v", err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(dst+"."+name, b, 0o644)
	}
	if err != nil {
		t.Logf("heap profile: %v", err)
	}
}
