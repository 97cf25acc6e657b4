// Package e2e holds process tests: real dex-server-zd processes, the Go SDK's
// worker and client, signals, and a check of what survived.
package e2e

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testproc.Cleanup()
	os.Exit(code)
}

// The chain flow: three sequential steps, each adds one to its input.
type (
	First  struct{ dex.Step[int] }
	Second struct{ dex.Step[int] }
	Third  struct{ dex.Step[int] }
)

func (First) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.Move(dex.To[Second](n + 1)), nil
}
func (Second) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.Move(dex.To[Third](n + 1)), nil
}
func (Third) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.GracefulComplete(n + 1), nil
}

var chainFlow = dex.NewFlow("chain3").Start(First{}).Steps(Second{}, Third{})

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// chainWorkerAndClient runs a worker of chainFlow against addr and returns
// a client of addr, both reconnecting quickly (for tests that kill the
// server), and stopWorker, which stops the worker and waits for it (it
// also runs when the test ends).
func chainWorkerAndClient(t *testing.T, ctx context.Context, addr string) (c *dex.Client, stopWorker func()) {
	t.Helper()
	fast := dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	w, err := dex.NewWorker(dex.WorkerOptions{
		Addresses: []string{addr}, MaxConcurrentTasks: 32, Logger: quietLogger(), ReconnectBackoff: fast,
	}, chainFlow)
	if err != nil {
		t.Fatal(err)
	}
	workerDone := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	go func() { workerDone <- w.Run(wctx) }()
	var once sync.Once
	stopWorker = func() { once.Do(func() { cancel(); <-workerDone }) }
	t.Cleanup(stopWorker)
	c, err = dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger(), RetryBackoff: fast})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, stopWorker
}
