package dextest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dextest"
	"github.com/dexzd/dexzd/examples/flows"
)

// An order runs to completion on a real server in this process. In a test,
// dextest.Start(t, flows.OrderFlow) does the same and stops everything when
// the test ends; New and Close are for code without a testing.TB.
func Example() {
	ctx := context.Background()
	env, err := dextest.New(ctx, []*dex.Flow{flows.OrderFlow})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := env.Close(); err != nil {
			log.Fatal(err)
		}
	}()

	c := env.Client()
	if _, err := c.StartFlow(ctx, flows.OrderFlow, "order-42", flows.Order{ID: "42", Cents: 1200, Card: "visa"}); err != nil {
		log.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, "order-42")
	if err != nil {
		log.Fatal(err)
	}
	receipt, err := dex.Output[flows.Receipt](res)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, receipt.Status, receipt.Tracking)
	// Output: FLOW_STATUS_COMPLETED shipped TRK-42
}
