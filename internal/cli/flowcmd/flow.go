package flowcmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/cli/output"
	"github.com/dexzd/dexzd/internal/cli/session"
)

// New returns "dexcli flow": the FlowService calls. This file holds the
// commands that change a flow; read.go holds the ones that read.
func New(env *session.Env) *cobra.Command {
	g := &cobra.Command{Use: "flow", Short: "Start, inspect and drive flow executions."}
	g.AddCommand(
		flowStartCmd(env), flowStopCmd(env), flowDescribeCmd(env), flowStateCmd(env),
		flowHistoryCmd(env), flowListCmd(env), flowPublishCmd(env), flowWaitCmd(env),
		flowRPCCmd(env), flowSkipTimerCmd(env), flowGetAttrsCmd(env), flowSetAttrsCmd(env), flowSearchCmd(env),
		flowWaitStepCmd(env), flowWaitAttributeCmd(env), flowResetCmd(env),
	)
	return g
}

// runFlag registers --run, which every command naming a flow takes.
func runFlag(fs *pflag.FlagSet) *string {
	return fs.String("run", "", "the run `RUN_ID` (default: the latest run of the flow ID)")
}

// completeValues makes shell completion offer values for cmd's flag name.
func completeValues(cmd *cobra.Command, name string, values ...cobra.Completion) {
	_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
}

// jsonEncoded is a JSON value as the API carries it.
func jsonEncoded(b []byte) *dexpb.EncodedValue {
	return &dexpb.EncodedValue{Encoding: "json", Data: b}
}

// newRequestID returns a random request ID.
func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

type startOptions struct {
	step, input, inputFile string
	attrs                  namedJSONList
	timeoutAfter           time.Duration
	timeoutPolicy          string
	idReuse                string
	requestID              string
	flowOptions            // E34, flowopts.go
}

var idReusePolicies = map[string]dexpb.IdReusePolicy{
	"default":                  dexpb.IdReusePolicy_ID_REUSE_POLICY_UNSPECIFIED,
	"disallow":                 dexpb.IdReusePolicy_ID_REUSE_POLICY_DISALLOW,
	"allow-if-not-running":     dexpb.IdReusePolicy_ID_REUSE_POLICY_ALLOW_IF_NOT_RUNNING,
	"allow-if-previous-failed": dexpb.IdReusePolicy_ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_FAILED,
	"terminate-if-running":     dexpb.IdReusePolicy_ID_REUSE_POLICY_TERMINATE_IF_RUNNING,
}

func flowStartCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "start FLOW_TYPE FLOW_ID",
		Short: "Start a flow execution and print its run ID",
		Long: `The start is durable when the command prints the run ID. A start carries a
request ID (a random one unless --request-id is given, printed either way);
running the command again with the same --request-id is a retry of that start:
it returns the same run ID ("already started") and starts nothing.`,
		Example: session.Examples([]string{
			`dexcli flow start order order-42 --input '{"id":"42","cents":1200}'`,
			`dexcli flow start order order-42 --step Reserve --input '{"id":"42","cents":1200}'`,
			`dexcli flow start order order-42 --step Reserve --input-file order.json --attr 'status="new"' --timeout-after 24h --timeout-policy cancel`,
			`dexcli flow start order order-42 --id-reuse terminate-if-running --request-id 7f3c`,
			`dexcli flow start order order-42 --start-delay 1h --retry-max-attempts 3 --timeout-after 24h --timeout-handler Escalate`,
		}),
		Args: session.Args(2, 2),
	}
	fs := cmd.Flags()
	o := &startOptions{}
	fs.StringVar(&o.step, "step", "", "the start step's `STEP_TYPE` (default: the start step the flow type's workers declare; none if they declare none, and RPCs drive the flow)")
	fs.StringVar(&o.input, "input", "", "the start step's input, as `JSON`")
	fs.StringVar(&o.inputFile, "input-file", "", "read the start step's input (JSON) from `FILE`")
	fs.Var(&o.attrs, "attr", "set an initial attribute, `name=JSON` (repeatable)")
	fs.DurationVar(&o.timeoutAfter, "timeout-after", 0, "end the flow if it runs longer than `DURATION`")
	fs.StringVar(&o.timeoutPolicy, "timeout-policy", "", "how --timeout-after ends the flow: `fail|cancel` (default fail)")
	fs.StringVar(&o.idReuse, "id-reuse", "default", "whether an existing flow ID may be reused: `POLICY`, one of default, disallow, allow-if-not-running, allow-if-previous-failed, terminate-if-running")
	fs.StringVar(&o.requestID, "request-id", "", "the start's request `ID`, to retry a start safely (default: a random one)")
	addFlowOptionFlags(fs, &o.flowOptions)
	completeValues(cmd, "id-reuse", "default", "disallow", "allow-if-not-running", "allow-if-previous-failed", "terminate-if-running")
	completeValues(cmd, "timeout-policy", "fail", "cancel")
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, args []string) error {
		return flowStart(ctx, s, args[0], args[1], o)
	})
	return cmd
}

