// Command subscription runs the subscription flow (examples/flows): it
// starts a subscription, fast-forwards each month by skipping the durable
// monthly timer, and prints the run each month was billed in (every month
// continues as a new run, so no run's history grows) and the statement.
//
//	subscription --server 127.0.0.1:8801 --id 7 --months 3
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/examples/flows"
)

func main() { os.Exit(cli()) }

func cli() int {
	server := flag.String("server", "127.0.0.1:8801", "server addresses, comma-separated")
	id := flag.String("id", "1", "the subscription ID (flow ID subscription-<id>)")
	months := flag.Int("months", 3, "months to bill")
	cents := flag.Int("cents", 999, "the monthly price in cents")
	timeout := flag.Duration("timeout", time.Minute, "how long the run may take")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := dex.NewClient(dex.ClientOptions{Addresses: strings.Split(*server, ",")})
	if err == nil {
		defer c.Close()
		err = run(ctx, c, os.Stdout, flows.Subscription{ID: *id, Months: *months, CentsPerMonth: *cents})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// run starts subscription s and skips each month's timer once the month's
// BillMonth execution waits for it.
func run(ctx context.Context, c *dex.Client, out io.Writer, s flows.Subscription) error {
	flowID := "subscription-" + s.ID
	r, err := dex.Start[flows.BillMonth](ctx, c, flows.SubscriptionFlow, flowID, s,
		dex.WithAttributes(flows.SubscriptionMonths.Value(0), flows.SubscriptionBilled.Value(0)))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "started %s run %s\n", flowID, r.RunID)
	for month := 1; month <= s.Months; month++ {
		step := fmt.Sprintf("BillMonth-%d", month) // the step counter goes on across runs
		runID, err := waitingFor(ctx, c, flowID, step)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "month %d: %s waits in run %s\n", month, step, runID)
		if err := c.SkipTimer(ctx, flowID, step, dex.TimerID("month"), dex.WithRunID(runID)); err != nil {
			return fmt.Errorf("skip month %d: %w", month, err)
		}
	}
	res, err := c.WaitForFlow(ctx, flowID) // follows the continuations to the last run
	if err != nil {
		return err
	}
	if res.Status != dex.StatusCompleted {
		return fmt.Errorf("subscription %s: %w", res.RunID, res.Err())
	}
	st, err := dex.Output[flows.Statement](res)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "completed in run %s: %d months, %d cents billed\n", res.RunID, st.Months, st.BilledCents)
	return nil
}

// waitingFor polls the flow's latest run until step waits for its timer
// and returns the run's ID.
func waitingFor(ctx context.Context, c *dex.Client, flowID, step string) (string, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.GetFlowState(ctx, flowID)
		if err != nil {
			return "", err
		}
		for _, s := range st.Steps {
			if s.StepExecutionID == step && s.Phase == dex.PhaseWaiting {
				return st.Summary.RunID, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s did not wait for its month: %w", step, ctx.Err())
		case <-tick.C:
		}
	}
}
