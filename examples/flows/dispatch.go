package flows

import "github.com/dexzd/dexzd/dex"

// Region names a dispatch region, the key of the Orders channel map.
type Region string

// RegionOrder is a message on one region's queue of the Orders map.
type RegionOrder struct {
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
	// Last closes the region's queue.
	Last bool `json:"last,omitempty"`
}

var (
	// Orders is one queue per region (a channel map, E33).
	Orders = dex.DefineChannelMap[Region, RegionOrder]("orders")
	// Spent is each customer's total (an attribute map, E33).
	Spent = dex.DefineAttributeMap[string, int]("spent")
)

// OpenRegions starts one Drain per region.
type OpenRegions struct{ dex.Step[[]Region] }

func (OpenRegions) Execute(_ dex.Context, regions []Region) (dex.Decision, error) {
	ms := make([]dex.Movement, len(regions))
	for i, r := range regions {
		ms[i] = dex.To[Drain](r)
	}
	return dex.Move(ms...), nil
}

// Drain takes its region's orders one at a time and adds each to its
// customer's total, until the region's last order.
type Drain struct{ dex.Step[Region] }

func (Drain) WaitFor(_ dex.Context, r Region) (dex.Wait, error) {
	return dex.Until(Orders.ForOne(r)), nil
}

func (Drain) Execute(ctx dex.Context, r Region, res dex.Results) (dex.Decision, error) {
	o, _ := Orders.Received(res, r)
	if o.Customer != "" {
		n, err := Spent.Get(ctx, o.Customer)
		if err != nil {
			return nil, err
		}
		Spent.Set(ctx, o.Customer, n+o.Cents)
	}
	if o.Last {
		return dex.GracefulComplete(r), nil // the flow completes with its last region
	}
	return dex.Move(dex.To[Drain](r)), nil
}

// DispatchView is what the "dispatch-status" RPC returns: every customer's
// total, and the regions with orders queued, with their queue sizes.
type DispatchView struct {
	Spent  map[string]int `json:"spent"`
	Queued map[Region]int `json:"queued"`
}

// DispatchStatus reads the totals and the non-empty queues.
var DispatchStatus = dex.DefineRPC("dispatch-status", func(ctx dex.Context, _ struct{}) (DispatchView, error) {
	v := DispatchView{Spent: map[string]int{}, Queued: map[Region]int{}}
	for _, c := range Spent.Keys(ctx) {
		n, err := Spent.Get(ctx, c)
		if err != nil {
			return v, err
		}
		v.Spent[c] = n
	}
	for _, r := range Orders.Keys(ctx) {
		v.Queued[r] = Orders.QueueSize(ctx, r)
	}
	return v, nil
})

// DispatchFlow routes orders per region and totals them per customer.
var DispatchFlow = dex.NewFlow("dispatch").
	Start(OpenRegions{}).Steps(Drain{}).
	Attributes(Spent).Channels(Orders).RPCs(DispatchStatus)