func flowStart(ctx context.Context, s *session.Session, flowType, flowID string, o *startOptions) error {
	req := &dexpb.StartFlowRequest{FlowType: flowType, FlowId: flowID, RequestId: o.requestID}
	var input []byte
	switch {
	case o.input != "" && o.inputFile != "":
		return session.Usagef("give the input with --input or --input-file, not both")
	case o.input != "":
		v, err := parseJSONArg(o.input)
		if err != nil {
			return session.Usagef("--input: %v", err)
		}
		input = v
	case o.inputFile != "":
		b, err := os.ReadFile(o.inputFile)
		if err != nil {
			return session.Usagef("--input-file: %v", err)
		}
		if input, err = parseJSONArg(string(b)); err != nil {
			return session.Usagef("--input-file %s: %v", o.inputFile, err)
		}
	}
	if o.step != "" || input != nil {
		// Without --step the server uses the declared start step.
		req.StartStep = &dexpb.Movement{StepType: o.step}
		if input != nil {
			req.StartStep.Input = jsonEncoded(input)
		}
	}
	switch o.timeoutPolicy {
	case "":
	case "fail":
		req.FlowTimeoutPolicy = dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_FAIL
	case "cancel":
		req.FlowTimeoutPolicy = dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_CANCEL
	default:
		return session.Usagef("--timeout-policy must be fail or cancel, not %q", o.timeoutPolicy)
	}
	switch {
	case o.timeoutAfter < 0:
		return session.Usagef("--timeout-after must not be negative")
	case o.timeoutAfter > 0:
		req.FlowTimeout = durationpb.New(o.timeoutAfter)
	case o.timeoutPolicy != "":
		return session.Usagef("--timeout-policy needs --timeout-after")
	}
	if o.handler != "" && o.timeoutPolicy != "" {
		return session.Usagef("--timeout-handler sets the timeout policy (handler): drop --timeout-policy")
	}
	if err := o.apply(req); err != nil {
		return err
	}
	policy, ok := idReusePolicies[o.idReuse]
	if !ok {
		return session.Usagef("--id-reuse must be one of default, disallow, allow-if-not-running, allow-if-previous-failed, terminate-if-running; not %q", o.idReuse)
	}
	req.IdReusePolicy = policy
	for _, a := range o.attrs {
		req.InitialAttributes = append(req.InitialAttributes, &dexpb.Attribute{Name: a.name, Value: jsonEncoded(a.value)})
	}
	if req.RequestId == "" {
		req.RequestId = newRequestID()
	}

	var resp *dexpb.StartFlowResponse
	err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
		var err error
		resp, err = c.StartFlow(ctx, req)
		return err
	})
	if err != nil {
		unknown := fmt.Sprintf("the start may or may not have happened; retry with the same request ID, which starts nothing twice: add --request-id %s", req.RequestId)
		return s.Fail(ctx, err, session.CallInfo{FlowID: flowID, Hints: map[codes.Code]string{
			codes.Unavailable:      unknown,
			codes.DeadlineExceeded: unknown,
		}})
	}
	if s.Out.JSON {
		return s.Out.Document(output.Object{
			{"flowId", flowID},
			{"runId", resp.GetRunId()},
			{"alreadyStarted", resp.GetAlreadyStarted()},
			{"requestId", req.RequestId},
		})
	}
	return output.KeyValues(s.Out.W,
		"Flow ID", flowID,
		"Run ID", resp.GetRunId(),
		"Already started", yesNo(resp.GetAlreadyStarted()),
		"Request ID", req.RequestId)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func flowStopCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stop FLOW_ID",
		Short: "Cancel (default), terminate or fail a running flow execution",
		Example: session.Examples([]string{
			"dexcli flow stop order-42",
			`dexcli flow stop order-42 --fail --reason "customer withdrew"`,
			"dexcli flow stop order-42 --run 0190c3a2 --terminate",
		}),
		Args: session.Args(1, 1),
	}
	fs := cmd.Flags()
	run := runFlag(fs)
	cancel := fs.Bool("cancel", false, "cancel it: status CANCELED (the default)")
	terminate := fs.Bool("terminate", false, "terminate it: status TERMINATED")
	fail := fs.Bool("fail", false, "fail it: status FAILED, error type CLIENT_API_FAILING_FLOW")
	reason := fs.String("reason", "", "the `REASON`, recorded as the flow's error message")
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, args []string) error {
		req := &dexpb.StopFlowRequest{FlowId: args[0], RunId: *run, Reason: *reason, Type: dexpb.StopType_STOP_TYPE_CANCEL}
		n := 0
		for _, f := range []struct {
			set bool
			t   dexpb.StopType
		}{{*cancel, dexpb.StopType_STOP_TYPE_CANCEL}, {*terminate, dexpb.StopType_STOP_TYPE_TERMINATE}, {*fail, dexpb.StopType_STOP_TYPE_FAIL}} {
			if f.set {
				n++
				req.Type = f.t
			}
		}
		if n > 1 {
			return session.Usagef("give at most one of --cancel, --terminate and --fail")
		}
		var resp *dexpb.StopFlowResponse
		err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			resp, err = c.StopFlow(ctx, req)
			return err
		})
		if err != nil {
			return s.Fail(ctx, err, session.CallInfo{FlowID: req.FlowId, RunID: req.RunId})
		}
		if s.Out.JSON {
			return s.Out.Document(output.Object{
				{"flowId", req.FlowId}, {"runId", resp.GetRunId()}, {"status", output.EnumText(resp.GetStatus())},
			})
		}
		return output.KeyValues(s.Out.W, "Flow ID", req.FlowId, "Run ID", resp.GetRunId(), "Status", output.EnumText(resp.GetStatus()))
	})
	return cmd
}

func flowPublishCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "publish FLOW_ID CHANNEL JSON [JSON...]",
		Short: "Publish messages (JSON values) to a channel of a running flow",
		Long: `The messages join the channel's queue in the order given, atomically. A publish
carries a request ID (random unless --request-id is given); a retry with the
same request ID queues nothing twice. With --key, CHANNEL names a channel map
and the messages go to the queue of that key (the wire name
CHANNEL/<escaped key>).`,
		Example: session.Examples([]string{
			`dexcli flow publish ap-7 approve '{"approved":true,"by":"ana"}'`,
			`dexcli flow publish regional-1 orders 12 --key eu`,
			`dexcli flow publish ap-7 approve '{"approved":false,"by":"bo"}' '{"approved":true,"by":"cy"}' --request-id votes-7`,
		}),
		Args: session.Args(3, -1),
	}
	fs := cmd.Flags()
	run := runFlag(fs)
	requestID := fs.String("request-id", "", "the publish's request `ID`, to retry it safely (default: a random one)")
	key := fs.String("key", "", "publish to the queue of `KEY` of the channel map CHANNEL")
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, args []string) error {
		pub := &dexpb.ChannelPublish{Channel: args[1]}
		if fs.Changed("key") {
			if *key == "" {
				return session.Usagef("--key must not be empty")
			}
			pub.Channel = dex.MapInstanceName(args[1], *key)
		}
		for i, a := range args[2:] {
			v, err := parseJSONArg(a)
			if err != nil {
				return session.Usagef("message %d: %v", i+1, err)
			}
			pub.Values = append(pub.Values, jsonEncoded(v))
		}
		req := &dexpb.PublishToChannelRequest{FlowId: args[0], RunId: *run, Publishes: []*dexpb.ChannelPublish{pub}, RequestId: *requestID}
		if req.RequestId == "" {
			req.RequestId = newRequestID()
		}
		var resp *dexpb.PublishToChannelResponse
		err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			resp, err = c.PublishToChannel(ctx, req)
			return err
		})
		if err != nil {
			return s.Fail(ctx, err, session.CallInfo{FlowID: req.FlowId, RunID: req.RunId})
		}
		if s.Out.JSON {
			return s.Out.Document(output.Object{
				{"flowId", req.FlowId}, {"runId", resp.GetRunId()}, {"channel", pub.Channel},
				{"messages", len(pub.Values)}, {"duplicate", resp.GetDuplicate()}, {"requestId", req.RequestId},
			})
		}
		return output.KeyValues(s.Out.W, "Flow ID", req.FlowId, "Run ID", resp.GetRunId(), "Channel", pub.Channel,
			"Messages", strconv.Itoa(len(pub.Values)), "Duplicate", yesNo(resp.GetDuplicate()), "Request ID", req.RequestId)
	})
	return cmd
}

func flowRPCCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rpc FLOW_ID RPC_NAME [JSON]",
		Short: "Invoke a named RPC of a running flow and print its output",
		Long: `A worker runs the RPC once, without retries; its output and its writes commit
before the answer. The call is not retried on another --server address once it
reached a server, since it could run twice.`,
		Example: session.Examples([]string{
			"dexcli flow rpc order-42 status",
			`dexcli flow rpc counter-1 add 5 --attempt-timeout 10s`,
			`dexcli flow rpc counter-1 add 1 --lock count`,
		}),
		Args: session.Args(2, 3),
	}
	fs := cmd.Flags()
	run := runFlag(fs)
	attemptTimeout := fs.Duration("attempt-timeout", 0, "bound the worker's attempt to `DURATION` (default: the server's, 30s); keep --timeout above it")
	locks := fs.StringArray("lock", nil, "take the lock of attribute `NAME` before the RPC runs (repeatable); ABORTED when it is held")
	cmd.RunE = env.Run(40*time.Second, func(ctx context.Context, s *session.Session, args []string) error {
		req := &dexpb.InvokeRPCRequest{FlowId: args[0], RunId: *run, RpcName: args[1], Locks: *locks}
		if len(args) == 3 {
			v, err := parseJSONArg(args[2])
			if err != nil {
				return session.Usagef("RPC input: %v", err)
			}
			req.Input = jsonEncoded(v)
		}
		if *attemptTimeout < 0 {
			return session.Usagef("--attempt-timeout must not be negative")
		}
		if *attemptTimeout > 0 {
			req.Timeout = durationpb.New(*attemptTimeout)
		}
		var resp *dexpb.InvokeRPCResponse
		err := s.Flow(ctx, session.OnUnreachable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			resp, err = c.InvokeRPC(ctx, req)
			return err
		})
		if err != nil {
			return s.Fail(ctx, err, rpcFailure(req, err))
		}
		if s.Out.JSON {
			return s.Out.Document(output.Object{
				{"flowId", req.FlowId}, {"runId", resp.GetRunId()}, {"rpcName", req.RpcName}, {"output", output.JSONValue(resp.GetOutput())},
			})
		}
		return output.KeyValues(s.Out.W, "Flow ID", req.FlowId, "Run ID", resp.GetRunId(), "RPC", req.RpcName, "Output", output.ValueText(resp.GetOutput()))
	})
	return cmd
}

