package flowcmd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/cli/output"
	"github.com/dexzd/dexzd/internal/cli/session"
)

// The commands that read flows: describe, state, history, list and wait.

func flowDescribeCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe FLOW_ID",
		Short: "Print a flow execution's type, status, times and error",
		Example: session.Examples([]string{
			"dexcli flow describe order-42",
			"dexcli flow describe order-42 --run 0190c3a2 -o json",
		}),
		Args: session.Args(1, 1),
	}
	fs := cmd.Flags()
	run := runFlag(fs)
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, args []string) error {
		req := &dexpb.GetFlowSummaryRequest{FlowId: args[0], RunId: *run}
		var resp *dexpb.GetFlowSummaryResponse
		err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			resp, err = c.GetFlowSummary(ctx, req)
			return err
		})
		if err != nil {
			return s.Fail(ctx, err, session.CallInfo{FlowID: req.FlowId, RunID: req.RunId})
		}
		if s.Out.JSON {
			return s.Out.Document(output.ProtoJSON(resp.GetSummary()))
		}
		if err := summaryText(s.Out.W, resp.GetSummary()); err != nil {
			return err
		}
		if resp.GetSummary().GetStatus() != dexpb.FlowStatus_FLOW_STATUS_RUNNING {
			return nil
		}
		// The children its waiting steps started (E31); the summary is
		// the answer, so a failed read of the state only omits them.
		var st *dexpb.GetFlowStateResponse
		err = s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			st, err = c.GetFlowState(ctx, &dexpb.GetFlowStateRequest{FlowId: req.FlowId, RunId: resp.GetSummary().GetRunId()})
			return err
		})
		if err != nil {
			return nil
		}
		return subFlowsText(s.Out.W, st.GetState())
	})
	return cmd
}

func flowStateCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state FLOW_ID",
		Short: "Print a flow execution's live state: steps, waits, failures, queues, attributes",
		Long: `Shows the active step executions with their phase, current attempt, Wait and
last failure (with the worker's stack), the queued channel messages, the
attributes, the outputs so far, and the tasks no worker has received yet.`,
		Example: session.Examples([]string{
			"dexcli flow state order-42",
			"dexcli flow state order-42 --max-messages 10 -o json",
		}),
		Args: session.Args(1, 1),
	}
	fs := cmd.Flags()
	run := runFlag(fs)
	maxMessages := fs.Uint("max-messages", 0, "show at most `N` queued messages per channel (default: the server's, 100)")
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, args []string) error {
		if *maxMessages > 1<<32-1 {
			return session.Usagef("--max-messages is too large")
		}
		req := &dexpb.GetFlowStateRequest{FlowId: args[0], RunId: *run, MaxMessagesPerChannel: uint32(*maxMessages)}
		var resp *dexpb.GetFlowStateResponse
		err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			resp, err = c.GetFlowState(ctx, req)
			return err
		})
		if err != nil {
			return s.Fail(ctx, err, session.CallInfo{FlowID: req.FlowId, RunID: req.RunId})
		}
		if s.Out.JSON {
			return s.Out.Document(output.ProtoJSON(resp.GetState()))
		}
		return stateText(s.Out.W, resp.GetState())
	})
	return cmd
}

func flowHistoryCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history FLOW_ID",
		Short: "Print a flow execution's history, oldest event first",
		Example: session.Examples([]string{
			"dexcli flow history order-42",
			"dexcli flow history order-42 --all -o json",
			"dexcli flow history order-42 --page-size 20 --page-token TOKEN",
		}),
		Args: session.Args(1, 1),
	}
	fs := cmd.Flags()
	run := runFlag(fs)
	pageSize := fs.Uint("page-size", 100, "the most events per page, `N` (at most 1000)")
	pageToken := fs.String("page-token", "", "continue from a previous page's `TOKEN`")
	all := fs.Bool("all", false, "read every page")
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, args []string) error {
		if *pageSize == 0 || *pageSize > 1000 {
			return session.Usagef("--page-size must be between 1 and 1000")
		}
		req := &dexpb.GetHistoryEventsRequest{FlowId: args[0], RunId: *run, PageSize: uint32(*pageSize), PageToken: *pageToken}
		var events []*dexpb.HistoryEvent
		runID, next := "", ""
		for {
			var resp *dexpb.GetHistoryEventsResponse
			err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
				var err error
				resp, err = c.GetHistoryEvents(ctx, req)
				return err
			})
			if err != nil {
				return s.Fail(ctx, err, session.CallInfo{FlowID: req.FlowId, RunID: req.RunId, Hints: map[codes.Code]string{
					codes.InvalidArgument: "the page token does not belong to this flow execution; start again without --page-token",
				}})
			}
			events = append(events, resp.GetEvents()...)
			runID, next = resp.GetRunId(), resp.GetNextPageToken()
			if !*all || next == "" {
				break
			}
			// Pin the run, so that a run started meanwhile does not
			// mix into the pages.
			req.RunId, req.PageToken = runID, next
		}
		if s.Out.JSON {
			out := make([]any, len(events))
			for i, e := range events {
				out[i] = output.ProtoJSON(e)
			}
			doc := output.Object{{"flowId", req.FlowId}, {"runId", runID}, {"events", out}}
			if next != "" {
				doc = doc.Add("nextPageToken", next)
			}
			return s.Out.Document(doc)
		}
		rows := make([][]string, len(events))
		for i, e := range events {
			kind, details := eventText(e)
			rows[i] = []string{strconv.FormatUint(e.GetEventId(), 10), output.TextTime(e.GetTime()), kind, details}
		}
		if err := output.Table(s.Out.W, []string{"ID", "TIME", "EVENT", "DETAILS"}, rows); err != nil {
			return err
		}
		if next != "" {
			fmt.Fprintf(s.Stderr(), "More events: add --all, or --page-token %s\n", next)
		}
		return nil
	})
	return cmd
}

func flowListCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List flow executions, newest start first",
		Example: session.Examples([]string{
			"dexcli flow list",
			"dexcli flow list --type order --status failed,canceled --since 24h",
			"dexcli flow list --from 2025-01-01T00:00:00Z --to 2025-01-02T00:00:00Z --limit 0 -o json",
		}),
		Args: session.Args(0, 0),
	}
	fs := cmd.Flags()
	flowType := fs.String("type", "", "only flows of this `FLOW_TYPE`")
	statuses := fs.String("status", "", "only flows with one of these `STATUS,...`: running, completed, failed, canceled, terminated")
	completeValues(cmd, "status", "running", "completed", "failed", "canceled", "terminated", "continued-as-new")
	since := fs.Duration("since", 0, "only flows started in the last `DURATION`")
	from := fs.String("from", "", "only flows started at or after `TIME` (RFC 3339, or a date)")
	to := fs.String("to", "", "only flows started before `TIME` (RFC 3339, or a date)")
	limit := fs.Int("limit", 50, "list at most `N` flows; 0 lists all")
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, _ []string) error {
		req := &dexpb.ListFlowsRequest{FlowType: *flowType}
		for _, name := range session.SplitList(*statuses) {
			st, err := parseStatus(name)
			if err != nil {
				return err
			}
			req.Statuses = append(req.Statuses, st)
		}
		switch {
		case *since < 0:
			return session.Usagef("--since must not be negative")
		case *since > 0 && *from != "":
			return session.Usagef("give --since or --from, not both")
		case *since > 0:
			req.StartTimeFrom = timestamppb.New(time.Now().Add(-*since))
		}
		var err error
		if req.StartTimeFrom == nil && *from != "" {
			if req.StartTimeFrom, err = parseTime("--from", *from); err != nil {
				return err
			}
		}
		if *to != "" {
			if req.StartTimeTo, err = parseTime("--to", *to); err != nil {
				return err
			}
		}
		if *limit < 0 {
			return session.Usagef("--limit must not be negative")
		}
		flows, more, err := listFlows(ctx, s, req, *limit)
		if err != nil {
			return err
		}
		if s.Out.JSON {
			out := make([]any, len(flows))
			for i, f := range flows {
				out[i] = output.ProtoJSON(f)
			}
			return s.Out.Document(output.Object{{"flows", out}, {"hasMore", more}})
		}
		rows := make([][]string, len(flows))
		for i, f := range flows {
			closed := "-"
			if f.GetCloseTime() != nil {
				closed = output.TextTime(f.GetCloseTime())
			}
			rows[i] = []string{f.GetFlowId(), f.GetRunId(), f.GetFlowType(), output.EnumText(f.GetStatus()), output.TextTime(f.GetStartTime()), closed}
		}
		if err := output.Table(s.Out.W, []string{"FLOW ID", "RUN ID", "TYPE", "STATUS", "STARTED", "CLOSED"}, rows); err != nil {
			return err
		}
		if more {
			fmt.Fprintf(s.Stderr(), "More flows match: raise --limit (0 lists all).\n")
		}
		return nil
	})
	return cmd
}

