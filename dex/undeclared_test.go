package dex_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dexraw"
)

type hopFirst struct{ dex.Step[int] }

func (hopFirst) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.Move(dex.To[hopMissing](n)), nil
}

type hopMissing struct{ dex.Step[int] }

func (hopMissing) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.GracefulComplete(n), nil
}

// A movement to a step the flow does not declare (no MovesTo to check it
// at NewWorker) fails the attempt for good, and the message names the step
// and the fix.
//
// Covers: E13
func TestWorker_MovementToAnUndeclaredStepNamesTheFix(t *testing.T) {
	t.Parallel()
	flow := dex.NewFlow("hop").Start(hopFirst{}) // hopMissing is not in Steps
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"unused:1"}, Logger: quietLogger()}, flow)
	if err != nil {
		t.Fatal(err)
	}
	tk := task(dexpb.TaskKind(dex.KindExecute), "t", "hopFirst", jsonValue(t, 1))
	tk.FlowType = "hop"
	f := dexraw.HandleTask(context.Background(), w, tk).GetTaskFailure()
	if !f.GetNonRetryable() || !strings.Contains(f.GetMessage(), `step "hopMissing"`) || !strings.Contains(f.GetMessage(), ".Steps(hopMissing{})") {
		t.Fatalf("failure = %v; want a non-retryable failure naming hopMissing and .Steps(hopMissing{})", f)
	}
}
