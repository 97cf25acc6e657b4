package dex_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dexraw"
)

// Drain closes its flow when one region's queue is empty, else drains on;
// Stray names a channel the flow does not declare.
var regionOrders = dex.DefineChannelMap[string, int]("orders")

type (
	Drain struct{ dex.Step[string] }
	Stray struct{ dex.Step[string] }
)

func (Drain) Execute(_ dex.Context, region string) (dex.Decision, error) {
	return dex.ForceCompleteIfChannelsEmpty("done", []dex.ChannelDef{regionOrders.Instance(region)}, dex.To[Drain](region)), nil
}

func (Stray) Execute(_ dex.Context, _ string) (dex.Decision, error) {
	return dex.ForceCompleteIfChannelsEmpty("done", []dex.ChannelDef{dex.DefineChannel[int]("elsewhere")}, dex.To[Stray]("")), nil
}

// ForceCompleteIfChannelsEmpty may name a ChannelMap's instance, as the
// engine accepts (the SDK refused every name but a plain channel's); a
// channel the flow does not declare still fails the attempt, naming it.
//
// Covers: E32, E33
func TestForceCompleteIfChannelsEmpty_ChannelMapInstance(t *testing.T) {
	t.Parallel()
	flow := dex.NewFlow("drain").Start(Drain{}).Steps(Stray{}).Channels(regionOrders)
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"127.0.0.1:1"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, flow)
	if err != nil {
		t.Fatal(err)
	}
	task := func(step string) *dexpb.Task {
		return &dexpb.Task{Kind: dexpb.TaskKind(dex.KindExecute), TaskToken: []byte("t"), FlowType: "drain", FlowId: "f", RunId: "r",
			StepType: step, StepExecutionId: step + "-1", Attempt: 1, Input: &dexpb.EncodedValue{Encoding: "json", Data: []byte(`"eu/west"`)}}
	}
	ctx := context.Background()
	resp := dexraw.HandleTask(ctx, w, task("Drain"))
	d := resp.GetTaskResult().GetExecute().GetDecision().GetForceCompleteIfChannelsEmpty()
	if d == nil || len(d.GetChannels()) != 1 || d.GetChannels()[0] != "orders/eu%2Fwest" {
		t.Fatalf("Drain = %v, want a conditional close on orders/eu%%2Fwest", resp)
	}
	f := dexraw.HandleTask(ctx, w, task("Stray")).GetTaskFailure()
	if f == nil || !strings.Contains(f.GetMessage(), `"elsewhere"`) {
		t.Fatalf("Stray = %v, want a failure naming the undeclared channel", f)
	}
}
