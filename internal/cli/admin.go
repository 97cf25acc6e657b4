package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
)

// adminGroup is "dexcli admin": describe and step down a node (A10-A14).
func adminGroup() *group {
	return &group{
		name:     "admin",
		summary:  "Operate a Dex-ZD node: describe its active process, or step it down.",
		commands: []*command{adminDescribeCmd(), adminStepDownCmd()},
	}
}

func adminDescribeCmd() *command {
	return &command{
		name:    "describe",
		summary: "Print the node ID, node epoch and holder process ID of the active process",
		details: `Describe changes nothing. Every lease acquisition raises the node epoch, so a
different epoch or holder process ID than before means another process took
over, or the same one took the lease back. Node epochs are decimal strings.`,
		examples: []string{
			"dexcli --server dex.example.internal:8801 admin describe --credential-file /run/secrets/dex/admin-token",
			"dexcli admin describe -o json",
		},
		defaultTimeout: defaultCallTimeout,
		setup: func(*flag.FlagSet) runFunc {
			return func(ctx context.Context, s *session, _ []string) error {
				d, _, err := s.describe(ctx)
				if err != nil {
					return s.fail(ctx, err, describeHints())
				}
				if s.out.json {
					return s.out.document(jsonObject{
						{"nodeId", d.GetNodeId()},
						{"nodeEpoch", strconv.FormatUint(d.GetNodeEpoch(), 10)},
						{"holderProcessId", d.GetHolderProcessId()},
					})
				}
				return keyValues(s.out.w,
					"Node ID", d.GetNodeId(),
					"Node epoch", strconv.FormatUint(d.GetNodeEpoch(), 10),
					"Holder process ID", d.GetHolderProcessId())
			}
		},
	}
}

func describeHints() callInfo {
	return callInfo{hints: map[codes.Code]string{
		codes.FailedPrecondition: "a step down or its hold-off is in progress; wait past the hold-off (standby.stepDownHoldOff) and describe again",
	}}
}

// describe asks the addresses in turn for the active process's identity
// and returns it with the index of the address that answered.
func (s *session) describe(ctx context.Context) (*dexpb.DescribeResponse, int, error) {
	var d *dexpb.DescribeResponse
	i, _, err := s.conns.call(ctx, onUnavailable, 0, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		d, err = dexpb.NewAdminServiceClient(cc).Describe(ctx, &dexpb.DescribeRequest{})
		return err
	})
	return d, i, err
}

