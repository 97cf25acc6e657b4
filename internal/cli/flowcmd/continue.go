package flowcmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/cli/output"
	"github.com/dexzd/dexzd/internal/cli/session"
)

// flowContinueAsNewCmd is "dexcli flow continue-as-new" (E37).
func flowContinueAsNewCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "continue-as-new FLOW_ID --run-id RUN_ID --yes",
		Short: "Continue a running flow as a new run that takes its live state over",
		Long: `The run closes CONTINUED_AS_NEW and a new run of the same flow ID takes over its
queued and waiting steps (with their waits and satisfied conditions), unconsumed
messages, attributes, outputs, step counters and flow timeout deadline; attempts
running at the switch deliver their results to the new run. The server also does
this by itself when a run's history reaches limits.continueAsNewHistoryEvents.
It needs the exact run ID (the latest run) and --yes. The call carries a
request ID (a random one unless --request-id is given, printed either way);
running the command again with the same --request-id and run ID is a retry: it
prints the run the first call made and continues nothing.`,
		Example: session.Examples([]string{
			`dexcli flow continue-as-new sub-7 --run-id 0190c3a2 --reason "trim history" --yes`,
		}),
		Args: session.Args(1, 1),
	}
	fs := cmd.Flags()
	run := fs.String("run-id", "", "the exact `RUN_ID` to continue (required; the latest run)")
	reason := fs.String("reason", "", "the `REASON`, recorded in the old run's close message")
	yes := fs.Bool("yes", false, "confirm the switch (required)")
	requestID := fs.String("request-id", "", "the call's request `ID`, to retry it safely (default: a random one)")
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, args []string) error {
		switch {
		case *run == "":
			return session.Usagef("flow continue-as-new needs the exact run: give --run-id")
		case !*yes:
			return session.Usagef("flow continue-as-new closes run %s and starts a new one; confirm with --yes", *run)
		}
		req := &dexpb.ContinueAsNewRequest{FlowId: args[0], RunId: *run, Reason: *reason, RequestId: *requestID}
		if req.RequestId == "" {
			req.RequestId = newRequestID()
		}
		var resp *dexpb.ContinueAsNewResponse
		err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			resp, err = c.ContinueAsNew(ctx, req)
			return err
		})
		if err != nil {
			return s.Fail(ctx, err, session.CallInfo{FlowID: req.FlowId, RunID: req.RunId,
				Hints: unknownHints("continue-as-new", req.RequestId)})
		}
		if s.Out.JSON {
			return s.Out.Document(output.Object{
				{"flowId", req.FlowId}, {"runId", req.RunId}, {"status", output.EnumText(resp.GetStatus())},
				{"newRunId", resp.GetNewRunId()}, {"requestId", req.RequestId},
			})
		}
		return output.KeyValues(s.Out.W, "Flow ID", req.FlowId, "Run ID", req.RunId,
			"Status", output.EnumText(resp.GetStatus()), "New run ID", resp.GetNewRunId(), "Request ID", req.RequestId)
	})
	return cmd
}
