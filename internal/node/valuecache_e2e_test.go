package node_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/config"
)

// A large input (a value object) that a flow carries through its steps is
// written to the store once and read from it at most once per process:
// every task that carries it, every result that echoes it and the read of
// the flow's output are answered by the value cache, with the right bytes.
// A restarted process reads it from the store once, then from memory.
// In processCrashSafe mode the object, and only the object, is fsynced:
// a record that survives a host crash finds it.
//
// Covers: G5, D6
func TestDev_ALargeValueTravelsThroughTheValueCache(t *testing.T) {
	dir := t.TempDir()
	crashSafe := func(c *config.Config) { c.Dev.DurabilityMode = config.DurabilityProcessCrashSafe }
	n := startNode(t, dir, crashSafe)
	large := jsonValue(strings.Repeat("x", 300<<10)) // above the default 256 KiB limits.valueObjectBytes
	metric := func(n *testNode, name string) float64 {
		srv := httptest.NewServer(n.metrics.Handler())
		defer srv.Close()
		return scrape(t, srv.URL)[name]
	}
	counts := func(n *testNode) (hits, misses float64) {
		return metric(n, "dexzd_value_cache_hits_total"), metric(n, "dexzd_value_cache_misses_total")
	}
	fsyncs := metric(n, "dexzd_store_fsyncs_total")
	same := func(what string, v *dexpb.EncodedValue) {
		t.Helper()
		if string(v.GetData()) != string(large.GetData()) {
			t.Fatalf("%s: %d bytes, want the %d of the input", what, len(v.GetData()), len(large.GetData()))
		}
	}

	w := connectWorker(t, n.conn, orderHello("w1", 1))
	ctx := ctxT(t)
	if _, err := n.flows.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "order", FlowId: "big-1",
		StartStep: &dexpb.Movement{StepType: "Start", Input: large}}); err != nil {
		t.Fatal(err)
	}
	started := metric(n, "dexzd_store_fsyncs_total")
	if started-fsyncs < 2 {
		t.Fatalf("the large start fsynced %v times in processCrashSafe mode, want the object and its directory", started-fsyncs)
	}
	task := w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Start-1")
	same("Start's input", task.GetInput())
	expectAck(t, w.result(task, decide(moveTo("Wait", task.GetInput()), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	task = w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_WAIT_FOR, "Wait-1")
	same("Wait's WaitFor input", task.GetInput())
	expectAck(t, w.result(task, waitResult(nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	task = w.next()
	expectTask(t, task, dexpb.TaskKind_TASK_KIND_EXECUTE, "Wait-1")
	same("Wait's Execute input", task.GetInput())
	expectAck(t, w.result(task, decide(complete(task.GetInput()), nil)), dexpb.TaskAckStatus_TASK_ACK_STATUS_ACCEPTED)
	r, err := n.flows.WaitForFlow(ctx, &dexpb.WaitForFlowRequest{FlowId: "big-1"})
	if err != nil || r.GetResult().GetStatus() != dexpb.FlowStatus_FLOW_STATUS_COMPLETED || len(r.GetResult().GetOutputs()) != 1 {
		t.Fatalf("WaitForFlow: %v, %v", r, err)
	}
	same("the flow's output", r.GetResult().GetOutputs()[0].GetOutput())
	// One miss: the start's write. Hits: three tasks, two echoing results
	// and the read of the result, at least.
	if hits, misses := counts(n); misses != 1 || hits < 6 {
		t.Fatalf("value cache: %v hits, %v misses; want >= 6 and 1", hits, misses)
	}
	if got := metric(n, "dexzd_store_fsyncs_total"); got != started {
		t.Fatalf("the rest of the flow fsynced %v times in processCrashSafe mode, want 0", got-started)
	}
	w.close()
	if err := n.stop(t); err != nil {
		t.Fatal(err)
	}

	n = startNode(t, dir, crashSafe)
	for range 2 {
		st, err := n.flows.WaitForFlow(ctx, &dexpb.WaitForFlowRequest{FlowId: "big-1"})
		if err != nil || len(st.GetResult().GetOutputs()) != 1 {
			t.Fatalf("WaitForFlow after the restart: %v, %v", st, err)
		}
		same("the output after the restart", st.GetResult().GetOutputs()[0].GetOutput())
	}
	if hits, misses := counts(n); misses != 1 || hits != 1 {
		t.Fatalf("value cache after the restart: %v hits, %v misses; want 1 and 1", hits, misses)
	}
}
