package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// The attributes of the request-limit flow (issue 11 item 2).
var (
	attrA = dex.DefineAttribute[string]("a")
	attrB = dex.DefineAttribute[string]("b")
	attrC = dex.DefineAttribute[string]("c")
)

// Hoard is a step that writes two attributes of the size its input says;
// with the default limits (4 MiB of attributes per run) two of 3 MiB are
// over the run's attribute limit although the result is within the
// request limit.
type Hoard struct{ dex.Step[int] }

func (Hoard) Execute(ctx dex.Context, n int) (dex.Decision, error) {
	attrA.Set(ctx, strings.Repeat("a", n))
	attrB.Set(ctx, strings.Repeat("b", n))
	return dex.GracefulComplete(n), nil
}

func (Hoard) Options() dex.StepOptions {
	return dex.StepOptions{Execute: dex.MethodOptions{
		Retry: &dex.RetryPolicy{InitialInterval: 50 * time.Millisecond, MaximumAttempts: 2},
	}}
}

var hoardFlow = dex.NewFlow("hoard").Start(Hoard{}).Attributes(attrA, attrB, attrC)

// Fan moves to two Leaf steps whose inputs together fill
// limits.maxRequestBytes: the largest legal result, whose log record holds
// the inputs twice (the completion and each step's creation), base64.
type (
	Fan  struct{ dex.Step[int] }
	Leaf struct{ dex.Step[string] }
)

func (Fan) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.Move(dex.To[Leaf](jsonString(n)), dex.To[Leaf](jsonString(n))), nil
}

func (Leaf) Execute(_ dex.Context, s string) (dex.Decision, error) {
	return dex.GracefulComplete(len(s)), nil
}

var fanFlow = dex.NewFlow("fan").Start(Fan{}).Steps(Leaf{})

// jsonString is a string whose JSON encoding is n bytes.
func jsonString(n int) string { return strings.Repeat("x", n-2) }

// rssBytes is the resident memory of process pid (Linux), 0 elsewhere.
func rssBytes(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// Issue 11 item 2, against a real dev server and the Go SDK with the
// default limits: a StartFlow with 12 attributes of 4 MiB (the issue's
// scenario, accepted before) is refused with RESOURCE_EXHAUSTED and
// creates nothing; a start within the message limit but above
// limits.maxRequestBytes, and a SetAttributes above
// limits.maxFlowAttributeBytes, are refused naming the limit and change
// nothing; a worker result above the run's attribute limit fails its
// attempts with a message naming the limit and the flow fails instead of
// hanging.
//
// Covers: E28, E21, E6
func TestLimits_RequestAndFlowAttributeLimitsRefuseNamingTheLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", filepath.Join(dir, "data"), "--listen", addr)
	p.Serving(t, 30*time.Second)
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	rssBefore := rssBytes(p.Pid())

	// The scenario: 12 attributes of 4 MiB in one StartFlow.
	big := jsonString(4 << 20)
	var twelve []dex.AttributeValue
	for range 4 {
		twelve = append(twelve, attrA.Value(big), attrB.Value(big), attrC.Value(big))
	}
	_, err = c.StartFlow(ctx, hoardFlow, "twelve", 1, dex.WithAttributes(twelve...))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("StartFlow with 12 attributes of 4 MiB: %v; want RESOURCE_EXHAUSTED", err)
	}
	t.Logf("12 x 4 MiB attributes: %v", err)
	if _, err := c.GetFlowSummary(ctx, "twelve"); !errors.Is(err, dex.ErrNotFound) && status.Code(err) != codes.NotFound {
		t.Fatalf("the refused flow exists: %v", err)
	}

	// Within the message limit (9 MiB) but above limits.maxRequestBytes
	// (8 MiB): the engine refuses it naming the limit.
	_, err = c.StartFlow(ctx, hoardFlow, "over", 1, dex.WithAttributes(attrA.Value(jsonString(4<<20-64)),
		attrB.Value(jsonString(4<<20-64)), attrC.Value(jsonString(512<<10))))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "limits.maxRequestBytes") {
		t.Fatalf("StartFlow of 8.5 MiB: %v; want RESOURCE_EXHAUSTED naming limits.maxRequestBytes", err)
	}
	if _, err := c.GetFlowSummary(ctx, "over"); status.Code(err) != codes.NotFound {
		t.Fatalf("the refused flow exists: %v", err)
	}

	// A run at its attribute limit: a SetAttributes that grows it is
	// refused naming limits.maxFlowAttributeBytes; the attributes stay.
	if _, err := c.StartFlow(ctx, hoardFlow, "attrs", 1, dex.WithAttributes(attrA.Value(jsonString(3<<20)))); err != nil {
		t.Fatal(err)
	}
	err = c.SetAttributes(ctx, "attrs", attrB.Value(jsonString(2<<20)))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "limits.maxFlowAttributeBytes") {
		t.Fatalf("SetAttributes over the run's attribute limit: %v; want RESOURCE_EXHAUSTED naming limits.maxFlowAttributeBytes", err)
	}
	st, err := c.GetFlowState(ctx, "attrs")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Attributes; len(got) != 1 || !got["a"].IsSet() {
		t.Fatalf("attributes after the refused write: %v", got)
	}
	// Replacing the attribute with one of the same size is accepted.
	if err := c.SetAttributes(ctx, "attrs", attrA.Value(jsonString(3<<20))); err != nil {
		t.Fatalf("a write that replaces an attribute: %v", err)
	}

	// A worker result over the run's attribute limit fails its attempts
	// (the retry policy applies) and then the flow.
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{addr}, Logger: quietLogger(), MaxConcurrentTasks: 4}, hoardFlow, fanFlow)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() { wcancel(); <-done }()
	if _, err := c.StartFlow(ctx, hoardFlow, "hoard", 3<<20); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, "hoard")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dex.StatusFailed || res.Error == nil || !strings.Contains(res.Error.Message, "limits.maxFlowAttributeBytes") ||
		!strings.Contains(res.Error.Message, "after 2 attempts") {
		t.Fatalf("flow whose result is over the attribute limit: %+v %+v; want FAILED after 2 attempts naming limits.maxFlowAttributeBytes", res, res.Error)
	}

	// The largest legal result commits (the log's record limit follows
	// the request limit) and its steps get their 4 MiB inputs.
	fanStart := time.Now()
	if _, err := c.StartFlow(ctx, fanFlow, "fan", 4<<20-256); err != nil {
		t.Fatal(err)
	}
	res, err = c.WaitForFlow(ctx, "fan")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dex.StatusCompleted || len(res.Outputs) != 2 {
		t.Fatalf("fan flow: %+v %+v; want COMPLETED with 2 outputs", res, res.Error)
	}
	t.Logf("fan flow completed in %v; server RSS %d MiB before, %d MiB after", time.Since(fanStart).Round(time.Millisecond),
		rssBefore>>20, rssBytes(p.Pid())>>20)
}
