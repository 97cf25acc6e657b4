package flowcmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/cli/output"
)

// nameText shows an attribute's or channel's name for people: an instance
// of a map (E33, "<name>/<escaped key>") as name["key"], with the key
// unescaped; any other name as it is.
func nameText(wire string) string {
	if name, key, ok := dex.ParseMapInstanceName(wire); ok {
		return fmt.Sprintf("%s[%q]", name, key)
	}
	return wire
}

// Text renderings of flow summaries, results, live state and history, for
// people. JSON output does not use them (see output.ProtoJSON).

// summaryKV is a summary as key/value pairs.
func summaryKV(sum *dexpb.FlowSummary) []string {
	kv := []string{
		"Flow ID", sum.GetFlowId(),
		"Run ID", sum.GetRunId(),
		"Type", sum.GetFlowType(),
		"Status", output.EnumText(sum.GetStatus()),
		"Started", output.TextTime(sum.GetStartTime()),
	}
	if sum.GetParentFlowId() != "" {
		kv = append(kv, "Parent", sum.GetParentFlowId())
	}
	if sum.GetCloseTime() != nil {
		kv = append(kv, "Closed", output.TextTime(sum.GetCloseTime()))
	}
	if sum.GetFlowTimeout() != nil {
		policy := "FAIL"
		if sum.GetFlowTimeoutPolicy() == dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_CANCEL {
			policy = "CANCEL"
		}
		kv = append(kv, "Flow timeout", fmt.Sprintf("%s, then %s", output.TextDuration(sum.GetFlowTimeout()), policy))
	}
	return append(kv, flowErrorKV(sum.GetError())...)
}

// flowErrorKV is a flow error as key/value pairs; none without an error.
func flowErrorKV(e *dexpb.FlowError) []string {
	if e == nil {
		return nil
	}
	kv := []string{"Error", strings.TrimPrefix(output.EnumText(e.GetType())+": ", "UNSPECIFIED: ") + e.GetMessage()}
	if e.GetStepExecutionId() != "" || e.GetStepType() != "" {
		kv = append(kv, "Error step", fmt.Sprintf("%s (%s)", output.OrDash(e.GetStepExecutionId()), output.OrDash(e.GetStepType())))
	}
	if f := e.GetLastAttemptFailure(); f != nil {
		kv = append(kv, "Last attempt", attemptFailureText(f))
	}
	return kv
}

// printStack prints a worker's stack trace under a heading.
func printStack(w io.Writer, heading, stack, prefix string) {
	if stack == "" {
		return
	}
	fmt.Fprintf(w, "%s%s:\n%s\n", prefix, heading, indent(stack, prefix+"  "))
}

func summaryText(w io.Writer, sum *dexpb.FlowSummary) error {
	if err := output.KeyValues(w, summaryKV(sum)...); err != nil {
		return err
	}
	printStack(w, "Stack", sum.GetError().GetLastAttemptFailure().GetStack(), "")
	return nil
}

// attemptFailureText is one line about a failed attempt.
func attemptFailureText(f *dexpb.AttemptFailure) string {
	s := fmt.Sprintf("%s attempt %d", output.EnumText(f.GetMethod()), f.GetAttempt())
	if f.GetTime() != nil {
		s += " at " + output.TextTime(f.GetTime())
	}
	s += ": " + output.EnumText(f.GetKind())
	if f.GetErrorType() != "" {
		s += " " + f.GetErrorType()
	}
	if f.GetMessage() != "" {
		s += ": " + f.GetMessage()
	}
	return s
}

func resultText(w io.Writer, r *dexpb.FlowResult) error {
	kv := []string{
		"Flow ID", r.GetFlowId(),
		"Run ID", r.GetRunId(),
		"Type", r.GetFlowType(),
		"Status", output.EnumText(r.GetStatus()),
		"Closed", output.TextTime(r.GetCloseTime()),
	}
	if err := output.KeyValues(w, append(kv, flowErrorKV(r.GetError())...)...); err != nil {
		return err
	}
	printStack(w, "Stack", r.GetError().GetLastAttemptFailure().GetStack(), "")
	return outputsText(w, r.GetOutputs())
}

