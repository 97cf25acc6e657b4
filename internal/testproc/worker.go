package testproc

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/dexzd/dexzd/dex"
)

// WorkerAndClient runs a worker of flows with wo until the test ends and
// returns a client with co, both with a quiet logger; the client uses the
// worker's addresses when co names none. The worker stops, and the client
// closes, when the test ends.
func WorkerAndClient(t testing.TB, ctx context.Context, wo dex.WorkerOptions, co dex.ClientOptions, flows ...*dex.Flow) *dex.Client {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	wo.Logger, co.Logger = quiet, quiet
	if co.Addresses == nil {
		co.Addresses = wo.Addresses
	}
	w, err := dex.NewWorker(wo, flows...)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { cancel(); <-done }) //nolint:errcheck // Run ends with the test; its error is its cancellation
	c, err := dex.NewClient(co)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
