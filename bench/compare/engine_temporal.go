package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/dexzd/dexzd/internal/bench"
)

// temporalEngine runs the Temporal CLI's dev server ("temporal server
// start-dev", SQLite in a file) and the chain as a workflow of K
// sequential activities, with a worker of the Go SDK in this process.
type temporalEngine struct{}

func (*temporalEngine) name() string { return "temporal" }

const temporalQueue = "bench-chain"

// temporalChain runs in.Steps activities in sequence, each adding 1.
func temporalChain(ctx workflow.Context, in dbosInput) (int64, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	v := in.Value
	for range in.Steps {
		if err := workflow.ExecuteActivity(ctx, temporalAddOne, v).Get(ctx, &v); err != nil {
			return 0, err
		}
	}
	return v, nil
}

func temporalAddOne(_ context.Context, v int64) (int64, error) { return v + 1, nil }

func (*temporalEngine) round(ctx context.Context, r roundConfig) (m Measurement, err error) {
	bin := filepath.Join(r.ToolsDir, "bin", "temporal")
	if _, err := os.Stat(bin); err != nil {
		return m, fmt.Errorf("%s: %w", bin, errNoBinary)
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return m, err
		}
	}
	hostPort := fmt.Sprintf("127.0.0.1:%d", ports[0])
	logFile := filepath.Join(r.Dir, "temporal.log")
	p, err := startProcess("temporal", logFile, nil, bin, "server", "start-dev", "--headless",
		"--ip", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--http-port", strconv.Itoa(ports[1]),
		"--metrics-port", strconv.Itoa(ports[2]),
		"--db-filename", filepath.Join(r.Dir, "temporal.db"), "--log-level", "error")
	if err != nil {
		return m, err
	}
	defer func() {
		if serr := p.stop(30 * time.Second); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	wrap := func(err error) error { return fmt.Errorf("%w\n%s", err, tail(logFile)) }

	var c client.Client
	if err := waitFor(p, 60*time.Second, "temporal dev server ready", func() error {
		cc, err := client.Dial(client.Options{HostPort: hostPort, Namespace: "default",
			Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		if err != nil {
			return err
		}
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := cc.CheckHealth(hctx, &client.CheckHealthRequest{}); err != nil {
			cc.Close()
			return err
		}
		c = cc
		return nil
	}); err != nil {
		return m, wrap(err)
	}
	defer c.Close()

	w := worker.New(c, temporalQueue, worker.Options{})
	w.RegisterWorkflow(temporalChain)
	w.RegisterActivity(temporalAddOne)
	if err := w.Start(); err != nil {
		return m, wrap(fmt.Errorf("temporal worker: %w", err))
	}
	defer w.Stop()

	prefix := fmt.Sprintf("chain-r%d-%s-", r.Round, randomHex(4))
	m, err = closedLoop(ctx, loopConfig{
		Flows: r.Flows, Warmup: r.Warmup, Callers: r.Callers,
		ServerCPU: func() (bench.CPUTime, error) { return treeCPU(p.pid()) },
		Flow: func(ctx context.Context, i int) error {
			start := chainStart(i)
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: prefix + strconv.Itoa(i), TaskQueue: temporalQueue},
				temporalChain, dbosInput{Value: start, Steps: r.Steps})
			if err != nil {
				return err
			}
			var v int64
			if err := run.Get(ctx, &v); err != nil {
				return err
			}
			if want := start + int64(r.Steps); v != want {
				return fmt.Errorf("wrong output %d, want %d", v, want)
			}
			return nil
		},
	})
	if err != nil {
		return m, wrap(err)
	}
	return m, nil
}
