// Package rawhook connects package dex/dexraw to the unexported parts of
// package dex without an import cycle: dex sets these functions in its init,
// dexraw calls them. The dex types travel as any; dex asserts them back.
package rawhook

import (
	"context"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Set by package dex's init.
var (
	// EncodedValue returns a dex.Value's message (nil when unset).
	EncodedValue func(v any) *dexpb.EncodedValue
	// Value wraps an EncodedValue as a dex.Value.
	Value func(ev *dexpb.EncodedValue) any
	// ConditionResults returns a dex.Results' message.
	ConditionResults func(r any) *dexpb.ConditionResults
	// Hello returns a *dex.Worker's Hello.
	Hello func(w any) *dexpb.Hello
	// HandleTask runs one task on a *dex.Worker.
	HandleTask func(ctx context.Context, w any, t *dexpb.Task) *dexpb.PollWorkerTaskRequest
	// FlowState calls GetFlowState on a *dex.Client; opts is []dex.CallOption.
	FlowState func(ctx context.Context, c any, flowID string, opts any) (*dexpb.FlowState, error)
	// History calls GetHistoryEvents on a *dex.Client; q is a
	// dex.HistoryQuery, opts []dex.CallOption.
	History func(ctx context.Context, c any, flowID string, q any, opts any) (*dexpb.GetHistoryEventsResponse, error)
)
