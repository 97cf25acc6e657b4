// Package dexraw is the escape hatch from package dex to the API's protobuf
// messages (package api/dexpb), for advanced uses the SDK's own types do not
// cover: tools that show a flow's full live state (its Waits, timers and
// pending tasks) or every field of its history, and tests that drive a
// Worker's handlers with hand-made Tasks.
//
// Everything here follows the API's messages, which may change with the
// API; code that can use package dex alone should.
package dexraw

import (
	"context"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/internal/rawhook"
)

// EncodedValue returns v as the API message; nil when v is unset.
func EncodedValue(v dex.Value) *dexpb.EncodedValue { return rawhook.EncodedValue(v) }

// Value wraps an EncodedValue as a dex.Value; nil is the unset Value.
func Value(ev *dexpb.EncodedValue) dex.Value { return rawhook.Value(ev).(dex.Value) }

// ConditionResults returns the Wait's results that r reads, as the API
// message (nil when the WaitFor failed or the step has no WaitFor).
func ConditionResults(r dex.Results) *dexpb.ConditionResults {
	return rawhook.ConditionResults(r)
}

// Hello returns the Hello w sends when it connects: its ID, its flow types
// with their declarations, and its concurrency.
func Hello(w *dex.Worker) *dexpb.Hello { return rawhook.Hello(w) }

// HandleTask runs one task on w synchronously, through the same code path as
// Worker.Run, and returns the message that answers it (a TaskResult or a
// TaskFailure). Tests use it to run handlers without a server; to run whole
// flows, package dex/dextest is simpler.
func HandleTask(ctx context.Context, w *dex.Worker, t *dexpb.Task) *dexpb.PollWorkerTaskRequest {
	return rawhook.HandleTask(ctx, w, t)
}

// FlowState returns the flow execution's live state as the API
// defines it: active step executions with their phase, options, Wait
// (timers and channel conditions) and failures, queued messages,
// attributes, outputs and pending tasks. It is retried like
// dex.Client.GetFlowState, whose result is a subset of it.
func FlowState(ctx context.Context, c *dex.Client, flowID string, opts ...dex.CallOption) (*dexpb.FlowState, error) {
	return rawhook.FlowState(ctx, c, flowID, opts)
}

// History returns a page of the flow execution's history as the API
// defines it, every field of every event. It is retried like
// dex.Client.GetFlowHistory.
func History(ctx context.Context, c *dex.Client, flowID string, q dex.HistoryQuery, opts ...dex.CallOption) (*dexpb.GetHistoryEventsResponse, error) {
	return rawhook.History(ctx, c, flowID, q, opts)
}
