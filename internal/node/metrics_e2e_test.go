package node_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/node"
)

// A dev node's metrics move by exactly what one flow through a worker did:
// one run started and completed, three attempts succeeded and one failed;
// the log batches it wrote are in the batch histograms and their writes
// in the store's put_if_absent counter; the strict fs store's fsyncs count.
//
// Covers: P4
func TestDev_MetricsCountAFlow(t *testing.T) {
	cfg, err := config.Parse(nil, config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dev.DurabilityMode = config.DurabilityStrict
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	dir := t.TempDir() // removed after the node stopped
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan net.Addr, 1)
	go func() {
		done <- node.RunLocal(ctx, node.LocalOptions{Mode: config.ModeDev, Config: cfg, DataDir: dir, Listener: lis,
			Ready: func(a net.Addr) { ready <- a }, Metrics: m})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunLocal: %v", err)
		}
	})
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		done <- err
		t.Fatalf("node did not start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("node did not start within 20s")
	}
	conn, err := grpc.NewClient(addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	scrapes := httptest.NewServer(m.Handler())
	t.Cleanup(scrapes.Close)
	before := scrape(t, scrapes.URL)

	w := connectWorker(t, conn, orderHello("w1", 1))
	flows := dexpb.NewFlowServiceClient(conn)
	rctx := ctxT(t)
	if _, err := flows.StartFlow(rctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "m-1",
		StartStep: &dexpb.Movement{StepType: "Start"}}); err != nil {
		t.Fatal(err)
	}
	task := w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Start-1")
	expectAck(t, w.result(task, decide(moveTo("Wait", nil), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	task = w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_WAIT_FOR, "Wait-1")
	expectAck(t, w.result(task, waitResult(nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	task = w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Wait-1")
	expectAck(t, w.fail(task, &dexpb.TaskFailure{ErrorType: "Busy", Message: "try later"}), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	task = w.next() // after the step's 100 ms backoff
	if task.GetAttempt() != 2 {
		t.Fatalf("retry = %v", task)
	}
	expectAck(t, w.result(task, decide(complete(nil), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	// The ack comes after the batch was applied, and so counted.
	after := scrape(t, scrapes.URL)

	for series, want := range map[string]float64{
		"dexzd_flows_started_total":                                         1,
		`dexzd_flows_completed_total{status="completed"}`:                   1,
		`dexzd_flows_completed_total{status="failed"}`:                      0,
		`dexzd_step_attempts_total{outcome="succeeded"}`:                    3,
		`dexzd_step_attempts_total{outcome="failed"}`:                       1,
		`dexzd_step_attempts_total{outcome="timed_out"}`:                    0,
		`dexzd_step_attempts_total{outcome="not_completed"}`:                0,
		`dexzd_store_requests_total{op="put_if_absent",result="permanent"}`: 0,
	} {
		if got := after[series] - before[series]; got != want {
			t.Errorf("%s moved by %v, want %v", series, got, want)
		}
	}
	batches := after["dexzd_log_batches_total"] - before["dexzd_log_batches_total"]
	if batches < 1 {
		t.Fatalf("the flow wrote %v log batches", batches)
	}
	for _, series := range []string{"dexzd_log_batch_write_seconds_count", "dexzd_log_batch_bytes_count", "dexzd_log_batch_records_count"} {
		if got := after[series] - before[series]; got != batches {
			t.Errorf("%s moved by %v, want the %v batches written", series, got, batches)
		}
	}
	if got, want := after["dexzd_log_batch_bytes_sum"]-before["dexzd_log_batch_bytes_sum"],
		after["dexzd_log_bytes_total"]-before["dexzd_log_bytes_total"]; got != want || got <= 0 {
		t.Errorf("dexzd_log_batch_bytes_sum moved by %v, dexzd_log_bytes_total by %v", got, want)
	}
	// Every batch is one put_if_absent (more only after a transient
	// error); the lease renewals in between are put_if_match.
	puts := after[`dexzd_store_requests_total{op="put_if_absent",result="ok"}`] - before[`dexzd_store_requests_total{op="put_if_absent",result="ok"}`]
	if puts != batches {
		t.Errorf("put_if_absent ok moved by %v, want the %v batches", puts, batches)
	}
	if got := after[`dexzd_store_request_seconds_count{op="put_if_absent"}`] - before[`dexzd_store_request_seconds_count{op="put_if_absent"}`]; got < puts {
		t.Errorf("put_if_absent latency count moved by %v, want at least %v", got, puts)
	}
	// Strict: each batch is appended to a log segment and fsynced.
	if got := after["dexzd_store_fsyncs_total"] - before["dexzd_store_fsyncs_total"]; got < batches {
		t.Errorf("dexzd_store_fsyncs_total moved by %v for %v strict batch writes, want at least 1 each", got, batches)
	}
}

var scrapedSample = regexp.MustCompile(`(?m)^([a-z_]+(?:\{[^}]*\})?) (\S+)$`)

// scrape GETs url and returns every sample by series.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s, %v", resp.Status, err)
	}
	out := map[string]float64{}
	for _, m := range scrapedSample.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", m[0], err)
		}
		out[m[1]] = v
	}
	return out
}
