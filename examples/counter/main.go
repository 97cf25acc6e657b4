// Command counter drives the counter flow with concurrent locked RPCs:
// every caller adds 1 under the counter's lock, calling again while the
// lock is held, then the flow finishes with the total.
//
//	counter --server 127.0.0.1:8801 --id counter-1 --callers 50
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/examples/flows"
)

func main() { os.Exit(cli()) }

func cli() int {
	server := flag.String("server", "127.0.0.1:8801", "server addresses, comma-separated")
	id := flag.String("id", "counter-1", "the counter's flow ID")
	callers := flag.Int("callers", 50, "concurrent callers, each adding 1")
	timeout := flag.Duration("timeout", 2*time.Minute, "how long to run")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, strings.Split(*server, ","), *id, *callers); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func run(ctx context.Context, addrs []string, flowID string, callers int) error {
	c, err := dex.NewClient(dex.ClientOptions{Addresses: addrs})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.StartFlow(ctx, flows.CounterFlow, flowID, nil); err != nil {
		return err
	}
	var refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			for {
				// The lock makes add's read-and-write exclusive: without it
				// concurrent adds would overwrite each other.
				_, err := dex.InvokeRPC(ctx, c, flowID, flows.Add, 1, dex.WithLocks(flows.Count))
				if !errors.Is(err, dex.ErrLockHeld) {
					errs <- err
					return
				}
				refused.Add(1) // nothing ran: call again shortly
				time.Sleep(time.Duration(1+rand.IntN(5)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	total, err := dex.InvokeRPC(ctx, c, flowID, flows.Finish, struct{}{}, dex.WithLocks(flows.Count))
	if err != nil {
		return err
	}
	fmt.Printf("%d callers added 1 each (%d calls refused while the lock was held): counter %d\n", callers, refused.Load(), total)
	if total != callers {
		return fmt.Errorf("counter %d, want %d", total, callers)
	}
	return nil
}