func outputsText(w io.Writer, outs []*dexpb.StepOutput) error {
	if len(outs) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nOutputs:")
	rows := make([][]string, len(outs))
	for i, o := range outs {
		kind := "graceful"
		if o.GetForceComplete() {
			kind = "force"
		}
		rows[i] = []string{"  " + o.GetStepExecutionId(), o.GetStepType(), kind, output.TextTime(o.GetTime()), output.ValueText(o.GetOutput())}
	}
	return output.Table(w, []string{"  STEP EXECUTION", "STEP", "COMPLETE", "TIME", "OUTPUT"}, rows)
}

// stateText prints a flow's live state as a tree.
func stateText(w io.Writer, st *dexpb.FlowState) error {
	if err := summaryText(w, st.GetSummary()); err != nil {
		return err
	}
	var links []string // E34, E37
	if id := st.GetRetryRunId(); id != "" {
		links = append(links, "Retried by run", id)
	}
	if id := st.GetResetFromRunId(); id != "" {
		links = append(links, "Reset from run", id)
	}
	if id := st.GetResetRunId(); id != "" {
		links = append(links, "Reset to run", id)
	}
	if len(links) > 0 {
		if err := output.KeyValues(w, links...); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nSteps (%d active):\n", len(st.GetStepExecutions()))
	for _, x := range st.GetStepExecutions() {
		stepText(w, x)
	}
	if len(st.GetChannels()) > 0 {
		fmt.Fprintln(w, "\nChannels:")
		for _, c := range st.GetChannels() {
			fmt.Fprintf(w, "  %s: %d queued\n", nameText(c.GetChannel()), c.GetSize())
			for _, m := range c.GetMessages() {
				fmt.Fprintf(w, "    %s  %s\n", output.TextTime(m.GetPublishTime()), output.ValueText(m.GetValue()))
			}
			if extra := int(c.GetSize()) - len(c.GetMessages()); extra > 0 {
				fmt.Fprintf(w, "    ... %d more\n", extra)
			}
		}
	}
	if len(st.GetAttributes()) > 0 {
		fmt.Fprintln(w, "\nAttributes:")
		rows := make([][]string, len(st.GetAttributes()))
		for i, a := range st.GetAttributes() {
			rows[i] = []string{"  " + nameText(a.GetName()), output.ValueText(a.GetValue())}
		}
		if err := output.Table(w, []string{"  NAME", "VALUE"}, rows); err != nil {
			return err
		}
	}
	if len(st.GetHeldLocks()) > 0 {
		fmt.Fprintln(w, "\nLocks held:")
		rows := make([][]string, len(st.GetHeldLocks()))
		for i, l := range st.GetHeldLocks() {
			by := fmt.Sprintf("%s %s attempt %d", output.EnumText(l.GetMethod()), l.GetStepExecutionId(), l.GetAttempt())
			if l.GetStepExecutionId() == "" {
				by = fmt.Sprintf("RPC %s (call %s)", l.GetRpcName(), l.GetCallId())
			}
			rows[i] = []string{"  " + l.GetAttribute(), by}
		}
		if err := output.Table(w, []string{"  ATTRIBUTE", "HELD BY"}, rows); err != nil {
			return err
		}
	}
	if err := outputsText(w, st.GetOutputs()); err != nil {
		return err
	}
	if len(st.GetPendingTasks()) > 0 {
		fmt.Fprintln(w, "\nPending tasks (no worker has received them):")
		for _, p := range st.GetPendingTasks() {
			what := fmt.Sprintf("%s %s attempt %d", output.EnumText(p.GetKind()), p.GetStepExecutionId(), p.GetAttempt())
			if p.GetKind() == dexpb.TaskKind_TASK_KIND_RPC {
				what = "RPC " + p.GetRpcName()
			}
			why := "every worker of the flow type is busy"
			if p.GetNoWorker() {
				why = "no connected worker serves the flow type"
			}
			fmt.Fprintf(w, "  %s, ready since %s: %s\n", what, output.TextTime(p.GetReadyTime()), why)
		}
	}
	return nil
}

func stepText(w io.Writer, x *dexpb.StepExecutionState) {
	fmt.Fprintf(w, "  %s (%s)  %s  scheduled %s\n", x.GetStepExecutionId(), x.GetStepType(), output.EnumText(x.GetPhase()), output.TextTime(x.GetScheduleTime()))
	fmt.Fprintf(w, "    input: %s\n", output.ValueText(x.GetInput()))
	if a := x.GetAttempt(); a != nil {
		s := fmt.Sprintf("%s attempt %d %s", output.EnumText(a.GetMethod()), a.GetAttempt(), output.EnumText(a.GetStatus()))
		switch a.GetStatus() {
		case dexpb.AttemptStatus_ATTEMPT_STATUS_RUNNING:
			s += fmt.Sprintf(" on worker %s since %s, deadline %s", output.OrDash(a.GetWorkerId()), output.TextTime(a.GetStartTime()), output.TextTime(a.GetDeadline()))
		case dexpb.AttemptStatus_ATTEMPT_STATUS_BACKOFF:
			s += " until " + output.TextTime(a.GetNextAttemptTime())
		}
		fmt.Fprintf(w, "    attempt: %s\n", s)
	}
	if ws := x.GetWait(); ws != nil {
		sat := "waiting"
		if ws.GetSatisfied() {
			sat = "satisfied"
		}
		fmt.Fprintf(w, "    wait: %s, %s, stored %s\n", waitText(ws.GetWait()), sat, output.TextTime(ws.GetStoreTime()))
		for _, t := range ws.GetTimers() {
			fmt.Fprintf(w, "      timer #%d%s  %s  fires %s\n", t.GetTimerIndex(), idText(t.GetConditionId()), output.EnumText(t.GetStatus()), output.TextTime(t.GetFireTime()))
		}
		for _, c := range ws.GetChannels() {
			s := "waiting"
			if c.GetSatisfied() {
				s = fmt.Sprintf("satisfied, consumed %d", c.GetConsumedCount())
			}
			fmt.Fprintf(w, "      channel #%d%s %s  %s\n", c.GetChannelConditionIndex(), idText(c.GetConditionId()), nameText(c.GetChannel()), s)
		}
		for _, c := range ws.GetSubFlows() {
			fmt.Fprintf(w, "      subflow #%d%s %s\n", c.GetSubFlowConditionIndex(), idText(c.GetConditionId()), subFlowText(c))
		}
	}
	if x.GetWaitForFailed() {
		fmt.Fprintf(w, "    waitFor failed, Execute proceeds: %s\n", attemptFailureText(x.GetWaitForFailure()))
	}
	if f := x.GetLastFailure(); f != nil {
		fmt.Fprintf(w, "    last failure: %s\n", attemptFailureText(f))
		printStack(w, "stack", f.GetStack(), "      ")
	}
}

func idText(id string) string {
	if id == "" {
		return ""
	}
	return fmt.Sprintf(" [%s]", id)
}

// waitText is a Wait on one line: "anyOf(channel approve forOne, timer 24h0m0s)".
func waitText(w *dexpb.Wait) string {
	conds := func(cs []*dexpb.WaitCondition) string {
		parts := make([]string, len(cs))
		for i, c := range cs {
			parts[i] = conditionText(c)
		}
		return strings.Join(parts, ", ")
	}
	switch k := w.GetKind().(type) {
	case *dexpb.Wait_Until:
		return "until(" + conditionText(k.Until) + ")"
	case *dexpb.Wait_AllOf:
		return "allOf(" + conds(k.AllOf.GetConditions()) + ")"
	case *dexpb.Wait_AnyOf:
		return "anyOf(" + conds(k.AnyOf.GetConditions()) + ")"
	case *dexpb.Wait_AnyCombinationOf:
		gs := make([]string, 0, len(k.AnyCombinationOf.GetGroups()))
		for _, g := range k.AnyCombinationOf.GetGroups() {
			gs = append(gs, "["+strings.Join(g.GetConditionIds(), ", ")+"]")
		}
		return "anyCombinationOf(" + conds(k.AnyCombinationOf.GetConditions()) + "; groups " + strings.Join(gs, " or ") + ")"
	}
	return "nothing"
}

func conditionText(c *dexpb.WaitCondition) string {
	var s string
	switch k := c.GetCondition().(type) {
	case *dexpb.WaitCondition_Timer:
		s = "timer " + output.TextDuration(k.Timer.GetDuration())
	case *dexpb.WaitCondition_Channel:
		ch := k.Channel
		var bound string
		switch ch.GetBound() {
		case dexpb.ChannelBound_CHANNEL_BOUND_FOR_ONE:
			bound = "forOne"
		case dexpb.ChannelBound_CHANNEL_BOUND_FOR_N:
			bound = fmt.Sprintf("forN(%d)", ch.GetN())
		case dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST:
			bound = fmt.Sprintf("atLeast(%d)", ch.GetN())
		case dexpb.ChannelBound_CHANNEL_BOUND_AT_MOST:
			bound = fmt.Sprintf("atMost(%d)", ch.GetN())
		case dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST_AT_MOST:
			bound = fmt.Sprintf("atLeastAtMost(%d,%d)", ch.GetMin(), ch.GetMax())
		default:
			bound = output.EnumText(ch.GetBound())
		}
		s = fmt.Sprintf("channel %s %s", nameText(ch.GetChannel()), bound)
	case *dexpb.WaitCondition_SubFlow:
		s = "subflow " + k.SubFlow.GetFlowType()
	default:
		s = "empty condition"
	}
	return s + idText(c.GetId())
}

// subFlowsText lists the subflows of a state's waiting steps, if any.
func subFlowsText(w io.Writer, st *dexpb.FlowState) error {
	var lines []string
	for _, x := range st.GetStepExecutions() {
		for _, c := range x.GetWait().GetSubFlows() {
			lines = append(lines, fmt.Sprintf("  %s #%d%s %s", x.GetStepExecutionId(), c.GetSubFlowConditionIndex(), idText(c.GetConditionId()), subFlowText(c)))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "Subflows (%d):\n%s\n", len(lines), strings.Join(lines, "\n"))
	return err
}

// subFlowText is a subflow condition's child on one line: "sf-child
// SubFlow:fan-1-FanOut-1-0 run 0190c3a2  RUNNING".
func subFlowText(c *dexpb.SubFlowConditionState) string {
	status := "not started"
	if c.GetStatus() != dexpb.FlowStatus_FLOW_STATUS_UNSPECIFIED {
		status = output.EnumText(c.GetStatus())
	}
	s := fmt.Sprintf("%s %s run %s  %s", c.GetFlowType(), c.GetFlowId(), output.OrDash(c.GetRunId()), status)
	if c.GetSatisfied() {
		s += ", satisfied"
	}
	return s
}

// eventText is a history event's kind and a one-line account of it.
func eventText(e *dexpb.HistoryEvent) (kind, details string) {
	switch ev := e.GetEvent().(type) {
	case *dexpb.HistoryEvent_SubFlowCompleted:
		x := ev.SubFlowCompleted
		r := x.GetResult()
		return "SubFlowCompleted", fmt.Sprintf("%s subflow #%d%s: %s %s", x.GetStepExecutionId(), x.GetSubFlowConditionIndex(),
			idText(x.GetConditionId()), r.GetFlowId(), output.EnumText(r.GetStatus()))
	case *dexpb.HistoryEvent_FlowStarted:
		x := ev.FlowStarted
		parts := []string{"type " + x.GetFlowType()}
		if m := x.GetStartStep(); m != nil {
			parts = append(parts, "start "+movementText(m, x.GetStartStepExecutionId()))
		} else {
			parts = append(parts, "no start step")
		}
		if attrs := x.GetInitialAttributes(); len(attrs) > 0 {
			parts = append(parts, "attributes "+attributesText(attrs))
		}
		if x.GetFlowTimeout() != nil {
			parts = append(parts, fmt.Sprintf("timeout %s (%s)", output.TextDuration(x.GetFlowTimeout()), output.EnumText(x.GetFlowTimeoutPolicy())))
		}
		if p := x.GetIdReusePolicy(); p != dexpb.IdReusePolicy_ID_REUSE_POLICY_UNSPECIFIED {
			parts = append(parts, "idReuse "+output.EnumText(p))
		}
		if x.GetTerminatedRunId() != "" {
			parts = append(parts, "terminated run "+x.GetTerminatedRunId())
		}
		if x.GetRequestId() != "" {
			parts = append(parts, "request "+x.GetRequestId())
		}
		if r := x.GetResetInfo(); r != nil { // E37
			p := fmt.Sprintf("reset from run %s (before event %d)", r.GetResetRunId(), r.GetPointEventId())
			if r.GetReason() != "" {
				p += ": " + r.GetReason()
			}
			if r.GetRequestId() != "" {
				p += " (request " + r.GetRequestId() + ")"
			}
			parts = append(parts, p)
		}
		return "FlowStarted", strings.Join(parts, "; ")
	case *dexpb.HistoryEvent_WaitForCompleted:
		x := ev.WaitForCompleted
		return "WaitForCompleted", fmt.Sprintf("%s attempt %d (%s): wait %s%s",
			x.GetStepExecutionId(), x.GetAttempt(), output.TextDuration(x.GetDuration()), waitText(x.GetWait()), writesText(x.GetWrites()))
	case *dexpb.HistoryEvent_WaitForFailed:
		return "WaitForFailed", attemptFailedText(ev.WaitForFailed)
	case *dexpb.HistoryEvent_ExecuteCompleted:
		x := ev.ExecuteCompleted
		return "ExecuteCompleted", fmt.Sprintf("%s attempt %d (%s): %s%s",
			x.GetStepExecutionId(), x.GetAttempt(), output.TextDuration(x.GetDuration()),
			decisionText(x.GetDecision(), x.GetScheduledStepExecutionIds()), writesText(x.GetWrites()))
	case *dexpb.HistoryEvent_ExecuteFailed:
		return "ExecuteFailed", attemptFailedText(ev.ExecuteFailed)
	case *dexpb.HistoryEvent_RpcCompleted:
		x := ev.RpcCompleted
		s := fmt.Sprintf("%s (%s): input %s, output %s", x.GetRpcName(), output.TextDuration(x.GetDuration()), output.ValueText(x.GetInput()), output.ValueText(x.GetOutput()))
		if len(x.GetMovements()) > 0 {
			s += "; " + movementsText(x.GetMovements(), x.GetScheduledStepExecutionIds())
		}
		if c := x.GetCancelStepTypes(); len(c) > 0 {
			s += "; cancel " + strings.Join(c, ", ")
		}
		return "RpcCompleted", s + writesText(x.GetWrites())
	case *dexpb.HistoryEvent_ChannelPublished:
		s := publishesText(ev.ChannelPublished.GetPublishes())
		if id := ev.ChannelPublished.GetRequestId(); id != "" {
			s += "; request " + id
		}
		return "ChannelPublished", s
	case *dexpb.HistoryEvent_AttributesSet:
		return "AttributesSet", attributesText(ev.AttributesSet.GetAttributes())
	case *dexpb.HistoryEvent_TimerSkipped:
		x := ev.TimerSkipped
		return "TimerSkipped", fmt.Sprintf("%s timer #%d%s", x.GetStepExecutionId(), x.GetTimerIndex(), idText(x.GetConditionId()))
	case *dexpb.HistoryEvent_StepCanceled:
		x := ev.StepCanceled
		scope := "flow-wide"
		if x.GetSiblingsOnly() {
			scope = "as a sibling"
		}
		return "StepCanceled", fmt.Sprintf("%s canceled %s by %s", x.GetStepExecutionId(), scope, x.GetCausedBy())
	case *dexpb.HistoryEvent_User:
		x := ev.User
		by := x.GetStepExecutionId()
		if by == "" {
			by = "rpc:" + x.GetRpcName()
		}
		return "UserEvent", fmt.Sprintf("%s: %s = %s", by, x.GetName(), output.ValueText(x.GetValue()))
	case *dexpb.HistoryEvent_FlowClosed:
		x := ev.FlowClosed
		s := output.EnumText(x.GetStatus())
		if e := x.GetError(); e != nil {
			s += ": " + strings.TrimPrefix(output.EnumText(e.GetType())+": ", "UNSPECIFIED: ") + e.GetMessage()
		}
		if n := len(x.GetOutputs()); n > 0 {
			s += fmt.Sprintf("; %d output(s)", n)
		}
		return "FlowClosed", s
	}
	return "Unknown", "an event kind this dexcli does not know"
}

func attemptFailedText(x *dexpb.StepAttemptFailedEvent) string {
	f := x.GetFailure()
	s := fmt.Sprintf("%s attempt %d (%s): %s", x.GetStepExecutionId(), f.GetAttempt(), output.TextDuration(x.GetDuration()), output.EnumText(f.GetKind()))
	if f.GetErrorType() != "" {
		s += " " + f.GetErrorType()
	}
	if f.GetMessage() != "" {
		s += ": " + f.GetMessage()
	}
	if x.GetNextAttemptTime() != nil {
		return s + "; retry at " + output.TextTime(x.GetNextAttemptTime())
	}
	return s + "; no retries left"
}

func decisionText(d *dexpb.StepDecision, ids []string) string {
	s := decisionKindText(d, ids)
	if c := d.GetCancelStepTypes(); len(c) > 0 {
		s += "; cancel " + strings.Join(c, ", ")
	}
	if c := d.GetCancelSiblingStepTypes(); len(c) > 0 {
		s += "; cancel sibling " + strings.Join(c, ", ")
	}
	return s
}

func decisionKindText(d *dexpb.StepDecision, ids []string) string {
	switch k := d.GetDecision().(type) {
	case *dexpb.StepDecision_Movements:
		return movementsText(k.Movements.GetMovements(), ids)
	case *dexpb.StepDecision_GracefulComplete:
		return "gracefulComplete, output " + output.ValueText(k.GracefulComplete.GetOutput())
	case *dexpb.StepDecision_ForceComplete:
		return "forceComplete, output " + output.ValueText(k.ForceComplete.GetOutput())
	case *dexpb.StepDecision_ForceFail:
		return fmt.Sprintf("forceFail %q", k.ForceFail.GetReason())
	case *dexpb.StepDecision_DeadEnd:
		return "deadEnd"
	case *dexpb.StepDecision_ForceCompleteIfChannelsEmpty:
		c := k.ForceCompleteIfChannelsEmpty
		if c.GetChannelsEmpty() {
			return fmt.Sprintf("forceCompleteIfChannelsEmpty(%s): empty, completed, output %s",
				strings.Join(c.GetChannels(), ", "), output.ValueText(c.GetOutput()))
		}
		return fmt.Sprintf("forceCompleteIfChannelsEmpty(%s): not empty, fallback %s",
			strings.Join(c.GetChannels(), ", "), movementsText(c.GetFallback(), ids))
	}
	return "no decision"
}

func movementsText(ms []*dexpb.Movement, ids []string) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		id := ""
		if i < len(ids) {
			id = ids[i]
		}
		parts[i] = movementText(m, id)
	}
	return "move to " + strings.Join(parts, ", ")
}

