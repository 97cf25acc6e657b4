package dex_test

import (
	"context"
	"fmt"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/dexzd/dexzd/dex"
)

// A small flow for the examples: greet a visitor when a "hello" message
// arrives, or say goodbye after a minute.

type Visitor struct{ Name string }

var (
	Hello   = dex.DefineChannel[string]("hello")
	Greeted = dex.DefineAttribute[int]("greeted")
	Count   = dex.DefineRPC("count", func(ctx dex.Context, _ struct{}) (int, error) {
		return Greeted.Get(ctx)
	})
)

type Greet struct{ dex.Step[Visitor] }

func (Greet) WaitFor(ctx dex.Context, v Visitor) (dex.Wait, error) {
	return dex.AnyOf(Hello.ForOne(), dex.Timer(time.Minute).WithID("timeout")), nil
}

func (Greet) Execute(ctx dex.Context, v Visitor, r dex.Results) (dex.Decision, error) {
	if msg, ok := Hello.Received(r); ok {
		n, err := Greeted.Get(ctx)
		if err != nil {
			return nil, err
		}
		Greeted.Set(ctx, n+1)
		return dex.GracefulComplete("hello " + v.Name + ", " + msg), nil
	}
	return dex.GracefulComplete("goodbye " + v.Name), nil
}

var GreetFlow = dex.NewFlow("greet").
	Start(Greet{}).
	Channels(Hello).
	Attributes(Greeted).
	RPCs(Count)

func ExampleNewFlow() {
	// The definition is checked when a worker starts; Validate checks it
	// in a test.
	fmt.Println(GreetFlow.Validate())
	// Output: <nil>
}

func ExampleNewWorker() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	w, err := dex.NewWorker(dex.WorkerOptions{
		Addresses:          []string{"127.0.0.1:8801", "127.0.0.1:8811"},
		MaxConcurrentTasks: 16,
	}, GreetFlow)
	if err != nil {
		log.Fatal(err) // names the flow and the step of every mistake
	}
	// Run polls until ctx ends, then drains gracefully.
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_StartFlow() {
	ctx := context.Background()
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{"127.0.0.1:8801"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// The input's type is checked against the start step's (Visitor).
	if _, err := c.StartFlow(ctx, GreetFlow, "visit-1", Visitor{Name: "Ada"}); err != nil {
		log.Fatal(err)
	}
	if err := c.Publish(ctx, "visit-1", []dex.Message{Hello.Message("welcome")}); err != nil {
		log.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, "visit-1")
	if err != nil {
		log.Fatal(err)
	}
	if err := res.Err(); err != nil {
		log.Fatalf("flow ended %s: %v", res.Status, err)
	}
	greeting, err := dex.Output[string](res)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(greeting)
}

func ExampleInvokeRPC() {
	ctx := context.Background()
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{"127.0.0.1:8801"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	n, err := dex.InvokeRPC(ctx, c, "visit-1", Count, struct{}{}) // n is an int
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n)
}