func adminStepDownCmd() *command {
	return &command{
		name:    "step-down",
		summary: "Make the active process give up its lease to another process",
		details: `The active process stops handing out tasks, drains running attempts, releases
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
		examples: []string{
			"dexcli --server dex.example.internal:8801 admin step-down --yes --credential-file /run/secrets/dex/admin-token",
			"dexcli admin step-down --yes --expected-node-id node-a",
			"dexcli admin step-down --yes --expected-node-id node-a --expected-node-epoch 7",
		},
		defaultTimeout: defaultStepDownTimeout,
		setup: func(fs *flag.FlagSet) runFunc {
			o := &stepDownOptions{}
			fs.BoolVar(&o.yes, "yes", false, "confirm the step down (required)")
			fs.StringVar(&o.nodeID, "expected-node-id", "", "step down only if the node has this `ID`")
			fs.Var(&o.epoch, "expected-node-epoch", "step down only the process holding this `EPOCH` (needs --expected-node-id)")
			return func(ctx context.Context, s *session, _ []string) error {
				fs.Visit(func(f *flag.Flag) { o.nodeIDSet = o.nodeIDSet || f.Name == "expected-node-id" })
				return s.stepDown(ctx, o)
			}
		},
	}
}

type stepDownOptions struct {
	yes       bool
	nodeID    string
	nodeIDSet bool
	epoch     optUint
}

// stepDown applies the flag rules of A11, sends the step down and prints
// its outcome (A12) or, when the outcome is unknown, how to retry (A13).
func (s *session) stepDown(ctx context.Context, o *stepDownOptions) error {
	switch {
	case !o.yes:
		return usagef("admin step-down hands the node to another process; confirm with --yes")
	case o.epoch.set && !o.nodeIDSet:
		return usagef("--expected-node-epoch needs --expected-node-id")
	case o.nodeIDSet && strings.TrimSpace(o.nodeID) == "":
		return usagef("--expected-node-id is empty")
	case o.epoch.set && o.epoch.v == 0:
		return usagef("--expected-node-epoch must be at least 1")
	}
	req := &dexpb.StepDownRequest{ExpectedNodeId: o.nodeID, ExpectedNodeEpoch: o.epoch.v}
	first := 0
	if !o.epoch.set {
		d, i, err := s.describe(ctx)
		if err != nil {
			f := s.failure(ctx, err, describeHints())
			f.msg = "admin step-down: describe before the step down failed: " + codeName(f.code) + ": " + f.serverMsg
			f.hint = "nothing was stepped down; " + f.hint
			return f
		}
		if o.nodeIDSet && d.GetNodeId() != o.nodeID {
			return &failure{
				msg:  fmt.Sprintf("admin step-down: the server reports node ID %q, not %q; nothing was stepped down", d.GetNodeId(), o.nodeID),
				hint: fmt.Sprintf("check --server (%s): it reaches another node than the one you meant", s.serverList()),
			}
		}
		req.ExpectedNodeId, req.ExpectedNodeEpoch, first = d.GetNodeId(), d.GetNodeEpoch(), i
	}

	stop := startProgress(s.stderr(), fmt.Sprintf("stepping down node %s at epoch %d", req.ExpectedNodeId, req.ExpectedNodeEpoch))
	var resp *dexpb.StepDownResponse
	_, tried, err := s.conns.call(ctx, onRefused, first, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = dexpb.NewAdminServiceClient(cc).StepDown(ctx, req)
		return err
	})
	stop()
	if err != nil {
		return s.stepDownFailed(ctx, req, tried, err)
	}
	return s.printStepDown(req, resp)
}

func (s *session) printStepDown(req *dexpb.StepDownRequest, r *dexpb.StepDownResponse) error {
	holder := "unknown"
	switch r.GetLeaseHolderAfterStepDown() {
	case dexpb.LeaseHolderAfterStepDown_LEASE_HOLDER_AFTER_STEP_DOWN_TAKEN_OVER_BY_ANOTHER_PROCESS,
		dexpb.LeaseHolderAfterStepDown_LEASE_HOLDER_AFTER_STEP_DOWN_TAKEN_BACK_BY_THIS_PROCESS:
		holder = lowerCamel(enumText(r.GetLeaseHolderAfterStepDown()))
	}
	o := jsonObject{
		{"expectedNodeId", req.GetExpectedNodeId()},
		{"expectedNodeEpoch", strconv.FormatUint(req.GetExpectedNodeEpoch(), 10)},
		{"nodeId", r.GetNodeId()},
		{"releasedNodeEpoch", strconv.FormatUint(r.GetReleasedNodeEpoch(), 10)},
	}
	holdOff := "-"
	if r.GetLeaseReacquisitionHoldOff() != nil {
		o = o.add("leaseReacquisitionHoldOff", durationJSON(r.GetLeaseReacquisitionHoldOff()))
		holdOff = textDuration(r.GetLeaseReacquisitionHoldOff())
	}
	o = o.add("leaseHolderAfterStepDown", holder)
	if holder == "unknown" {
		o = o.add("leaseHolderUnknownDetail", r.GetLeaseHolderUnknownDetail())
	}
	if r.ActiveNodeEpoch != nil {
		o = o.add("activeNodeEpoch", strconv.FormatUint(r.GetActiveNodeEpoch(), 10))
	}
	if r.GetActiveHolderProcessId() != "" {
		o = o.add("activeHolderProcessId", r.GetActiveHolderProcessId())
	}
	if s.out.json {
		return s.out.document(o)
	}
	var kv []string
	for _, f := range o {
		v, _ := f.value.(string)
		if f.key == "leaseReacquisitionHoldOff" {
			v = holdOff
		}
		kv = append(kv, f.key, orDash(v))
	}
	return keyValues(s.out.w, kv...)
}

// stepDownFailed explains a failed step down. DEADLINE_EXCEEDED, CANCELLED
// and UNAVAILABLE leave the outcome unknown (A13): the error then carries
// the expectations the call used and the command line that retries with
// exactly them.
func (s *session) stepDownFailed(ctx context.Context, req *dexpb.StepDownRequest, tried []attempt, err error) error {
	info := callInfo{hints: map[codes.Code]string{
		codes.FailedPrecondition: fmt.Sprintf("nothing changed: no process at %s holds node %q at epoch %d (it is a standby, or was stepped down or took over already, or a step down is in progress); run \"dexcli admin describe\"",
			s.serverList(), req.GetExpectedNodeId(), req.GetExpectedNodeEpoch()),
		codes.Internal: "the lease was released but the outcome stayed unknown; the process exits and restarts without the lease, and another process may take over. Run \"dexcli admin describe\" in a minute",
	}}
	if len(tried) > 1 {
		var b strings.Builder
		b.WriteString("Addresses tried:\n")
		for _, t := range tried {
			st := status.Convert(t.err)
			fmt.Fprintf(&b, "  %s: %s: %s\n", t.addr, codeName(st.Code()), st.Message())
		}
		info.detail = b.String()
	}
	f := s.failure(ctx, err, info)
	switch f.code {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable:
	default:
		return f
	}
	epoch := strconv.FormatUint(req.GetExpectedNodeEpoch(), 10)
	retry := s.stepDownRetryLine(req)
	f.hint = "The outcome of the step down is unknown: it may or may not have happened."
	f.detail += fmt.Sprintf(`The step down expected:
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
	f.fields = jsonObject{
		{"outcome", "unknown"},
		{"expectedNodeId", req.GetExpectedNodeId()},
		{"expectedNodeEpoch", epoch},
		{"retryCommand", retry},
	}
	return f
}

// stepDownRetryLine is the command line that retries a step down with
// exactly the expectations req used.
func (s *session) stepDownRetryLine(req *dexpb.StepDownRequest) string {
	parts := []string{
		"dexcli", "--server", shellQuote(s.serverList()), "admin", "step-down", "--yes",
		"--expected-node-id", shellQuote(req.GetExpectedNodeId()),
		"--expected-node-epoch", strconv.FormatUint(req.GetExpectedNodeEpoch(), 10),
	}
	if s.opts.credentialFile != "" {
		parts = append(parts, "--credential-file", shellQuote(s.opts.credentialFile))
	}
	if s.timeoutSet {
		parts = append(parts, "--timeout", s.timeout.String())
	}
	return strings.Join(parts, " ")
}
