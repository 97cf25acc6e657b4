// Command client starts an order flow and waits for its receipt.
//
//	client --server 127.0.0.1:8801 --order 42 --cents 1200
//	client --order 43 --card declined   # charge fails, the order is canceled
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

// cli parses the flags, runs the order and returns the exit code.
func cli() int {
	server := flag.String("server", "127.0.0.1:8801", "server addresses, comma-separated")
	orderID := flag.String("order", "42", "order ID (the flow ID is order-<ID>)")
	cents := flag.Int("cents", 1200, "amount to charge")
	card := flag.String("card", "visa", `card; "declined" makes every charge fail`)
	timeout := flag.Duration("timeout", 2*time.Minute, "how long to wait for the receipt")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, strings.Split(*server, ","), flows.Order{ID: *orderID, Cents: *cents, Card: *card}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func run(ctx context.Context, addrs []string, o flows.Order) error {
	c, err := dex.NewClient(dex.ClientOptions{Addresses: addrs})
	if err != nil {
		return err
	}
	defer c.Close()

	flowID := "order-" + o.ID
	run, err := c.StartFlow(ctx, flows.OrderFlow, flowID, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "started %s (run %s)\n", flowID, run.RunID)
	res, err := c.WaitForFlow(ctx, flowID, dex.WithRunID(run.RunID))
	if err != nil {
		return err
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("flow %s ended %s: %w", flowID, res.Status, err)
	}
	receipt, err := dex.Output[flows.Receipt](res)
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(receipt, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}
