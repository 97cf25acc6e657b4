package flows

import (
	"errors"
	"time"

	"github.com/dexzd/dexzd/dex"
)

// Order is the order flow's input.
type Order struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
	Card  string `json:"card"` // "declined" makes every charge fail
}

// Receipt is the order flow's output.
type Receipt struct {
	OrderID  string `json:"orderId"`
	Status   string `json:"status"` // "shipped" or "canceled"
	Cents    int    `json:"cents"`
	Tracking string `json:"tracking,omitempty"`
}

// OrderStatus is where the order is; the "status" RPC reads it. It is
// indexed for search under the key OrderStatus (examples/search finds
// orders by it), as OrderCents is under "cents".
var (
	OrderStatus    = dex.DefineAttribute[string]("status", dex.Indexed(dex.IndexKey("OrderStatus")))
	OrderCents     = dex.DefineAttribute[int]("cents", dex.Indexed())
	OrderStatusRPC = dex.DefineRPC("status", func(ctx dex.Context, _ struct{}) (string, error) {
		return OrderStatus.Get(ctx)
	})
)

// ErrGatewayBusy is the payment gateway's transient error.
var ErrGatewayBusy = errors.New("payment gateway busy")

// DeclinedError is a permanent charge failure.
type DeclinedError struct{ Card string }

func (e *DeclinedError) Error() string { return "card " + e.Card + " declined" }

// Reserve reserves the goods.
type Reserve struct{ dex.Step[Order] }

func (Reserve) Execute(ctx dex.Context, o Order) (dex.Decision, error) {
	OrderStatus.Set(ctx, "reserved")
	OrderCents.Set(ctx, o.Cents)
	return dex.Move(dex.To[Charge](o)), nil
}

// Charge charges the card. The simulated gateway is busy for the first two
// attempts; a declined card fails every attempt, and after the last one the
// order is canceled (the recovery step).
type Charge struct{ dex.Step[Order] }

func (Charge) Options() dex.StepOptions {
	return dex.StepOptions{
		Execute:  dex.MethodOptions{Retry: &dex.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 4}},
		Recovery: dex.Ref[Cancel](),
	}
}

func (Charge) Execute(ctx dex.Context, o Order) (dex.Decision, error) {
	if o.Card == "declined" {
		return nil, &DeclinedError{Card: o.Card}
	}
	if ctx.Info().Attempt <= 2 {
		return nil, dex.RetryAfter(50*time.Millisecond, ErrGatewayBusy)
	}
	OrderStatus.Set(ctx, "charged")
	return dex.Move(dex.To[Ship](o)), nil
}

// Ship ships the order and completes the flow with a receipt.
type Ship struct{ dex.Step[Order] }

func (Ship) Execute(ctx dex.Context, o Order) (dex.Decision, error) {
	OrderStatus.Set(ctx, "shipped")
	return dex.GracefulComplete(Receipt{OrderID: o.ID, Status: "shipped", Cents: o.Cents, Tracking: "TRK-" + o.ID}), nil
}

// Cancel releases the reservation when the charge failed for good.
type Cancel struct{ dex.Step[Order] }

func (Cancel) Execute(ctx dex.Context, o Order) (dex.Decision, error) {
	OrderStatus.Set(ctx, "canceled")
	return dex.GracefulComplete(Receipt{OrderID: o.ID, Status: "canceled"}), nil
}

// OrderFlow is reserve -> charge -> ship, or cancel when charging fails.
var OrderFlow = dex.NewFlow("order").
	Start(Reserve{}).
	Steps(Charge{}, Ship{}, Cancel{}).
	Attributes(OrderStatus, OrderCents).
	RPCs(OrderStatusRPC)