// listFlows reads pages until limit flows (0: all) and reports whether
// more match.
func listFlows(ctx context.Context, s *session.Session, req *dexpb.ListFlowsRequest, limit int) ([]*dexpb.FlowSummary, bool, error) {
	var flows []*dexpb.FlowSummary
	for {
		size := 1000
		if limit > 0 && limit-len(flows) < size {
			size = limit - len(flows)
		}
		req.PageSize = uint32(size)
		var resp *dexpb.ListFlowsResponse
		err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			resp, err = c.ListFlows(ctx, req)
			return err
		})
		if err != nil {
			return nil, false, s.Fail(ctx, err, session.CallInfo{})
		}
		flows = append(flows, resp.GetFlows()...)
		if limit > 0 && len(flows) > limit {
			return flows[:limit], true, nil
		}
		if resp.GetNextPageToken() == "" {
			return flows, false, nil
		}
		if limit > 0 && len(flows) == limit {
			return flows, true, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

// parseStatus parses a flow status name ("failed", "FAILED",
// "FLOW_STATUS_FAILED"; "cancelled" too).
func parseStatus(name string) (dexpb.FlowStatus, error) {
	n := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(name), "-", "_"))
	n = strings.TrimPrefix(n, "FLOW_STATUS_")
	if n == "CANCELLED" {
		n = "CANCELED"
	}
	v, ok := dexpb.FlowStatus_value["FLOW_STATUS_"+n]
	if !ok || v == 0 {
		return 0, session.Usagef("unknown status %q: use running, completed, failed, canceled, terminated or continued-as-new", name)
	}
	return dexpb.FlowStatus(v), nil
}

// parseTime parses an RFC 3339 time or a date (midnight UTC).
func parseTime(flagName, v string) (*timestamppb.Timestamp, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return timestamppb.New(t), nil
		}
	}
	return nil, session.Usagef("%s: %q is not an RFC 3339 time (2025-01-02T15:04:05Z) or a date (2025-01-02)", flagName, v)
}

// Long polls of flow wait: the server caps one at 60 s by default and then
// answers DEADLINE_EXCEEDED; the client's deadline leaves it some slack.
const (
	waitPoll      = 60 * time.Second
	waitPollSlack = 10 * time.Second
)

func flowWaitCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wait FLOW_ID",
		Short: "Wait until a flow execution closes and print its result",
		Long: `Waits for the run that is the latest when the command starts (or --run),
polling again each time the server's long poll expires, until the run closes or
--timeout passes (default: no bound; Ctrl-C stops). It keeps waiting through a
server restart or failover, saying so once on stderr. A failed, cancelled or
terminated flow is a result, not an error: the command exits 0 and prints the
status and error; it exits 1 when --timeout passes first.`,
		Example: session.Examples([]string{
			"dexcli flow wait order-42",
			"dexcli flow wait order-42 --timeout 10m -o json",
		}),
		Args: session.Args(1, 1),
	}
	fs := cmd.Flags()
	run := runFlag(fs)
	cmd.RunE = env.Run(0, func(ctx context.Context, s *session.Session, args []string) error {
		return flowWait(ctx, s, args[0], *run)
	})
	return cmd
}

