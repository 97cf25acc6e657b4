package e2e

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// The regional flow (E33): a tier per customer in an attribute map, an
// order queue per region in a channel map. Seed sets a customer's tier and
// records how many customers it saw (its own staged Set included), then
// starts one Collect per region; each Collect waits for two orders of its
// own region and completes with their sum, also written to the totals map.
type (
	Region      string
	SeedRegions struct{ dex.Step[[]Region] }
	Collect     struct{ dex.Step[Region] }
)

var (
	customerTier = dex.DefineAttributeMap[string, string]("tier")
	regionTotal  = dex.DefineAttributeMap[Region, int]("total")
	seenByOwn    = dex.DefineAttribute[[]string]("seen")
	regionOrders = dex.DefineChannelMap[Region, int]("orders")
)

func (SeedRegions) Execute(ctx dex.Context, regions []Region) (dex.Decision, error) {
	customerTier.Set(ctx, "acme/eu", "gold") // a key with the separator in it
	seenByOwn.Set(ctx, customerTier.Keys(ctx))
	ms := make([]dex.Movement, len(regions))
	for i, r := range regions {
		ms[i] = dex.To[Collect](r)
	}
	return dex.Move(ms...), nil
}

func (Collect) WaitFor(_ dex.Context, r Region) (dex.Wait, error) {
	return dex.Until(regionOrders.ForN(r, 2)), nil
}

func (Collect) Execute(ctx dex.Context, r Region, res dex.Results) (dex.Decision, error) {
	sum := 0
	for _, n := range regionOrders.Messages(res, r) {
		sum += n
	}
	regionTotal.Set(ctx, r, sum)
	return dex.GracefulComplete(sum), nil
}

// regionalView is what the RPC sees: the customers, their count, the
// regions with queued orders and each one's queue size.
type regionalView struct {
	Customers []string
	Count     int
	Busy      []Region
	Sizes     map[Region]int
}

var regionalPeek = dex.DefineRPC("peek", func(ctx dex.Context, _ struct{}) (regionalView, error) {
	v := regionalView{Customers: customerTier.Keys(ctx), Count: customerTier.Count(ctx),
		Busy: regionOrders.Keys(ctx), Sizes: map[Region]int{}}
	for _, r := range v.Busy {
		v.Sizes[r] = regionOrders.QueueSize(ctx, r)
	}
	return v, nil
})

var regionalFlow = dex.NewFlow("regional").Start(SeedRegions{}).Steps(Collect{}).
	Attributes(customerTier, regionTotal, seenByOwn).Channels(regionOrders).RPCs(regionalPeek)

// Covers: E33
func TestMaps_PerCustomerAttributesAndPerRegionQueues(t *testing.T) {
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	p.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}}, dex.ClientOptions{}, regionalFlow)

	const id = "regional-1"
	if _, err := dex.Start[SeedRegions](ctx, c, regionalFlow, id, []Region{"eu", "us"},
		dex.WithAttributes(customerTier.Value("bob%1", "silver"))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitForStepCompletion(ctx, id, dex.Ref[SeedRegions](), 1); err != nil {
		t.Fatal(err)
	}
	seen, err := dex.GetAttribute(ctx, c, id, seenByOwn)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"acme/eu", "bob%1"}; !slices.Equal(seen, want) {
		t.Fatalf("Seed saw keys %q, want %q (its staged Set included)", seen, want)
	}
	// One order per region, and one for a region nobody waits for: no
	// Collect has two of its own yet.
	if err := c.Publish(ctx, id, []dex.Message{regionOrders.Message("eu", 1), regionOrders.Message("us", 10),
		regionOrders.Message("ap", 100)}); err != nil {
		t.Fatal(err)
	}
	v, err := dex.InvokeRPC(ctx, c, id, regionalPeek, struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"acme/eu", "bob%1"}; !slices.Equal(v.Customers, want) || v.Count != 2 {
		t.Fatalf("RPC saw customers %q (count %d), want %q", v.Customers, v.Count, want)
	}
	if want := []Region{"ap", "eu", "us"}; !slices.Equal(v.Busy, want) || v.Sizes["eu"] != 1 || v.Sizes["us"] != 1 || v.Sizes["ap"] != 1 {
		t.Fatalf("RPC saw busy regions %q sizes %v, want %q with one order each", v.Busy, v.Sizes, want)
	}

	// Refusals: an undeclared map, the bare map name, a message of the
	// wrong type for the map's declared type.
	if err := c.SetAttributes(ctx, id, dex.DefineAttributeMap[string, string]("nope").Value("k", "v")); !errors.Is(err, dex.ErrInvalidArgument) {
		t.Fatalf("SetAttributes of an undeclared map: %v, want INVALID_ARGUMENT", err)
	}
	if err := c.Publish(ctx, id, []dex.Message{dex.DefineChannel[int]("orders").Message(1)}); !errors.Is(err, dex.ErrInvalidArgument) {
		t.Fatalf("Publish to the bare map name: %v, want INVALID_ARGUMENT", err)
	}
	if err := c.Publish(ctx, id, []dex.Message{dex.DefineChannelMap[Region, string]("orders").Message("eu", "x")}); !errors.Is(err, dex.ErrInvalidArgument) {
		t.Fatalf("Publish of a string to an int channel map: %v, want INVALID_ARGUMENT", err)
	}

	if err := c.SetAttributes(ctx, id, customerTier.Value("carol", "bronze")); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, id, []dex.Message{regionOrders.Message("us", 20), regionOrders.Message("eu", 2)}); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dex.StatusCompleted || len(res.Outputs) != 2 {
		t.Fatalf("flow ended %v with %d outputs, want COMPLETED with 2", res.Status, len(res.Outputs))
	}
	st, err := c.GetFlowState(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	totals, err := regionTotal.Entries(*st)
	if err != nil {
		t.Fatal(err)
	}
	if totals["eu"] != 3 || totals["us"] != 30 || len(totals) != 2 {
		t.Fatalf("totals %v, want eu=3 us=30: each Collect got its own region's orders", totals)
	}
	tiers, err := customerTier.Entries(*st)
	if err != nil {
		t.Fatal(err)
	}
	if len(tiers) != 3 || tiers["acme/eu"] != "gold" || tiers["bob%1"] != "silver" || tiers["carol"] != "bronze" {
		t.Fatalf("tiers %v", tiers)
	}
	if _, ok := st.Attributes["tier/acme%2Feu"]; !ok {
		t.Fatalf("attributes %v: want the wire name tier/acme%%2Feu", st.Attributes)
	}
	if q := regionOrders.QueueSizes(*st); len(q) != 1 || q["ap"] != 1 {
		t.Fatalf("queues left %v, want ap=1", q)
	}
}