func movementText(m *dexpb.Movement, id string) string {
	s := m.GetStepType()
	if id != "" {
		s = id
	}
	if m.GetSkipWaitFor() {
		s += " (skip WaitFor)"
	}
	if m.GetInput() != nil {
		s += " input " + output.ValueText(m.GetInput())
	}
	return s
}

func attributesText(attrs []*dexpb.Attribute) string {
	parts := make([]string, len(attrs))
	for i, a := range attrs {
		parts[i] = nameText(a.GetName()) + "=" + output.ValueText(a.GetValue())
	}
	return strings.Join(parts, ", ")
}

func publishesText(ps []*dexpb.ChannelPublish) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		vals := make([]string, len(p.GetValues()))
		for j, v := range p.GetValues() {
			vals[j] = output.ValueText(v)
		}
		parts[i] = fmt.Sprintf("%s <- %s", nameText(p.GetChannel()), strings.Join(vals, ", "))
	}
	return strings.Join(parts, "; ")
}

func writesText(w *dexpb.StagedWrites) string {
	var parts []string
	if a := w.GetAttributeWrites(); len(a) > 0 {
		parts = append(parts, "set "+attributesText(a))
	}
	if p := w.GetChannelPublishes(); len(p) > 0 {
		parts = append(parts, "publish "+publishesText(p))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}
