package flows

import (
	"time"

	"github.com/dexzd/dexzd/dex"
)

// Subscription is the subscription flow's input: bill CentsPerMonth once
// a month for Months months.
type Subscription struct {
	ID            string `json:"id"`
	Months        int    `json:"months"`
	CentsPerMonth int    `json:"centsPerMonth"`
}

// Statement is the subscription flow's output.
type Statement struct {
	SubscriptionID string `json:"subscriptionId"`
	Months         int    `json:"months"`
	BilledCents    int    `json:"billedCents"`
	Canceled       string `json:"canceled,omitempty"` // the reason, when a "cancel" message ended it
}

var (
	// SubscriptionMonths counts the months billed so far.
	SubscriptionMonths = dex.DefineAttribute[int]("months")
	// SubscriptionBilled is the amount billed so far, in cents.
	SubscriptionBilled = dex.DefineAttribute[int]("billedCents")
	// CancelSubscription ends the subscription at the next bill.
	CancelSubscription = dex.DefineChannel[string]("cancel")
	// BillingPeriod is the durable monthly timer; SkipTimer(...,
	// dex.TimerID("month")) bills early.
	BillingPeriod = dex.Timer(30 * 24 * time.Hour).WithID("month")
)

// BillMonth waits for the month to pass (or a cancellation), bills it and
// moves on to the next month as a new run (dex.ContinueAsNew): a
// subscription runs for years, and each run's history holds one month.
// The new run carries the attributes and the step counter, so month n is
// BillMonth-n in run "<first run>.continued-<n-1>".
type BillMonth struct{ dex.Step[Subscription] }

func (BillMonth) WaitFor(ctx dex.Context, s Subscription) (dex.Wait, error) {
	return dex.AnyOf(BillingPeriod, CancelSubscription.ForOne()), nil
}

func (BillMonth) Execute(ctx dex.Context, s Subscription, res dex.Results) (dex.Decision, error) {
	months, err := SubscriptionMonths.Get(ctx)
	if err != nil {
		return nil, err
	}
	billed, err := SubscriptionBilled.Get(ctx)
	if err != nil {
		return nil, err
	}
	if reason, ok := CancelSubscription.Received(res); ok {
		return dex.GracefulComplete(Statement{SubscriptionID: s.ID, Months: months, BilledCents: billed, Canceled: reason}), nil
	}
	months, billed = months+1, billed+s.CentsPerMonth
	SubscriptionMonths.Set(ctx, months)
	SubscriptionBilled.Set(ctx, billed)
	if months >= s.Months {
		return dex.GracefulComplete(Statement{SubscriptionID: s.ID, Months: months, BilledCents: billed}), nil
	}
	return dex.ContinueAsNew(dex.Move(dex.To[BillMonth](s))), nil
}

// SubscriptionFlow bills monthly, one run per month.
var SubscriptionFlow = dex.NewFlow("subscription").
	Start(BillMonth{}).
	Attributes(SubscriptionMonths, SubscriptionBilled).
	Channels(CancelSubscription)
