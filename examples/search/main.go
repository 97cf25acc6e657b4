// Command search finds orders by their status: it searches the order
// flows (examples/flows) by the indexed attribute OrderStatus and prints
// each with its amount, page by page.
//
//	search --server 127.0.0.1:8801 --status charged
//	search --status shipped --min-cents 1000
package main

import (
	"context"
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
	status := flag.String("status", "charged", "the order status to find (reserved, charged, shipped, canceled)")
	minCents := flag.Int("min-cents", 0, "only orders of at least this amount")
	timeout := flag.Duration("timeout", 30*time.Second, "how long the search may take")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, strings.Split(*server, ","), *status, *minCents); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Query builds the search: order flows with the status and at least the
// amount, largest first. Strings are quoted with ' (doubled inside).
func Query(status string, minCents int) string {
	return fmt.Sprintf("FlowType = 'order' AND OrderStatus = '%s' AND cents >= %d ORDER BY cents DESC",
		strings.ReplaceAll(status, "'", "''"), minCents)
}

func run(ctx context.Context, addrs []string, status string, minCents int) error {
	c, err := dex.NewClient(dex.ClientOptions{Addresses: addrs})
	if err != nil {
		return err
	}
	defer c.Close()
	n := 0
	for f, err := range c.Search(ctx, Query(status, minCents), 100) { // pages of 100, fetched as the loop goes
		if err != nil {
			return err
		}
		cents, _, err := dex.SearchValue(f, flows.OrderCents)
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%s\t%s\t%d cents\tstarted %s\n", f.FlowID, f.RunID, f.Status, cents, f.StartTime.Format(time.RFC3339))
		n++
	}
	fmt.Fprintf(os.Stderr, "%d %s orders\n", n, status)
	return nil
}
