package dex

import (
	"context"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex/internal/rawhook"
)

// The escape hatch to the API's messages lives in package dex/dexraw; these
// hooks give it the unexported parts it needs.
func init() {
	rawhook.EncodedValue = func(v any) *dexpb.EncodedValue { return v.(Value).ev }
	rawhook.Value = func(ev *dexpb.EncodedValue) any { return valueOf(ev) }
	rawhook.ConditionResults = func(r any) *dexpb.ConditionResults { return r.(Results).pb }
	rawhook.Hello = func(w any) *dexpb.Hello { return w.(*Worker).hello }
	rawhook.HandleTask = func(ctx context.Context, w any, t *dexpb.Task) *dexpb.PollWorkerTaskRequest {
		return w.(*Worker).reg.run(ctx, t)
	}
	rawhook.FlowState = func(ctx context.Context, c any, flowID string, opts any) (*dexpb.FlowState, error) {
		return c.(*Client).flowState(ctx, flowID, opts.([]CallOption))
	}
	rawhook.History = func(ctx context.Context, c any, flowID string, q any, opts any) (*dexpb.GetHistoryEventsResponse, error) {
		return c.(*Client).history(ctx, flowID, q.(HistoryQuery), opts.([]CallOption))
	}
}