// The backoff of flow wait while no address of --server serves.
const (
	waitRetryMin = 200 * time.Millisecond
	waitRetryMax = 2 * time.Second
)

func flowWait(ctx context.Context, s *session.Session, flowID, runID string) error {
	info := session.CallInfo{FlowID: flowID, RunID: runID}
	if runID == "" {
		var resp *dexpb.GetFlowSummaryResponse
		err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			resp, err = c.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: flowID})
			return err
		})
		if err != nil {
			return s.Fail(ctx, err, info)
		}
		runID = resp.GetSummary().GetRunId()
	}
	stop := output.StartProgress(s.Stderr(), fmt.Sprintf("waiting for flow %s (run %s)", flowID, runID))
	defer stop()
	var resp *dexpb.WaitForFlowResponse
	ok, err := longPoll(ctx, s, func(ctx context.Context, c dexpb.FlowServiceClient, poll time.Duration) error {
		var err error
		resp, err = c.WaitForFlow(ctx, &dexpb.WaitForFlowRequest{FlowId: flowID, RunId: runID, Timeout: durationpb.New(poll)})
		return err
	})
	switch {
	case err != nil:
		return s.Fail(ctx, err, info)
	case ok:
		stop()
		if s.Out.JSON {
			return s.Out.Document(output.ProtoJSON(resp.GetResult()))
		}
		return resultText(s.Out.W, resp.GetResult())
	}
	return &session.Failure{
		Msg:       fmt.Sprintf("flow wait: DEADLINE_EXCEEDED: flow %q (run %s) did not close within %s", flowID, runID, s.Timeout),
		Code:      codes.DeadlineExceeded,
		ServerMsg: fmt.Sprintf("flow did not close within %s", s.Timeout),
		Hint:      fmt.Sprintf("it is still running; wait longer with a larger --timeout, or see \"dexcli flow state %s\"", output.ShellQuote(flowID)),
	}
}

// longPoll sends a long poll (poll, with the poll's timeout) until it
// answers, polling again each time the server's long poll expires and
// through restarts and failovers (saying so once per outage on stderr),
// until ctx ends. ok is false when ctx's deadline passed first; err is the
// call's error otherwise.
func longPoll(ctx context.Context, s *session.Session, poll func(ctx context.Context, c dexpb.FlowServiceClient, poll time.Duration) error) (ok bool, err error) {
	outage := time.Duration(0) // the backoff while no address serves; 0 while one does
	for {
		d := waitPoll
		if dl, ok := ctx.Deadline(); ok {
			d = min(d, time.Until(dl))
		}
		if d < time.Millisecond {
			return false, nil
		}
		pctx, cancel := context.WithTimeout(ctx, d+waitPollSlack)
		err := s.Flow(pctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			return poll(ctx, c, d)
		})
		cancel()
		if err == nil {
			return true, nil
		}
		if status.Code(err) == codes.Unavailable && ctx.Err() == nil {
			// Every address is down or not serving: a restart or a
			// failover. Keep waiting until --timeout, saying so once per
			// outage.
			if outage == 0 {
				fmt.Fprintf(s.Stderr(), "dexcli: server restarting or failing over (%s), still waiting\n", status.Convert(err).Message())
			}
			outage = min(max(2*outage, waitRetryMin), waitRetryMax)
			t := time.NewTimer(outage)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			continue
		}
		if status.Code(err) != codes.DeadlineExceeded || ctx.Err() != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return false, nil
			}
			return false, err
		}
		outage = 0
	}
}
