package dextest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dextest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

type typedOrder struct {
	ID    string   `json:"id"`
	Cents int      `json:"cents"`
	Tags  []string `json:"tags,omitempty"`
}

var (
	typedApprove = dex.DefineChannel[bool]("approve")
	typedOrderA  = dex.DefineAttribute[typedOrder]("order")
	typedCount   = dex.DefineAttribute[uint8]("count")
)

// awaitTyped waits for an approval (or an hour).
type awaitTyped struct{ dex.Step[string] }

func (awaitTyped) WaitFor(_ dex.Context, _ string) (dex.Wait, error) {
	return dex.AnyOf(typedApprove.ForOne(), dex.Timer(time.Hour)), nil
}

func (awaitTyped) Execute(_ dex.Context, _ string, r dex.Results) (dex.Decision, error) {
	return dex.GracefulComplete(typedApprove.Messages(r)), nil
}

var typedFlow = dex.NewFlow("typed").Start(awaitTyped{}).Channels(typedApprove).Attributes(typedOrderA, typedCount)

// The same names, other Go types: what a client of another program (or
// dexcli) might send.
var (
	wrongApprove = dex.DefineChannel[string]("approve")
	wrongOrder   = dex.DefineAttribute[map[string]any]("order")
	wrongCount   = dex.DefineAttribute[int]("count")
)

// A value that does not decode as the type the worker declared is refused
// at the call, INVALID_ARGUMENT naming the channel or attribute, and
// changes nothing; a value of another Go type with the same JSON shape is
// accepted (type names are not compared).
//
// Covers: E16, E21
func TestValueTypes_RefusedAtTheCall(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, typedFlow)
	ctx, c := ctxT(t), env.Client()
	if _, err := c.StartFlow(ctx, typedFlow, "typed-1", "x"); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error, name string) {
		t.Helper()
		if status.Code(err) != codes.InvalidArgument || !errors.Is(err, dex.ErrInvalidArgument) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v, want INVALID_ARGUMENT naming %s", what, err, name)
		}
	}
	refused("publish a string to a bool channel",
		c.Publish(ctx, "typed-1", []dex.Message{wrongApprove.Message("yes")}), `channel "approve"`)
	refused("a string where an int is",
		c.SetAttributes(ctx, "typed-1", wrongOrder.Value(map[string]any{"id": "o1", "cents": "12"})), `attribute "order"`)
	refused("a fraction where an int is",
		c.SetAttributes(ctx, "typed-1", wrongOrder.Value(map[string]any{"cents": 1.5})), "at .cents")
	refused("an element of the wrong kind",
		c.SetAttributes(ctx, "typed-1", wrongOrder.Value(map[string]any{"tags": []any{"a", 2}})), "at .tags[1]")
	refused("out of a uint8's range", c.SetAttributes(ctx, "typed-1", wrongCount.Value(256)), `attribute "count"`)
	refused("negative into a uint8", c.SetAttributes(ctx, "typed-1", wrongCount.Value(-1)), `attribute "count"`)
	_, err := c.StartFlow(ctx, typedFlow, "typed-2", "x", dex.WithAttributes(wrongCount.Value(300)))
	refused("a start's attribute", err, `attribute "count"`)

	// Nothing of the refused calls landed.
	if vals, err := c.GetAttributes(ctx, "typed-1", nil); err != nil || len(vals) != 0 {
		t.Errorf("attributes = %v, %v; want none", vals, err)
	}
	// Same shape, other Go type, unknown members, null, and case-folded
	// member names are accepted, as the worker decodes them.
	if err := c.SetAttributes(ctx, "typed-1", wrongOrder.Value(map[string]any{"ID": "o1", "cents": 12, "extra": []int{1}, "tags": nil}),
		wrongCount.Value(255)); err != nil {
		t.Fatalf("a value of the declared shape: %v", err)
	}
	vals, err := c.GetAttributes(ctx, "typed-1", []string{"order"})
	var o typedOrder
	if err != nil || vals["order"].Decode(&o) != nil || o.ID != "o1" || o.Cents != 12 {
		t.Errorf("order = %+v (%v), %v", o, vals, err)
	}
	if err := c.Publish(ctx, "typed-1", []dex.Message{typedApprove.Message(true)}); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, "typed-1")
	if err != nil || res.Status != dex.StatusCompleted {
		t.Fatalf("result = %+v, %v", res, err)
	}
}

// A StartFlow whose input does not decode as the start step's declared
// input type is refused, INVALID_ARGUMENT naming the step; an input of the
// declared shape starts the flow. (A raw request: the SDK's StartFlow
// checks the Go type before sending.)
//
// Covers: E2
func TestValueTypes_StartInputRefused(t *testing.T) {
	t.Parallel()
	env := dextest.Start(t, typedFlow)
	ctx := ctxT(t)
	conn, err := grpc.NewClient(env.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fc := dexpb.NewFlowServiceClient(conn)
	start := func(id, input string) error {
		_, err := fc.StartFlow(ctx, &dexpb.StartFlowRequest{FlowType: "typed", FlowId: id, RequestId: "r-" + id,
			StartStep: &dexpb.Movement{Input: &dexpb.EncodedValue{Encoding: "json", Data: []byte(input)}}})
		return err
	}
	err = start("typed-in-1", `{"id":"x"}`)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `start step "awaitTyped"`) ||
		!strings.Contains(err.Error(), "an object where a string is expected") {
		t.Errorf("an object for a string input: %v", err)
	}
	if err := start("typed-in-2", `"x"`); err != nil {
		t.Errorf("a string input: %v", err)
	}
}
