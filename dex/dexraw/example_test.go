package dexraw_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dexraw"
)

type Visitor struct{ Name string }

var (
	Hello   = dex.DefineChannel[string]("hello")
	Greeted = dex.DefineAttribute[int]("greeted")
)

type Greet struct{ dex.Step[Visitor] }

func (Greet) WaitFor(dex.Context, Visitor) (dex.Wait, error) { return Hello.ForOne(), nil }

func (Greet) Execute(ctx dex.Context, v Visitor, r dex.Results) (dex.Decision, error) {
	msg, _ := Hello.Received(r)
	Greeted.Set(ctx, 1)
	return dex.GracefulComplete("hello " + v.Name + ", " + msg), nil
}

var GreetFlow = dex.NewFlow("greet").Start(Greet{}).Channels(Hello).Attributes(Greeted)

// HandleTask runs a handler exactly as a worker would, without a server, on
// a Task made by hand.
func ExampleHandleTask() {
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"unused:1"}}, GreetFlow)
	if err != nil {
		log.Fatal(err)
	}
	in, _ := json.Marshal(Visitor{Name: "Ada"})
	msg, _ := json.Marshal("nice to meet you")
	answer := dexraw.HandleTask(context.Background(), w, &dexpb.Task{
		Kind: dexpb.TaskKind_TASK_KIND_EXECUTE, TaskToken: []byte("t1"), FlowType: "greet",
		StepType: "Greet", StepExecutionId: "Greet-1", Attempt: 1,
		Input: &dexpb.EncodedValue{Encoding: "json", Data: in},
		ConditionResults: &dexpb.ConditionResults{Channels: []*dexpb.ChannelResult{{
			Channel: "hello", Satisfied: true,
			Messages: []*dexpb.EncodedValue{{Encoding: "json", Data: msg}},
		}}},
	})
	res := answer.GetTaskResult()
	fmt.Println(string(res.GetExecute().GetDecision().GetGracefulComplete().GetOutput().GetData()))
	fmt.Println(res.GetWrites().GetAttributeWrites()[0].GetName(), string(res.GetWrites().GetAttributeWrites()[0].GetValue().GetData()))
	// Output:
	// "hello Ada, nice to meet you"
	// greeted 1
}