// rpcFailure explains a failed InvokeRPC, with the worker's error when its
// handler failed.
func rpcFailure(req *dexpb.InvokeRPCRequest, err error) session.CallInfo {
	info := session.CallInfo{FlowID: req.FlowId, RunID: req.RunId, Hints: map[codes.Code]string{
		codes.DeadlineExceeded: fmt.Sprintf("no result in time: no worker may serve the flow type, or the handler is slow; the RPC may still commit later. See the pending tasks in \"dexcli flow state %s\"", output.ShellQuote(req.FlowId)),
		codes.Unavailable:      "the RPC may or may not have run; check \"dexcli flow history\" before invoking it again",
		codes.Aborted:          "a lock the call needs is held; nothing ran, invoke it again",
	}}
	for _, d := range status.Convert(err).Details() {
		if we, ok := d.(*dexpb.WorkerError); ok {
			info.Hints[codes.FailedPrecondition] = "the RPC handler returned an error; the flow is not affected"
			info.Detail = fmt.Sprintf("worker error: %s: %s", output.OrDash(we.GetErrorType()), we.GetMessage())
			// A returned business error is not a bug: no goroutine dump in
			// the text, only for a panic; -o json keeps the stack.
			if we.GetStack() != "" && we.GetErrorType() == "dex.Panic" {
				info.Detail += "\n" + indent(we.GetStack(), "  ")
			}
			info.Fields = output.Object{{"workerError", output.Object{{"errorType", we.GetErrorType()},
				{"message", we.GetMessage()}, {"stack", we.GetStack()}}}}
		}
	}
	return info
}

func flowSkipTimerCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skip-timer FLOW_ID STEP_EXECUTION_ID",
		Short: "Fire a pending timer of a step execution's Wait now",
		Example: session.Examples([]string{
			"dexcli flow skip-timer ap-7 AwaitApproval-1 --timer-index 0",
			"dexcli flow skip-timer ap-7 AwaitApproval-1 --timer-id timeout",
		}),
		Args: session.Args(2, 2),
	}
	fs := cmd.Flags()
	run := runFlag(fs)
	timerID := fs.String("timer-id", "", "the timer condition's `ID`")
	timerIndex := &session.OptUint{Bits: 32}
	fs.Var(timerIndex, "timer-index", "the timer's index `N` among the Wait's timers, from 0")
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, args []string) error {
		req := &dexpb.SkipTimerRequest{FlowId: args[0], RunId: *run, StepExecutionId: args[1]}
		out := output.Object{{"flowId", req.FlowId}, {"stepExecutionId", req.StepExecutionId}}
		timer := ""
		switch {
		case *timerID != "" && timerIndex.Given:
			return session.Usagef("give --timer-id or --timer-index, not both")
		case *timerID != "":
			req.Timer = &dexpb.SkipTimerRequest_ConditionId{ConditionId: *timerID}
			out, timer = out.Add("timerId", *timerID), fmt.Sprintf("timer %q", *timerID)
		case timerIndex.Given:
			req.Timer = &dexpb.SkipTimerRequest_TimerIndex{TimerIndex: uint32(timerIndex.V)}
			out, timer = out.Add("timerIndex", timerIndex.V), fmt.Sprintf("timer #%d", timerIndex.V)
		default:
			return session.Usagef("name the timer with --timer-id or --timer-index")
		}
		err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			_, err := c.SkipTimer(ctx, req)
			return err
		})
		if err != nil {
			see := fmt.Sprintf("; see the step executions and their timers in \"dexcli flow state %s\"", output.ShellQuote(req.FlowId))
			return s.Fail(ctx, err, session.CallInfo{FlowID: req.FlowId, RunID: req.RunId, Hints: map[codes.Code]string{
				codes.NotFound:           "no such flow, step execution or timer" + see,
				codes.FailedPrecondition: "the timer is not pending (it fired or was skipped, or the Wait no longer waits)" + see,
			}})
		}
		if s.Out.JSON {
			return s.Out.Document(out.Add("skipped", true))
		}
		_, err = fmt.Fprintf(s.Out.W, "Skipped %s of %s in flow %s.\n", timer, req.StepExecutionId, req.FlowId)
		return err
	})
	return cmd
}

func flowGetAttrsCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get-attrs FLOW_ID [NAME...]",
		Short: "Print attributes of a flow execution (all, or the names given)",
		Example: session.Examples([]string{
			"dexcli flow get-attrs order-42",
			"dexcli flow get-attrs order-42 status -o json",
			"dexcli flow get-attrs regional-1 tier --key acme",
		}),
		Args: session.Args(1, -1),
	}
	fs := cmd.Flags()
	run := runFlag(fs)
	key := fs.String("key", "", "every NAME is an attribute map: read its instance `KEY`")
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, args []string) error {
		req := &dexpb.GetAttributesRequest{FlowId: args[0], RunId: *run, Names: args[1:]}
		if fs.Changed("key") {
			if *key == "" || len(req.Names) == 0 {
				return session.Usagef("--key needs a non-empty key and at least one NAME")
			}
			for i, n := range req.Names {
				req.Names[i] = dex.MapInstanceName(n, *key)
			}
		}
		var resp *dexpb.GetAttributesResponse
		err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			resp, err = c.GetAttributes(ctx, req)
			return err
		})
		if err != nil {
			return s.Fail(ctx, err, session.CallInfo{FlowID: req.FlowId, RunID: req.RunId})
		}
		if s.Out.JSON {
			return s.Out.Document(output.Object{
				{"flowId", req.FlowId}, {"runId", resp.GetRunId()}, {"attributes", attributesJSON(resp.GetAttributes())},
			})
		}
		got := map[string]bool{}
		var rows [][]string
		for _, a := range resp.GetAttributes() {
			got[a.GetName()] = true
			rows = append(rows, []string{nameText(a.GetName()), output.ValueText(a.GetValue())})
		}
		for _, n := range req.Names {
			if !got[n] {
				fmt.Fprintf(s.Stderr(), "attribute %q has no value\n", n)
			}
		}
		return output.Table(s.Out.W, []string{"NAME", "VALUE"}, rows)
	})
	return cmd
}

func attributesJSON(attrs []*dexpb.Attribute) []any {
	out := make([]any, len(attrs))
	for i, a := range attrs {
		out[i] = output.ProtoJSON(a)
	}
	return out
}

func flowSetAttrsCmd(env *session.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "set-attrs FLOW_ID name=JSON [name=JSON...]",
		Short: "Set attributes of a running flow, atomically",
		Example: session.Examples([]string{
			`dexcli flow set-attrs order-42 'status="on-hold"'`,
			"dexcli flow set-attrs counter-1 count=10",
			`dexcli flow set-attrs regional-1 'tier="gold"' --key acme`,
		}),
		Args: session.Args(2, -1),
	}
	fs := cmd.Flags()
	run := runFlag(fs)
	key := fs.String("key", "", "every name is an attribute map: set its instance `KEY` (the wire name name/<escaped key>)")
	cmd.RunE = env.Run(session.DefaultCallTimeout, func(ctx context.Context, s *session.Session, args []string) error {
		if fs.Changed("key") && *key == "" {
			return session.Usagef("--key must not be empty")
		}
		req := &dexpb.SetAttributesRequest{FlowId: args[0], RunId: *run}
		var names []string
		for _, a := range args[1:] {
			p, err := parseNamedJSON(a)
			if err != nil {
				return session.Usagef("%v", err)
			}
			if fs.Changed("key") {
				p.name = dex.MapInstanceName(p.name, *key)
			}
			req.Attributes = append(req.Attributes, &dexpb.Attribute{Name: p.name, Value: jsonEncoded(p.value)})
			names = append(names, p.name)
		}
		var resp *dexpb.SetAttributesResponse
		err := s.Flow(ctx, session.OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
			var err error
			resp, err = c.SetAttributes(ctx, req)
			return err
		})
		if err != nil {
			return s.Fail(ctx, err, session.CallInfo{FlowID: req.FlowId, RunID: req.RunId})
		}
		if s.Out.JSON {
			return s.Out.Document(output.Object{{"flowId", req.FlowId}, {"runId", resp.GetRunId()}, {"attributes", names}})
		}
		return output.KeyValues(s.Out.W, "Flow ID", req.FlowId, "Run ID", resp.GetRunId(), "Set", strings.Join(names, ", "))
	})
	return cmd
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}
