package flowcmd

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/cli/output"
	"github.com/dexzd/dexzd/internal/cli/session"
)

func flowSearchCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search flow executions by built-in fields and indexed attributes",
		Long: "Search flow executions (every run) with a query on their built-in fields (FlowId, RunId, FlowType,\n" +
			"Status, StartTime, CloseTime, ActiveStepTypes, ParentFlowId) and indexed attributes: comparisons\n" +
			"(= != < <= > >=), IN (...), BETWEEN, STARTS_WITH, AND, OR, NOT, parentheses and one ORDER BY.\n" +
			"Strings and times are quoted ('charged', '2026-11-01T00:00:00Z'). See docs/search.md.",
		Example: session.Examples([]string{
			`dexcli flow search "OrderStatus = 'charged'"`,
			`dexcli flow search "FlowType = 'order' AND OrderStatus = 'charged' AND StartTime > '2026-11-01T00:00:00Z' ORDER BY StartTime DESC"`,
			`dexcli flow search "amount >= 100 ORDER BY amount DESC" --limit 0 -o json`,
		}),
		Args: session.Args(1, 1),
	}
	fs := cmd.Flags()
	limit := fs.Int("limit", 50, "show at most `N` flows; 0 shows all")
	pageToken := fs.String("page-token", "", "continue from the `TOKEN` an earlier search printed")
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, args []string) error {
		if *limit < 0 {
			return session.Usagef("--limit must not be negative")
		}
		req := &dexpb.SearchFlowsRequest{Query: args[0], PageToken: *pageToken}
		flows, next, err := searchFlows(ctx, s, req, *limit)
		if err != nil {
			return err
		}
		if s.Out.JSON {
			out := make([]any, len(flows))
			for i, f := range flows {
				out[i] = output.ProtoJSON(f)
			}
			return s.Out.Document(output.Object{{"flows", out}, {"nextPageToken", next}})
		}
		rows := make([][]string, len(flows))
		for i, f := range flows {
			sum := f.GetSummary()
			closed := "-"
			if sum.GetCloseTime() != nil {
				closed = output.TextTime(sum.GetCloseTime())
			}
			rows[i] = []string{sum.GetFlowId(), sum.GetRunId(), sum.GetFlowType(), output.EnumText(sum.GetStatus()),
				output.TextTime(sum.GetStartTime()), closed, indexedText(f.GetIndexedValues())}
		}
		if err := output.Table(s.Out.W, []string{"FLOW ID", "RUN ID", "TYPE", "STATUS", "STARTED", "CLOSED", "INDEXED"}, rows); err != nil {
			return err
		}
		if next != "" {
			fmt.Fprintf(s.Stderr(), "More flows match: raise --limit (0 shows all), or add --page-token %s\n", next)
		}
		return nil
	})
	return cmd
}

// indexedText renders indexed values as key=json, sorted by key.
func indexedText(vals []*dexpb.IndexedValue) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = v.GetKey() + "=" + string(v.GetJson())
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// searchFlows reads pages until limit flows (0: all) and returns the token
// that continues after the last one shown ("" when none is left).
func searchFlows(ctx context.Context, s *session.Session, req *dexpb.SearchFlowsRequest, limit int) ([]*dexpb.SearchedFlow, string, error) {
	var flows []*dexpb.SearchedFlow
	for {
		size := 1000
		if limit > 0 && limit-len(flows) < size {
			size = limit - len(flows)
		}
		req.PageSize = uint32(size) //nolint:gosec // at most 1000
		var resp *dexpb.SearchFlowsResponse
		err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			resp, err = c.SearchFlows(ctx, req)
			return err
		})
		if err != nil {
			return nil, "", s.Fail(ctx, err, session.CallInfo{})
		}
		flows = append(flows, resp.GetFlows()...)
		next := resp.GetNextPageToken()
		if next == "" || (limit > 0 && len(flows) >= limit) {
			return flows, next, nil
		}
		req.PageToken = next
	}
}
