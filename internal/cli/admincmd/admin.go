package admincmd

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/cli/output"
	"github.com/dexzd/dexzd/internal/cli/session"
)

// New returns "dexcli admin": describe and step down a node (A10-A14).
func New(env *session.Env) *cobra.Command {
	g := &cobra.Command{Use: "admin", Short: "Operate a Dex-ZD node: describe its active process, or step it down."}
	g.AddCommand(adminDescribeCmd(env), adminStepDownCmd(env))
	return g
}

func adminDescribeCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Print the node ID, node epoch and holder process ID of the active process",
		Long: `Describe changes nothing. Every lease acquisition raises the node epoch, so a
different epoch or holder process ID than before means another process took
over, or the same one took the lease back. Node epochs are decimal strings.`,
		Example: session.Examples([]string{
			"dexcli --server dex.example.internal:8801 admin describe --credential-file /run/secrets/dex/admin-token",
			"dexcli admin describe -o json",
		}),
		Args: session.Args(0, 0),
	}

	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, _ []string) error {
		d, _, err := describe(ctx, s)
		if err != nil {
			return s.Fail(ctx, err, describeHints())
		}
		if s.Out.JSON {
			return s.Out.Document(output.Object{
				{"nodeId", d.GetNodeId()},
				{"nodeEpoch", strconv.FormatUint(d.GetNodeEpoch(), 10)},
				{"holderProcessId", d.GetHolderProcessId()},
			})
		}
		return output.KeyValues(s.Out.W,
			"Node ID", d.GetNodeId(),
			"Node epoch", strconv.FormatUint(d.GetNodeEpoch(), 10),
			"Holder process ID", d.GetHolderProcessId())
	})
	return cmd
}

func describeHints() session.CallInfo {
	return session.CallInfo{Hints: map[codes.Code]string{
		codes.FailedPrecondition: "a step down or its hold-off is in progress; wait past the hold-off (standby.stepDownHoldOff) and describe again",
	}}
}

// describe asks the addresses in turn for the active process's identity
// and returns it with the index of the address that answered.
func describe(ctx context.Context, s *session.Session) (*dexpb.DescribeResponse, int, error) {
	var d *dexpb.DescribeResponse
	i, _, err := s.Call(ctx, session.OnUnavailable, 0, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		d, err = dexpb.NewAdminServiceClient(cc).Describe(ctx, &dexpb.DescribeRequest{})
		return err
	})
	return d, i, err
}

func adminStepDownCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "step-down",
		Short: "Make the active process give up its lease to another process",
		Long: `The active process stops handing out tasks, drains running attempts, releases
the lease and waits its hold-off; if no other process took over by then it takes
the lease back. The command waits up to 2m unless --timeout is set: raise
--timeout by as much as you raised lifecycle.attemptDrainTimeout above 30s.

Every step down expects a node ID and node epoch; a process that does not hold
them answers FAILED_PRECONDITION and changes nothing.
  no --expected-* flags        describe first, expect what it returns
  --expected-node-id alone     describe first, refuse if the node ID differs
  both --expected-* flags      send them as given, without describing
  --expected-node-epoch alone  usage error
If the first describe fails, nothing is stepped down.

A step down that fails with DEADLINE_EXCEEDED, CANCELLED or UNAVAILABLE has an
unknown outcome: retry only with the expectedNodeId and expectedNodeEpoch it
prints, never with an epoch that describe prints afterwards.`,
		Example: session.Examples([]string{
			"dexcli --server dex.example.internal:8801 admin step-down --yes --credential-file /run/secrets/dex/admin-token",
			"dexcli admin step-down --yes --expected-node-id node-a",
			"dexcli admin step-down --yes --expected-node-id node-a --expected-node-epoch 7",
		}),
		Args: session.Args(0, 0),
	}
	fs := cmd.Flags()
	o := &stepDownOptions{}
	fs.BoolVar(&o.yes, "yes", false, "confirm the step down (required)")
	fs.StringVar(&o.nodeID, "expected-node-id", "", "step down only if the node has this `ID`")
	fs.Var(&o.epoch, "expected-node-epoch", "step down only the process holding this `EPOCH` (needs --expected-node-id)")
	cmd.RunE = env.Run(session.DefaultStepDownTimeout, func(ctx context.Context, s *session.Session, _ []string) error {
		o.nodeIDSet = fs.Changed("expected-node-id")
		return stepDown(ctx, s, o)
	})
	return cmd
}

