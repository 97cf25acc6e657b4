// Command subflows runs the subflow examples against a server whose worker
// serves examples/flows (go run ./examples/worker): a shipment that fans
// out over one parcel child per parcel (AllOf), then a race of carrier
// quotes (AnyOf) whose losers it stops by their flow IDs.
//
//	subflows --server 127.0.0.1:8801 --id 7
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
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
	id := flag.String("id", "1", "suffix of the flow IDs (shipment-<ID>, quote-<ID>)")
	timeout := flag.Duration("timeout", 2*time.Minute, "how long to wait for both flows")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, strings.Split(*server, ","), *id); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func run(ctx context.Context, addrs []string, id string) error {
	c, err := dex.NewClient(dex.ClientOptions{Addresses: addrs})
	if err != nil {
		return err
	}
	defer c.Close()

	// Fan-out: one parcel child per parcel, all awaited.
	ship := flows.Shipment{ID: id, Parcels: []flows.Parcel{{ID: "a", Grams: 1200}, {ID: "b", Grams: 300}, {ID: "c", Grams: 5000}}}
	manifest, err := runFlow[flows.PackAll, flows.Manifest](ctx, c, flows.ShipmentFlow, "shipment-"+id, ship)
	if err != nil {
		return err
	}
	if err := print("manifest", manifest); err != nil {
		return err
	}

	// Race: the first carrier to answer wins; the others keep running
	// until they are stopped by ID.
	race := flows.QuoteRace{Requests: []flows.QuoteRequest{
		{Carrier: "slowpost", Grams: 1200, Latency: time.Hour},
		{Carrier: "quickship", Grams: 1200, Latency: 20 * time.Millisecond},
	}}
	best, err := runFlow[flows.RaceQuotes, flows.BestQuote](ctx, c, flows.QuoteRaceFlow, "quote-"+id, race)
	if err != nil {
		return err
	}
	if err := print("best quote", best); err != nil {
		return err
	}
	for _, loser := range best.Losers {
		st, err := c.StopFlow(ctx, loser, dex.StopCancel, "lost the quote race")
		if err != nil {
			return fmt.Errorf("stop %s: %w", loser, err)
		}
		fmt.Fprintf(os.Stderr, "stopped %s: %s\n", loser, st)
	}
	return nil
}

// runFlow starts flow (start step S) with in and returns its output.
func runFlow[S dex.StepWithInput[In], Out, In any](ctx context.Context, c *dex.Client, flow *dex.Flow, flowID string, in In) (Out, error) {
	var zero Out
	run, err := dex.Start[S](ctx, c, flow, flowID, in, dex.WithIDReusePolicy(dex.ReuseAllowIfNotRunning))
	if err != nil {
		return zero, err
	}
	fmt.Fprintf(os.Stderr, "started %s (run %s)\n", flowID, run.RunID)
	res, err := c.WaitForFlow(ctx, flowID, dex.WithRunID(run.RunID))
	if err != nil {
		return zero, err
	}
	if err := res.Err(); err != nil {
		return zero, fmt.Errorf("flow %s ended %s: %w", flowID, res.Status, err)
	}
	return dex.Output[Out](res)
}

func print(what string, v any) error {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s\n", what, out)
	return nil
}
