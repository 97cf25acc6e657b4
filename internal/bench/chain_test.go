package bench

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dexraw"
)

func TestChainStep_MovesOnThenCompletes(t *testing.T) {
	t.Parallel()
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"127.0.0.1:1"}, Logger: slog.New(slog.DiscardHandler)},
		ChainFlow("bench-test"))
	if err != nil {
		t.Fatal(err)
	}
	task := func(in ChainInput) *dexpb.Task {
		data, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		return &dexpb.Task{Kind: dexpb.TaskKind(dex.KindExecute), TaskToken: []byte("t"), FlowType: "bench-test", FlowId: "f", RunId: "r",
			StepType: "ChainStep", StepExecutionId: "ChainStep-1", Attempt: 1,
			Input: &dexpb.EncodedValue{Encoding: "json", Data: data}}
	}

	res := dexraw.HandleTask(context.Background(), w, task(ChainInput{Value: 10, Left: 3, Pad: "xyz"})).GetTaskResult()
	m := res.GetExecute().GetDecision().GetMovements().GetMovements()
	if len(m) != 1 || m[0].GetStepType() != "ChainStep" {
		t.Fatalf("decision = %v, want a movement to ChainStep", res.GetExecute().GetDecision())
	}
	var next ChainInput
	if err := json.Unmarshal(m[0].GetInput().GetData(), &next); err != nil {
		t.Fatal(err)
	}
	if want := (ChainInput{Value: 11, Left: 2, Pad: "xyz"}); next != want {
		t.Errorf("next input = %+v, want %+v", next, want)
	}

	res = dexraw.HandleTask(context.Background(), w, task(ChainInput{Value: 12, Left: 1, Pad: "xyz"})).GetTaskResult()
	gc := res.GetExecute().GetDecision().GetGracefulComplete()
	if gc == nil {
		t.Fatalf("decision = %v, want GracefulComplete", res.GetExecute().GetDecision())
	}
	var out ChainOutput
	if err := json.Unmarshal(gc.GetOutput().GetData(), &out); err != nil {
		t.Fatal(err)
	}
	if want := (ChainOutput{Value: 13, Pad: "xyz"}); out != want {
		t.Errorf("output = %+v, want %+v", out, want)
	}
}

func TestRunChain_InvalidConfig(t *testing.T) {
	t.Parallel()
	_, err := RunChain(context.Background(), ChainConfig{Addresses: []string{"127.0.0.1:1"}, Flows: 0, Steps: 1, Callers: 1, WorkerConcurrency: 1})
	if err == nil {
		t.Fatal("RunChain with Flows 0 succeeded")
	}
}

func TestDefaultWarmup(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{1: 0, 9: 0, 10: 1, 200: 20, 1000: 100, 2000: 100} {
		if got := DefaultWarmup(n); got != want {
			t.Errorf("DefaultWarmup(%d) = %d, want %d", n, got, want)
		}
	}
}