type stepDownOptions struct {
	yes       bool
	nodeID    string
	nodeIDSet bool
	epoch     session.OptUint
}

// stepDown applies the flag rules of A11, sends the step down and prints
// its outcome (A12) or, when the outcome is unknown, how to retry (A13).
func stepDown(ctx context.Context, s *session.Session, o *stepDownOptions) error {
	switch {
	case !o.yes:
		return session.Usagef("admin step-down hands the node to another process; confirm with --yes")
	case o.epoch.Given && !o.nodeIDSet:
		return session.Usagef("--expected-node-epoch needs --expected-node-id")
	case o.nodeIDSet && strings.TrimSpace(o.nodeID) == "":
		return session.Usagef("--expected-node-id is empty")
	case o.epoch.Given && o.epoch.V == 0:
		return session.Usagef("--expected-node-epoch must be at least 1")
	}
	req := &dexpb.StepDownRequest{ExpectedNodeId: o.nodeID, ExpectedNodeEpoch: o.epoch.V}
	first := 0
	if !o.epoch.Given {
		d, i, err := describe(ctx, s)
		if err != nil {
			f := s.Failure(ctx, err, describeHints())
			f.Msg = "admin step-down: describe before the step down failed: " + output.CodeName(f.Code) + ": " + f.ServerMsg
			f.Hint = "nothing was stepped down; " + f.Hint
			return f
		}
		if o.nodeIDSet && d.GetNodeId() != o.nodeID {
			return &session.Failure{
				Msg:  fmt.Sprintf("admin step-down: the server reports node ID %q, not %q; nothing was stepped down", d.GetNodeId(), o.nodeID),
				Hint: fmt.Sprintf("check --server (%s): it reaches another node than the one you meant", s.ServerList()),
			}
		}
		req.ExpectedNodeId, req.ExpectedNodeEpoch, first = d.GetNodeId(), d.GetNodeEpoch(), i
	}

	stop := output.StartProgress(s.Stderr(), fmt.Sprintf("stepping down node %s at epoch %d", req.ExpectedNodeId, req.ExpectedNodeEpoch))
	var resp *dexpb.StepDownResponse
	_, tried, err := s.Call(ctx, session.OnRefused, first, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = dexpb.NewAdminServiceClient(cc).StepDown(ctx, req)
		return err
	})
	stop()
	if err != nil {
		return stepDownFailed(ctx, s, req, tried, err)
	}
	return printStepDown(s, req, resp)
}

func printStepDown(s *session.Session, req *dexpb.StepDownRequest, r *dexpb.StepDownResponse) error {
	holder := "unknown"
	switch r.GetLeaseHolderAfterStepDown() {
	case dexpb.LeaseHolderAfterStepDown_LEASE_HOLDER_AFTER_STEP_DOWN_TAKEN_OVER_BY_ANOTHER_PROCESS,
		dexpb.LeaseHolderAfterStepDown_LEASE_HOLDER_AFTER_STEP_DOWN_TAKEN_BACK_BY_THIS_PROCESS:
		holder = output.LowerCamel(output.EnumText(r.GetLeaseHolderAfterStepDown()))
	}
	o := output.Object{
		{"expectedNodeId", req.GetExpectedNodeId()},
		{"expectedNodeEpoch", strconv.FormatUint(req.GetExpectedNodeEpoch(), 10)},
		{"nodeId", r.GetNodeId()},
		{"releasedNodeEpoch", strconv.FormatUint(r.GetReleasedNodeEpoch(), 10)},
	}
	holdOff := "-"
	if r.GetLeaseReacquisitionHoldOff() != nil {
		o = o.Add("leaseReacquisitionHoldOff", output.DurationJSON(r.GetLeaseReacquisitionHoldOff()))
		holdOff = output.TextDuration(r.GetLeaseReacquisitionHoldOff())
	}
	o = o.Add("leaseHolderAfterStepDown", holder)
	if holder == "unknown" {
		o = o.Add("leaseHolderUnknownDetail", r.GetLeaseHolderUnknownDetail())
	}
	if r.ActiveNodeEpoch != nil {
		o = o.Add("activeNodeEpoch", strconv.FormatUint(r.GetActiveNodeEpoch(), 10))
	}
	if r.GetActiveHolderProcessId() != "" {
		o = o.Add("activeHolderProcessId", r.GetActiveHolderProcessId())
	}
	if s.Out.JSON {
		return s.Out.Document(o)
	}
	var kv []string
	for _, f := range o {
		v, _ := f.Value.(string)
		if f.Key == "leaseReacquisitionHoldOff" {
			v = holdOff
		}
		kv = append(kv, f.Key, output.OrDash(v))
	}
	return output.KeyValues(s.Out.W, kv...)
}

