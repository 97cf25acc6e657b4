package flowcmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/cli/output"
	"github.com/dexzd/dexzd/internal/cli/session"
)

// flowResetCmd is "dexcli flow reset" (E37).
func flowResetCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reset FLOW_ID --run-id RUN_ID POINT --reason TEXT --yes",
		Short: "Start a new run of a flow ID from a point of its latest run's history",
		Long: `Reset makes a new run of the flow ID from a point of its latest run (named by
its exact run ID) and prints the new run's ID. Give exactly one point:

  --beginning             the run's start
  --step-type TYPE        before the first execution of the step type
  --step-execution ID     before the execution's WaitFor (with --before-execute:
                          before its Execute; its WaitFor must have returned no
                          wait or timers only)
  --time TIME             the last eligible point at or before the time (the
                          beginning, or just after an event that created steps)

The new run starts with the state at the point: the attributes as they were,
the step executions active then (each again from its WaitFor, with its ID and
input), the messages published before the point that the run had not
consumed. The client writes made after the point (attribute sets, publishes,
the writes of RPCs) are re-applied in their order unless --skip-reapply is
given. The old run keeps its history; a running one is TERMINATED, its message
naming the new run. A reset changes a flow's course: it needs --yes.

A reset carries a request ID (a random one unless --request-id is given,
printed either way); running the command again with the same --request-id and
run ID is a retry of that reset: it prints the run the reset made and resets
nothing.`,
		Example: session.Examples([]string{
			`dexcli flow reset order-42 --run-id 0190c3a2 --step-type Charge --reason "charge bug fixed in v2" --yes`,
			`dexcli flow reset order-42 --run-id 0190c3a2 --beginning --skip-reapply --reason "start over" --yes`,
			`dexcli flow reset order-42 --run-id 0190c3a2 --step-execution AwaitApproval-1 --before-execute --reason "skip the wait" --yes`,
			`dexcli flow reset order-42 --run-id 0190c3a2 --time 2025-01-02T15:04:05Z --reason "before the outage" --yes`,
		}),
		Args: session.Args(1, 1),
	}
	fs := cmd.Flags()
	runID := fs.String("run-id", "", "the exact `RUN_ID` of the run to reset: the flow ID's latest (required)")
	beginning := fs.Bool("beginning", false, "reset to the run's start")
	stepType := fs.String("step-type", "", "reset to before the first execution of step `TYPE`")
	stepExec := fs.String("step-execution", "", "reset to before step execution `ID`'s WaitFor")
	beforeExecute := fs.Bool("before-execute", false, "with --step-execution: before its Execute instead")
	at := fs.String("time", "", "reset to the last eligible point at or before `TIME` (RFC 3339, or a date)")
	skip := fs.Bool("skip-reapply", false, "leave out the client writes made after the point")
	reason := fs.String("reason", "", "why the run is reset, recorded with the reset (`TEXT`, required)")
	yes := fs.Bool("yes", false, "confirm the reset (required)")
	requestID := fs.String("request-id", "", "the reset's request `ID`, to retry it safely (default: a random one)")
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, args []string) error {
		req := &dexpb.ResetFlowRequest{FlowId: args[0], RunId: *runID, SkipReapply: *skip, Reason: *reason, RequestId: *requestID}
		if req.RequestId == "" {
			req.RequestId = newRequestID()
		}
		point := ""
		n := 0
		if *beginning {
			n++
			point, req.Point = "beginning", &dexpb.ResetPoint{Point: &dexpb.ResetPoint_Beginning{Beginning: true}}
		}
		if fs.Changed("step-type") {
			n++
			point, req.Point = "before the first "+*stepType, &dexpb.ResetPoint{Point: &dexpb.ResetPoint_StepType{StepType: *stepType}}
		}
		if fs.Changed("step-execution") {
			n++
			point = "before " + *stepExec
			if *beforeExecute {
				point = "before the Execute of " + *stepExec
			}
			req.Point = &dexpb.ResetPoint{Point: &dexpb.ResetPoint_StepExecution{StepExecution: &dexpb.StepExecutionPoint{
				StepExecutionId: *stepExec, BeforeExecute: *beforeExecute}}}
		}
		if fs.Changed("time") {
			n++
			ts, err := parseTime("--time", *at)
			if err != nil {
				return err
			}
			point = "at or before " + ts.AsTime().Format(time.RFC3339Nano)
			req.Point = &dexpb.ResetPoint{Point: &dexpb.ResetPoint_EventTime{EventTime: ts}}
		}
		switch {
		case req.RunId == "":
			return session.Usagef("--run-id is required: name the exact run to reset (dexcli flow describe %s shows the latest)", req.FlowId)
		case n != 1:
			return session.Usagef("give exactly one point: --beginning, --step-type, --step-execution or --time")
		case *beforeExecute && !fs.Changed("step-execution"):
			return session.Usagef("--before-execute needs --step-execution")
		case *reason == "":
			return session.Usagef("--reason is required: it is recorded with the reset")
		case !*yes:
			return session.Usagef("flow reset starts a new run of %s and terminates run %s if it still runs; confirm with --yes", req.FlowId, req.RunId)
		}
		var resp *dexpb.ResetFlowResponse
		err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			resp, err = c.ResetFlow(ctx, req)
			return err
		})
		if err != nil {
			return s.Fail(ctx, err, session.CallInfo{FlowID: req.FlowId, RunID: req.RunId, Hints: unknownHints("reset", req.RequestId)})
		}
		if s.Out.JSON {
			return s.Out.Document(output.Object{
				{"flowId", req.FlowId}, {"runId", resp.GetRunId()}, {"resetRunId", resp.GetResetRunId()},
				{"point", point}, {"reapplied", !req.SkipReapply}, {"reason", req.Reason}, {"requestId", req.RequestId},
			})
		}
		return output.KeyValues(s.Out.W, "Flow ID", req.FlowId, "New run ID", resp.GetRunId(),
			"Reset run ID", resp.GetResetRunId(), "Point", point, "Later writes re-applied", yesNo(!req.SkipReapply),
			"Reason", req.Reason, "Request ID", req.RequestId)
	})
	return cmd
}

// unknownHints are the hints of a call with a request ID whose outcome is
// unknown (E37): the same command with the same request ID is a retry
// that applies it at most once.
func unknownHints(what, requestID string) map[codes.Code]string {
	h := fmt.Sprintf("the %s may or may not have happened; run the same command again with the same request ID, which applies it at most once: add --request-id %s", what, requestID)
	return map[codes.Code]string{codes.Unavailable: h, codes.DeadlineExceeded: h}
}
