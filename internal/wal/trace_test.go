package wal_test

import (
	"context"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/wal"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A record submitted with a parent span gets a dex.log.append span (the
// batch's write, with the store, the batch's bytes and records) and a
// dex.log.apply span (its OnDurable), both children of the parent; a
// record submitted without one, in the same batch, gets none.
func TestWriter_TracesTheWriteAndApplyOfTracedRecords(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s := mem.New()
	s.SetFaults(latency(20 * time.Millisecond))
	w, _ := newWriter(t, s, func(c *wal.WriterConfig) {
		c.Tracer = tp.Tracer("test")
		c.StoreName = "mem"
	})
	ctx, parent := tp.Tracer("test").Start(t.Context(), "call")
	psc := parent.SpanContext()
	// The first record goes alone while the next two gather: they share
	// batch 1, one traced and one not.
	first := w.SubmitAsync([]byte("r0"))
	for w.QueuedBytes() != 0 { // taken for its write
		time.Sleep(time.Millisecond)
	}
	traced := w.SubmitTraced([]byte("r1"), trace.SpanContextFromContext(ctx))
	plain := w.SubmitAsync([]byte("r2"))
	for _, f := range []wal.Future{first, traced, plain} {
		if _, err := f.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	parent.End()
	seq, _ := traced.Result()

	byName := map[string]tracetest.SpanStub{}
	for _, sp := range exp.GetSpans() {
		if _, dup := byName[sp.Name]; dup {
			t.Fatalf("span %s recorded twice: %v", sp.Name, exp.GetSpans())
		}
		byName[sp.Name] = sp
	}
	if len(byName) != 3 {
		t.Fatalf("spans = %v, want call, dex.log.append and dex.log.apply", exp.GetSpans())
	}
	app, ok := byName["dex.log.append"]
	if !ok {
		t.Fatal("no dex.log.append span")
	}
	apl, ok := byName["dex.log.apply"]
	if !ok {
		t.Fatal("no dex.log.apply span")
	}
	for _, sp := range []tracetest.SpanStub{app, apl} {
		if sp.Parent.SpanID() != psc.SpanID() || sp.SpanContext.TraceID() != psc.TraceID() {
			t.Errorf("%s: parent %v, want %v", sp.Name, sp.Parent.SpanID(), psc.SpanID())
		}
	}
	want := map[attribute.Key]attribute.Value{
		"dex.log.store":   attribute.StringValue("mem"),
		"dex.log.seq":     attribute.Int64Value(int64(seq)),
		"dex.log.epoch":   attribute.Int64Value(7),
		"dex.log.records": attribute.IntValue(2),
		"dex.log.bytes":   attribute.IntValue(wal.EncodedSize(wal.Batch{Records: [][]byte{[]byte("r1"), []byte("r2")}})),
	}
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range app.Attributes {
		got[kv.Key] = kv.Value
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("dex.log.append %s = %v, want %v", k, got[k].String(), v.String())
		}
	}
	// The write took the store's latency; the apply followed it.
	if d := app.EndTime.Sub(app.StartTime); d < 20*time.Millisecond {
		t.Errorf("dex.log.append lasted %v, less than the store's 20ms latency", d)
	}
	if apl.StartTime.Before(app.EndTime) {
		t.Errorf("dex.log.apply starts at %v, before the write ended at %v", apl.StartTime, app.EndTime)
	}
}

// Without a tracer, SubmitTraced is SubmitAsync.
func TestWriter_SubmitTracedWithoutTracer(t *testing.T) {
	t.Parallel()
	w, a := newWriter(t, mem.New(), nil)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	if _, err := w.SubmitTraced([]byte("r"), sc).Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(a.get()); n != 1 {
		t.Fatalf("applied %d batches, want 1", n)
	}
}