// stepDownFailed explains a failed step down. DEADLINE_EXCEEDED, CANCELLED
// and UNAVAILABLE leave the outcome unknown (A13): the error then carries
// the expectations the call used and the command line that retries with
// exactly them.
func stepDownFailed(ctx context.Context, s *session.Session, req *dexpb.StepDownRequest, tried []session.Attempt, err error) error {
	info := session.CallInfo{Hints: map[codes.Code]string{
		codes.FailedPrecondition: fmt.Sprintf("nothing changed: no process at %s holds node %q at epoch %d (it is a standby, or was stepped down or took over already, or a step down is in progress); run \"dexcli admin describe\"",
			s.ServerList(), req.GetExpectedNodeId(), req.GetExpectedNodeEpoch()),
		codes.Internal: "the lease was released but the outcome stayed unknown; the process exits and restarts without the lease, and another process may take over. Run \"dexcli admin describe\" in a minute",
	}}
	if len(tried) > 1 {
		var b strings.Builder
		b.WriteString("Addresses tried:\n")
		for _, t := range tried {
			st := status.Convert(t.Err)
			fmt.Fprintf(&b, "  %s: %s: %s\n", t.Addr, output.CodeName(st.Code()), st.Message())
		}
		info.Detail = b.String()
	}
	f := s.Failure(ctx, err, info)
	switch f.Code {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable:
	default:
		return f
	}
	epoch := strconv.FormatUint(req.GetExpectedNodeEpoch(), 10)
	retry := stepDownRetryLine(s, req)
	f.Hint = "The outcome of the step down is unknown: it may or may not have happened."
	f.Detail += fmt.Sprintf(`The step down expected:
  expectedNodeId     %s
  expectedNodeEpoch  %s
To retry, use exactly these values:
  %s
Never retry with a node epoch that "dexcli admin describe" prints now: describe
shows whichever process is active by then, and stepping that one down would
cause another switchover. A retry with the values above changes nothing
(FAILED_PRECONDITION) if the step down already happened. Do not retry without
--expected-node-id and --expected-node-epoch either: that describes and steps
down whichever process is active now. "dexcli admin describe" can tell you what
happened: a different node epoch or holder process ID means the step down, or
another takeover, already happened, so do not retry.
`, req.GetExpectedNodeId(), epoch, retry)
	f.Fields = output.Object{
		{"outcome", "unknown"},
		{"expectedNodeId", req.GetExpectedNodeId()},
		{"expectedNodeEpoch", epoch},
		{"retryCommand", retry},
	}
	return f
}

// stepDownRetryLine is the command line that retries a step down with
// exactly the expectations req used.
func stepDownRetryLine(s *session.Session, req *dexpb.StepDownRequest) string {
	parts := []string{
		"dexcli", "--server", output.ShellQuote(s.ServerList()), "admin", "step-down", "--yes",
		"--expected-node-id", output.ShellQuote(req.GetExpectedNodeId()),
		"--expected-node-epoch", strconv.FormatUint(req.GetExpectedNodeEpoch(), 10),
	}
	if s.Opts.CredentialFile != "" {
		parts = append(parts, "--credential-file", output.ShellQuote(s.Opts.CredentialFile))
	}
	parts = append(parts, s.Opts.Security.Args()...)
	if s.TimeoutSet {
		parts = append(parts, "--timeout", s.Timeout.String())
	}
	return strings.Join(parts, " ")
}
