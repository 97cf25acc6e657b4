// Package flows holds the example flow definitions: an order flow with a
// retried step and a recovery step, an approval flow that waits on a channel
// or a timer, an RPC-driven counter, and subflows: a shipment that fans out
// over parcels (AllOf) and a race of carrier quotes (AnyOf), and a dispatch
// with a queue per region and a total per customer (maps). The example worker serves them; the
// example client, tests and load drivers import them.
package flows

import "github.com/dexzd/dexzd/dex"

// All returns every example flow.
func All() []*dex.Flow {
	return []*dex.Flow{OrderFlow, ApprovalFlow, CounterFlow,
		ParcelFlow, ShipmentFlow, CarrierQuoteFlow, QuoteRaceFlow, DispatchFlow}
}
