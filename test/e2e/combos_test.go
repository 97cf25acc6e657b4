package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// The E32 flow: Gate waits for an AnyCombinationOf, keeps a ticket in a
// step-execution local across its WaitFor and Execute, records events,
// then hands over to Drain, which loops with ForceCompleteIfChannelsEmpty
// until the items channel is empty.
var (
	comboApprove = dex.DefineChannel[bool]("approve")
	comboItems   = dex.DefineChannel[int]("items")
	comboTicket  = dex.DefineLocal[string]("ticket")
	comboMore    = comboItems.AtMost(3).WithID("more")
	comboPair    = comboItems.ForN(2).WithID("pair")
)

// ComboIn is Gate's input.
type ComboIn struct{ Ticket string }

// ComboOut is the flow's output.
type ComboOut struct {
	Ticket  string
	Group   int
	More    []int // what the "more" condition took
	Pair    []int // what the "pair" condition took
	Drained int   // the sum of the items Drain consumed
}

// Gate: group 0 is approve + "more" (up to 3 items) + "pair" (exactly 2
// items), group 1 is approve + a 1 h timer. "more" is declared first:
// "pair" reserves its 2 items, then "more" takes the extra capacity, and
// each takes from the queue head in declaration order.
type Gate struct{ dex.Step[ComboIn] }

func (Gate) WaitFor(ctx dex.Context, in ComboIn) (dex.Wait, error) {
	comboTicket.Set(ctx, in.Ticket)
	ctx.SetLocal("note", map[string]int{"waitForAttempt": ctx.Info().Attempt})
	ctx.RecordEvent("gate-waiting", in.Ticket)
	approve := comboApprove.ForOne().WithID("approve")
	return dex.AnyCombinationOf(
		dex.AllOf(approve, comboMore, comboPair),
		dex.AllOf(approve, dex.Timer(time.Hour).WithID("late")),
	), nil
}

func (Gate) Execute(ctx dex.Context, _ ComboIn, r dex.Results) (dex.Decision, error) {
	ticket, ok, err := comboTicket.Get(ctx)
	if err != nil || !ok {
		return nil, dex.NonRetryable(fmt.Errorf("ticket local (set: %v): %w", ok, err))
	}
	var note map[string]int
	if ok, err := ctx.Local("note", &note); err != nil || !ok || note["waitForAttempt"] != 1 {
		return nil, dex.NonRetryable(fmt.Errorf("note local %v (set: %v): %w", note, ok, err))
	}
	g, _ := r.WinningGroup()
	out := ComboOut{Ticket: ticket, Group: g, More: comboMore.Messages(r), Pair: comboPair.Messages(r)}
	ctx.RecordEvent("gate-passed", out)
	return dex.ForceCompleteIfChannelsEmpty(out, []dex.ChannelDef{comboItems}, dex.To[Drain](out)), nil
}

// Drain takes what is queued and closes the flow once the channel is
// empty, atomically: an item published meanwhile is taken by the next
// Drain, never lost.
type Drain struct{ dex.Step[ComboOut] }

func (Drain) WaitFor(_ dex.Context, _ ComboOut) (dex.Wait, error) {
	return comboItems.AtMost(100).WithID("batch"), nil
}

func (Drain) Execute(_ dex.Context, out ComboOut, r dex.Results) (dex.Decision, error) {
	for _, v := range comboItems.Messages(r) {
		out.Drained += v
	}
	return dex.ForceCompleteIfChannelsEmpty(out, []dex.ChannelDef{comboItems}, dex.To[Drain](out)), nil
}

var comboNote = dex.DefineRPC("note", func(ctx dex.Context, s string) (string, error) {
	ctx.RecordEvent("rpc-note", s)
	return "noted", nil
})

var comboFlow = dex.NewFlow("e32").Start(Gate{}).Steps(Drain{}).
	Channels(comboApprove, comboItems).RPCs(comboNote)

// comboRaceFlow starts at Drain: it loops until the channel is empty.
var comboRaceFlow = dex.NewFlow("e32-race").Start(Drain{}).Channels(comboItems)

