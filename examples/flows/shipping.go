package flows

import (
	"fmt"
	"time"

	"github.com/dexzd/dexzd/dex"
)

// Subflows (E31): a shipment fans out over one "parcel" child per parcel
// and waits for them all (AllOf); a quote races one "carrier-quote" child
// per carrier and takes the first answer (AnyOf), or gives up after a
// minute. Each child is a flow of its own, under an ID the server derives
// from the parent's (SubFlow:<parentFlowId>-<stepExecutionId>-<index>).

// Parcel is one parcel of a shipment.
type Parcel struct {
	ID    string `json:"id"`
	Grams int    `json:"grams"`
}

// Label is a packed parcel: the parcel flow's output.
type Label struct {
	ParcelID string `json:"parcelId"`
	Tracking string `json:"tracking"`
}

// Pack packs a parcel: a moment of work per kilogram, then its label.
type Pack struct{ dex.Step[Parcel] }

func (Pack) WaitFor(ctx dex.Context, p Parcel) (dex.Wait, error) {
	return dex.Timer(time.Duration(p.Grams/1000) * 10 * time.Millisecond), nil
}

func (Pack) Execute(ctx dex.Context, p Parcel, _ dex.Results) (dex.Decision, error) {
	return dex.GracefulComplete(Label{ParcelID: p.ID, Tracking: "TRK-" + p.ID}), nil
}

// ParcelFlow packs one parcel.
var ParcelFlow = dex.NewFlow("parcel").Start(Pack{})

// ParcelSub is ParcelFlow as a subflow: a Parcel in, a Label out.
var ParcelSub = dex.SubFlow[Pack, Parcel, Label](ParcelFlow)

// Shipment is the shipment flow's input.
type Shipment struct {
	ID      string   `json:"id"`
	Parcels []Parcel `json:"parcels"`
}

// Manifest is the shipment flow's output.
type Manifest struct {
	ShipmentID string   `json:"shipmentId"`
	Labels     []Label  `json:"labels"`
	Failed     []string `json:"failed,omitempty"` // parcel flows that did not complete
}

// PackAll starts one parcel child per parcel and waits for every one.
type PackAll struct{ dex.Step[Shipment] }

func (PackAll) WaitFor(ctx dex.Context, s Shipment) (dex.Wait, error) {
	conds := make([]dex.Condition, len(s.Parcels))
	for i, p := range s.Parcels {
		conds[i] = ParcelSub.Start(p).WithID(p.ID)
	}
	return dex.AllOf(conds...), nil
}

func (PackAll) Execute(ctx dex.Context, s Shipment, r dex.Results) (dex.Decision, error) {
	m := Manifest{ShipmentID: s.ID}
	for _, res := range ParcelSub.Results(r) {
		label, err := res.Output()
		if res.Status != dex.StatusCompleted || err != nil {
			m.Failed = append(m.Failed, res.FlowID)
			continue
		}
		m.Labels = append(m.Labels, label)
	}
	return dex.GracefulComplete(m), nil
}

// ShipmentFlow fans out over its parcels.
var ShipmentFlow = dex.NewFlow("shipment").Start(PackAll{})

// QuoteRequest asks one carrier for a price.
type QuoteRequest struct {
	Carrier string        `json:"carrier"`
	Grams   int           `json:"grams"`
	Latency time.Duration `json:"latency"` // how long this carrier takes to answer
}

// Quote is a carrier's price: the carrier-quote flow's output.
type Quote struct {
	Carrier string `json:"carrier"`
	Cents   int    `json:"cents"`
}

// AskCarrier waits for the carrier's answer, then prices the parcel.
type AskCarrier struct{ dex.Step[QuoteRequest] }

func (AskCarrier) WaitFor(ctx dex.Context, q QuoteRequest) (dex.Wait, error) {
	return dex.Timer(q.Latency), nil
}

func (AskCarrier) Execute(ctx dex.Context, q QuoteRequest, _ dex.Results) (dex.Decision, error) {
	return dex.GracefulComplete(Quote{Carrier: q.Carrier, Cents: 300 + q.Grams/10}), nil
}

// CarrierQuoteFlow asks one carrier.
var CarrierQuoteFlow = dex.NewFlow("carrier-quote").Start(AskCarrier{})

// CarrierQuote is CarrierQuoteFlow as a subflow.
var CarrierQuote = dex.SubFlow[AskCarrier, QuoteRequest, Quote](CarrierQuoteFlow)

// QuoteRace is the race flow's input: the carriers to ask.
type QuoteRace struct {
	Requests []QuoteRequest `json:"requests"`
}

// BestQuote is the race flow's output: the first answer, and the children
// that lost and still run (the client stops them by ID).
type BestQuote struct {
	Quote  *Quote   `json:"quote,omitempty"` // nil: no carrier answered in time
	Losers []string `json:"losers,omitempty"`
}

// RaceQuotes asks every carrier and takes the first answer.
type RaceQuotes struct{ dex.Step[QuoteRace] }

func (RaceQuotes) WaitFor(ctx dex.Context, q QuoteRace) (dex.Wait, error) {
	conds := []dex.Condition{dex.Timer(time.Minute).WithID("give-up")}
	for _, r := range q.Requests {
		conds = append(conds, CarrierQuote.Start(r).WithID(r.Carrier))
	}
	return dex.AnyOf(conds...), nil
}

func (RaceQuotes) Execute(ctx dex.Context, q QuoteRace, r dex.Results) (dex.Decision, error) {
	var best BestQuote
	for _, res := range CarrierQuote.Results(r) {
		if !res.Satisfied {
			best.Losers = append(best.Losers, res.FlowID) // a RUNNING snapshot
			continue
		}
		quote, err := res.Output()
		if err != nil {
			return nil, fmt.Errorf("quote of %s: %w", res.ConditionID, err)
		}
		best.Quote = &quote
	}
	return dex.GracefulComplete(best), nil
}

// QuoteRaceFlow races the carriers.
var QuoteRaceFlow = dex.NewFlow("quote-race").Start(RaceQuotes{})
