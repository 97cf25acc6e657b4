package dex_test

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dexzd/dexzd/dex"
)

// The flow the tests serve. Step behaviour depends on the order ID, so that
// parallel tests do not share state.

type Order struct {
	ID    string
	Cents int
}

type Receipt struct {
	OrderID string
	Cents   int
}

var (
	Status  = dex.DefineAttribute[string]("status")
	Counter = dex.DefineAttribute[int]("counter")
	Approve = dex.DefineChannel[bool]("approve")
	Notes   = dex.DefineChannel[string]("notes")

	deadline = dex.Timer(time.Hour).WithID("deadline")
	approval = Approve.ForOne().WithID("approval")
)

type Reserve struct{ dex.Step[Order] }

func (Reserve) Execute(ctx dex.Context, o Order) (dex.Decision, error) {
	Status.Set(ctx, "reserved")
	Notes.Publish(ctx, "reserved "+o.ID)
	return dex.Move(dex.To[Await](o)), nil
}

type Await struct{ dex.Step[Order] }

func (Await) Options() dex.StepOptions {
	return dex.StepOptions{WaitForFailure: dex.WaitForProceed}
}

func (Await) WaitFor(ctx dex.Context, o Order) (dex.Wait, error) {
	if o.ID == "no-wait" {
		return nil, nil
	}
	Status.Set(ctx, "awaiting")
	return dex.AnyOf(approval, Notes.AtLeastAtMost(1, 3), deadline), nil
}

func (Await) Execute(ctx dex.Context, o Order, r dex.Results) (dex.Decision, error) {
	if err := r.WaitForError(); err != nil {
		return dex.ForceFail("wait failed: " + err.Error()), nil
	}
	if ok, got := Approve.Received(r); got && ok {
		for _, n := range Notes.Messages(r) {
			Notes.Publish(ctx, "seen "+n)
		}
		return dex.Move(
			dex.To[Charge](o),
			dex.To[Ship](o).WithOptions(dex.StepOptions{Execute: dex.MethodOptions{AttemptTimeout: 5 * time.Second}}).SkipWaitFor(),
		), nil
	}
	if r.TimerFired(dex.TimerID(deadline.ID())) {
		return dex.ForceFail("not approved in time"), nil
	}
	return dex.DeadEnd(), nil
}

// chargeError is a typed error, reported with its Go type.
type chargeError struct{ code string }

func (e *chargeError) Error() string { return "card declined: " + e.code }

type Charge struct{ dex.Step[Order] }

func (Charge) Options() dex.StepOptions {
	return dex.StepOptions{
		Execute: dex.MethodOptions{
			AttemptTimeout: 10 * time.Second,
			Retry:          &dex.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1.5, MaximumAttempts: 3},
			Durability:     dex.DurabilityAsync,
		},
		Recovery: dex.Ref[Refund](),
	}
}

func (Charge) MovesTo() []dex.StepRef { return []dex.StepRef{dex.Ref[Ship]()} }

func (Charge) Execute(ctx dex.Context, o Order) (dex.Decision, error) {
	switch o.ID {
	case "declined":
		return nil, fmt.Errorf("charge %s: %w", o.ID, &chargeError{code: "51"})
	case "busy":
		return nil, chargeBusy(o)
	case "panic":
		panic("charge " + o.ID + " exploded")
	case "gate":
		g := gate(o.ID + ctx.Info().FlowID)
		select {
		case <-g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "undeclared":
		return dex.Move(dex.To[Refund](o)), nil // not in MovesTo
	}
	return dex.Move(dex.To[Ship](o)), nil
}

func chargeBusy(o Order) error {
	return dex.RetryAfter(3*time.Second, errors.New("gateway busy for "+o.ID))
}

type Refund struct{ dex.Step[Order] }

func (Refund) Execute(ctx dex.Context, o Order) (dex.Decision, error) {
	return dex.GracefulComplete("refunded " + o.ID), nil
}

type Ship struct{ dex.Step[Order] }

func (Ship) Execute(ctx dex.Context, o Order) (dex.Decision, error) {
	if o.ID == "force" {
		return dex.ForceComplete(Receipt{OrderID: o.ID, Cents: o.Cents}), nil
	}
	return dex.GracefulComplete(Receipt{OrderID: o.ID, Cents: o.Cents}), nil
}

var (
	GetStatus = dex.DefineRPC("status", func(ctx dex.Context, _ struct{}) (string, error) {
		return Status.Get(ctx)
	})
	Add = dex.DefineRPC("add", func(ctx dex.Context, n int) (int, error) {
		if n < 0 {
			return 0, errors.New("negative")
		}
		c, err := Counter.Get(ctx)
		if err != nil {
			return 0, err
		}
		Counter.Set(ctx, c+n)
		if c+n >= 10 {
			dex.Schedule(ctx, dex.To[Ship](Order{ID: "rpc", Cents: c + n}))
		}
		return c + n + Notes.QueueSize(ctx), nil
	})
)

var testFlow = dex.NewFlow("order").
	Start(Reserve{}).
	Steps(Await{}, Charge{}, Refund{}, Ship{}).
	Attributes(Status, Counter).
	Channels(Approve, Notes).
	RPCs(GetStatus, Add).
	Defaults(dex.StepOptions{WaitFor: dex.MethodOptions{AttemptTimeout: 2 * time.Second}})

// gates hold handlers until the test releases them.
var gates sync.Map // string -> chan struct{}

func gate(key string) chan struct{} {
	g, _ := gates.LoadOrStore(key, make(chan struct{}))
	return g.(chan struct{})
}