// All four E32 features through the SDK against a dev server that is
// SIGKILLed and restarted while Gate waits: the combination's channel
// reservation, the locals (written before the kill, read after it), the
// user events in history, and ForceCompleteIfChannelsEmpty both ways
// (an item left over runs the fallback; an empty channel completes).
//
// Covers: E32
func TestE32_CombinationLocalsEventsCloseIfEmpty(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--data-dir", dir, "--listen", addr, "--durability", "strict"}
	p1 := testproc.Start(t, args...)
	p1.Serving(t, 30*time.Second)
	fast := dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}, ReconnectBackoff: fast},
		dex.ClientOptions{RetryBackoff: fast}, comboFlow)

	const id = "e32-1"
	if _, err := dex.Start[Gate](ctx, c, comboFlow, id, ComboIn{Ticket: "T-7"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, func() (bool, string) {
		st, err := c.GetFlowState(ctx, id)
		if err != nil {
			return false, err.Error()
		}
		return len(st.Steps) == 1 && st.Steps[0].Phase == dex.PhaseWaiting, fmt.Sprintf("%+v", st.Steps)
	})
	// Six items, no approval: group 0 lacks approve, group 1 the timer,
	// so nothing is consumed.
	items := make([]dex.Message, 6)
	for i := range items {
		items[i] = comboItems.Message(i + 1)
	}
	if err := c.Publish(ctx, id, items); err != nil {
		t.Fatal(err)
	}
	if got, err := dex.InvokeRPC(ctx, c, id, comboNote, "hello"); err != nil || got != "noted" {
		t.Fatalf("rpc: %q %v", got, err)
	}

	p1.Signal(t, syscall.SIGKILL)
	p1.Wait(t, 10*time.Second)
	p2 := testproc.Start(t, args...)
	p2.Serving(t, 30*time.Second)

	if err := c.Publish(ctx, id, []dex.Message{comboApprove.Message(true)}); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := dex.Output[ComboOut](res)
	if err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("result %v %v %+v", res.Status, err, res.Error)
	}
	// pair reserves 2 of the 6, more takes its 3 first (declared first),
	// pair the next 2; item 6 is left, so Gate's close falls back to
	// Drain, which takes it and closes on the empty channel.
	want := ComboOut{Ticket: "T-7", Group: 0, More: []int{1, 2, 3}, Pair: []int{4, 5}, Drained: 6}
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("output %+v, want %+v", out, want)
	}

	page, err := c.GetFlowHistory(ctx, id, dex.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	drains := 0
	for _, e := range page.Events {
		switch {
		case e.Kind == dex.EventUser:
			var v any
			if err := e.EventValue.Decode(&v); err != nil {
				t.Fatalf("event %s: %v", e, err)
			}
			events = append(events, fmt.Sprintf("%s@%s%s", e.EventName, e.StepExecutionID, e.RPCName))
		case e.Kind == dex.EventExecuteCompleted && e.StepType == "Drain":
			drains++
		}
	}
	if got, want := fmt.Sprint(events), "[gate-waiting@Gate-1 rpc-note@note gate-passed@Gate-1]"; got != want {
		t.Fatalf("user events %s, want %s", got, want)
	}
	if drains != 1 {
		t.Fatalf("%d Drain executions, want 1", drains)
	}
}

// The ForceCompleteIfChannelsEmpty race: publishers send items while
// Drain loops; every publish the server accepted is in the output, and
// every other one was refused because the flow had closed. No message is
// lost between the emptiness check and the close.
//
// Covers: E32
func TestE32_CloseIfEmptyRace(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	p.Serving(t, 30*time.Second)
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}, MaxConcurrentTasks: 8}, dex.ClientOptions{}, comboRaceFlow)

	for round := range 5 {
		id := fmt.Sprintf("race-%d", round)
		if _, err := dex.Start[Drain](ctx, c, comboRaceFlow, id, ComboOut{}); err != nil {
			t.Fatal(err)
		}
		var accepted, refused atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for ctx.Err() == nil {
					err := c.Publish(ctx, id, []dex.Message{comboItems.Message(1)})
					switch {
					case err == nil:
						accepted.Add(1)
					case errors.Is(err, dex.ErrFailedPrecondition):
						refused.Add(1)
						return
					default:
						t.Errorf("publish: %v", err)
						return
					}
				}
			})
		}
		res, err := c.WaitForFlow(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		out, err := dex.Output[ComboOut](res)
		if err != nil {
			t.Fatal(err)
		}
		if int64(out.Drained) != accepted.Load() {
			t.Fatalf("round %d: drained %d, but %d publishes were accepted (%d refused)", round, out.Drained, accepted.Load(), refused.Load())
		}
		t.Logf("round %d: %d accepted, all drained; %d refused after the close", round, accepted.Load(), refused.Load())
	}
}
