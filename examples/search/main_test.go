package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/examples/flows"
	"github.com/dexzd/dexzd/internal/testproc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testproc.Cleanup()
	os.Exit(code)
}

// The example finds the orders of a dev server by status and amount,
// through the example worker's order flow.
//
// Covers: E36
func TestSearch_FindsOrdersByStatus(t *testing.T) {
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	p.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}}, dex.ClientOptions{}, flows.All()...)
	for id, o := range map[string]flows.Order{
		"order-1": {ID: "1", Cents: 500, Card: "visa"}, "order-2": {ID: "2", Cents: 2500, Card: "visa"},
		"order-3": {ID: "3", Cents: 900, Card: "declined"},
	} {
		if _, err := c.StartFlow(ctx, flows.OrderFlow, id, o); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitForFlow(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	out := captureStdout(t, func() error { return run(ctx, []string{addr}, "shipped", 0) })
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "order-2\t") || !strings.Contains(lines[0], "2500 cents") || !strings.HasPrefix(lines[1], "order-1\t") {
		t.Errorf("shipped orders:\n%s", out)
	}
	if out := captureStdout(t, func() error { return run(ctx, []string{addr}, "shipped", 1000) }); !strings.HasPrefix(out, "order-2\t") || strings.Count(out, "\n") != 1 {
		t.Errorf("shipped orders of at least 1000 cents:\n%s", out)
	}
	if out := captureStdout(t, func() error { return run(ctx, []string{addr}, "canceled", 0) }); !strings.HasPrefix(out, "order-3\t") {
		t.Errorf("canceled orders:\n%s", out)
	}
}

func captureStdout(t *testing.T, fn func() error) string {
	t.Helper()
	r, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = wr
	var buf bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&buf, r); close(copied) }()
	ferr := fn()
	os.Stdout = old
	_ = wr.Close()
	<-copied
	if ferr != nil {
		t.Fatal(ferr)
	}
	return buf.String()
}
