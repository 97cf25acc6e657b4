package flowcmd

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/cli/output"
	"github.com/dexzd/dexzd/internal/cli/session"
)

// The long polls on a flow's progress (E35): wait-step and wait-attribute.

func flowWaitStepCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wait-step FLOW_ID STEP_TYPE",
		Short: "Wait until executions of a step type have finished",
		Long: `Waits until at least --count executions of STEP_TYPE have finished in the
run (completed, ended for a recovery step, or cancelled when the run closed),
polling again each time the server's long poll expires and through a restart
or failover, until --timeout passes (default: no bound). It prints the number
finished; it exits 1 when the run closed with fewer, or --timeout passed.`,
		Example: session.Examples([]string{
			"dexcli flow wait-step order-42 Ship",
			"dexcli flow wait-step batch-7 Item --count 100 --timeout 10m",
		}),
		Args: session.Args(2, 2),
	}
	fs := cmd.Flags()
	run := runFlag(fs)
	count := fs.Uint32("count", 1, "how many executions must have finished")
	cmd.RunE = env.Run(0, func(ctx context.Context, s *session.Session, args []string) error {
		flowID, step := args[0], args[1]
		stop := output.StartProgress(s.Stderr(), fmt.Sprintf("waiting for %d executions of %s in flow %s", *count, step, flowID))
		defer stop()
		var resp *dexpb.WaitForStepCompletionResponse
		ok, err := longPoll(ctx, s, func(ctx context.Context, c dexpb.FlowServiceClient, poll time.Duration) error {
			var err error
			resp, err = c.WaitForStepCompletion(ctx, &dexpb.WaitForStepCompletionRequest{FlowId: flowID, RunId: *run,
				StepType: step, Count: *count, Timeout: durationpb.New(poll)})
			return err
		})
		if err != nil {
			return s.Fail(ctx, err, session.CallInfo{FlowID: flowID, RunID: *run})
		}
		if !ok {
			return waitTimedOut(s, "wait-step", flowID, fmt.Sprintf("fewer than %d executions of %s finished", *count, step))
		}
		stop()
		if s.Out.JSON {
			return s.Out.Document(output.Object{{"flowId", flowID}, {"runId", resp.GetRunId()}, {"stepType", step}, {"finished", resp.GetFinished()}})
		}
		return output.KeyValues(s.Out.W, "Flow ID", flowID, "Run ID", resp.GetRunId(), "Step type", step,
			"Finished", strconv.FormatUint(uint64(resp.GetFinished()), 10))
	})
	return cmd
}

func flowWaitAttributeCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wait-attribute FLOW_ID NAME [JSON]",
		Short: "Wait until an attribute has a value, or a given one",
		Long: `Waits until the attribute NAME of the run has a value, or with JSON one equal
to it (the same JSON text, compacted; the type name is not compared), polling
again each time the server's long poll expires and through a restart or
failover, until --timeout passes (default: no bound). It prints the value; it
exits 1 when the run closed without meeting the condition, or --timeout passed.`,
		Example: session.Examples([]string{
			"dexcli flow wait-attribute order-42 status",
			`dexcli flow wait-attribute order-42 status '"shipped"' --timeout 5m`,
		}),
		Args: session.Args(2, 3),
	}
	run := runFlag(cmd.Flags())
	cmd.RunE = env.Run(0, func(ctx context.Context, s *session.Session, args []string) error {
		flowID, name := args[0], args[1]
		req := &dexpb.WaitForAttributeRequest{FlowId: flowID, RunId: *run, Name: name,
			Condition: &dexpb.WaitForAttributeRequest_Exists{Exists: true}}
		if len(args) == 3 {
			v, err := parseJSONArg(args[2])
			if err != nil {
				return session.Usagef("attribute value: %v", err)
			}
			req.Condition = &dexpb.WaitForAttributeRequest_Equals{Equals: jsonEncoded(v)}
		}
		stop := output.StartProgress(s.Stderr(), fmt.Sprintf("waiting for attribute %s of flow %s", name, flowID))
		defer stop()
		var resp *dexpb.WaitForAttributeResponse
		ok, err := longPoll(ctx, s, func(ctx context.Context, c dexpb.FlowServiceClient, poll time.Duration) error {
			var err error
			req.Timeout = durationpb.New(poll)
			resp, err = c.WaitForAttribute(ctx, req)
			return err
		})
		if err != nil {
			return s.Fail(ctx, err, session.CallInfo{FlowID: flowID, RunID: *run})
		}
		if !ok {
			return waitTimedOut(s, "wait-attribute", flowID, fmt.Sprintf("attribute %s does not meet the condition", name))
		}
		stop()
		if s.Out.JSON {
			return s.Out.Document(output.Object{{"flowId", flowID}, {"runId", resp.GetRunId()}, {"name", name}, {"value", output.JSONValue(resp.GetValue())}})
		}
		return output.KeyValues(s.Out.W, "Flow ID", flowID, "Run ID", resp.GetRunId(), "Attribute", name, "Value", output.ValueText(resp.GetValue()))
	})
	return cmd
}

// waitTimedOut is the failure of a long poll whose --timeout passed.
func waitTimedOut(s *session.Session, cmd, flowID, what string) error {
	return &session.Failure{
		Msg:       fmt.Sprintf("flow %s: DEADLINE_EXCEEDED: flow %q: %s within %s", cmd, flowID, what, s.Timeout),
		Code:      codes.DeadlineExceeded,
		ServerMsg: fmt.Sprintf("%s within %s", what, s.Timeout),
		Hint:      fmt.Sprintf("wait longer with a larger --timeout, or see \"dexcli flow state %s\"", output.ShellQuote(flowID)),
	}
}
