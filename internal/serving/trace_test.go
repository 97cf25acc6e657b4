package serving

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/tracing"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A traced start keeps its trace context in the run: the start's task and
// a task built by the next epoch, after a crash, carry it. An untraced
// start keeps nothing: its record and state hold no trace context, not
// one byte of it.
func TestTracing_StartTraceContextIsDurableAndCostsNothingUntraced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := sdktrace.NewTracerProvider()
		ctx, span := tp.Tracer("t").Start(context.Background(), "StartFlow")
		span.End()
		want := tracing.Carrier(ctx)
		blobs := mem.New()
		h := newHarness(t, blobs, 1)
		s := h.session("w1", 10, "a")
		if _, err := h.core.StartFlow(ctx, engine.StartFlow{FlowID: "traced", FlowType: "a", StartStep: "S",
			TraceContext: tracing.Carrier(ctx)}); err != nil {
			t.Fatal(err)
		}
		h.start("plain", "a", "S")
		synctest.Wait()
		got := map[string]*engine.Task{}
		for _, task := range tasks(s) {
			got[task.FlowID] = task
		}
		if tc := got["traced"].TraceContext; tc["traceparent"] != want["traceparent"] {
			t.Fatalf("traced task's trace context = %v, want %v", tc, want)
		}
		if tc := got["plain"].TraceContext; tc != nil {
			t.Fatalf("untraced task's trace context = %v, want none", tc)
		}
		st, err := h.core.cfg.Store.Flow("plain")
		if err != nil {
			t.Fatal(err)
		}
		enc, err := engine.MarshalState(st)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(enc, []byte("traceContext")) {
			t.Error("the untraced run's state encodes a traceContext key")
		}
		h.crash()

		// The next epoch fails the attempts handed out before and builds
		// their retries from the replayed log.
		h2 := newHarness(t, blobs, 2)
		defer h2.stop()
		s2 := h2.session("w2", 10, "a")
		synctest.Wait()
		var retried bool
		for _, task := range tasks(s2) {
			if task.FlowID == "traced" {
				retried = true
				if task.TraceContext["traceparent"] != want["traceparent"] {
					t.Errorf("task of the next epoch: trace context %v, want %v", task.TraceContext, want)
				}
			}
		}
		if !retried {
			t.Fatal("the traced flow's attempt was not handed out again after the crash")
		}
	})
}
