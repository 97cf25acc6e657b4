// Command worker serves the example flows (order, approval, counter).
//
//	worker --server 127.0.0.1:8801,127.0.0.1:8811 --concurrency 16
//
// It stops gracefully on SIGINT or SIGTERM: running tasks finish and their
// results are delivered before it exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/examples/flows"
)

func main() { os.Exit(run()) }

// run serves until a signal arrives and returns the exit code: 2 for bad
// flags or flow definitions, 1 when the worker fails.
func run() int {
	server := flag.String("server", "127.0.0.1:8801", "server addresses, comma-separated, in order of preference")
	concurrency := flag.Int("concurrency", 16, "most tasks run at once")
	id := flag.String("id", "", "worker ID (default <hostname>-<pid>)")
	drain := flag.Duration("drain-timeout", 30*time.Second, "how long a graceful stop waits for running tasks")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w, err := dex.NewWorker(dex.WorkerOptions{
		Addresses:          strings.Split(*server, ","),
		WorkerID:           *id,
		MaxConcurrentTasks: *concurrency,
		DrainTimeout:       *drain,
		Logger:             slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}, flows.All()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
