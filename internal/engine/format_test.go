package engine

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Test-only rendering of records, effects and states for the golden
// scripts: JSON with times shown relative to base, durations as Go
// durations, payloads as text, and default step options left out.

func formatRecord(r Record) string {
	return r.Type() + " " + render(r.Body)
}

func formatEffect(e Effect) string {
	switch e := e.(type) {
	case DispatchTask:
		return fmt.Sprintf("dispatch %s %s#%d notBefore=%s %s", e.StepExecID, e.Method, e.Attempt, rel(e.NotBefore), e.Durability)
	case SendTask:
		return fmt.Sprintf("send %s %s#%d epoch=%d", e.Token.StepExecID, e.Token.Method, e.Token.Attempt, e.Token.Epoch)
	case ArmTimer:
		return fmt.Sprintf("arm %s at %s", e.Timer, rel(e.At))
	case ReplyRPC:
		return fmt.Sprintf("reply %s output=%q", e.CallID, e.Output.Data)
	case NotifyClosed:
		return fmt.Sprintf("closed %s %s", e.RunID, e.Status)
	case NotifySuperseded:
		return fmt.Sprintf("superseded %s", e.Previous.RunID)
	case CancelTask:
		return fmt.Sprintf("cancel task %s %s#%d (%s)", e.StepExecID, e.Method, e.Attempt, e.Reason)
	}
	return fmt.Sprintf("%T", e)
}

func rel(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return "+" + t.Sub(base).String()
}

func defaultOptionsJSON() string {
	b, _ := json.Marshal(simplify(toJSON(DefaultOptions()), ""))
	return string(b)
}

func toJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		panic(err)
	}
	return x
}

func render(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(simplify(toJSON(v), "")); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

var durationKeys = map[string]bool{"duration": true, "timeout": true, "initialInterval": true, "maxInterval": true, "maxTotal": true,
	"startDelay": true, "deadline": true, // E34
	"heartbeatTimeout": true, "waitFor": true, "execute": true}

func simplify(x any, key string) any {
	switch v := x.(type) {
	case map[string]any:
		if _, ok := v["data"]; ok && len(v) <= 2 {
			raw, _ := base64.StdEncoding.DecodeString(v["data"].(string))
			if t, ok := v["type"].(string); ok {
				return t + ":" + string(raw)
			}
			return string(raw)
		}
		if len(v) == 0 && (key == "input" || key == "output" || key == "value") {
			return ""
		}
		out := map[string]any{}
		for k, e := range v {
			out[k] = simplify(e, k)
		}
		if key == "options" {
			if b, _ := json.Marshal(out); string(b) == defaultOptionsJSON() {
				return "default"
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = simplify(e, key)
		}
		return out
	case string:
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return rel(t)
		}
		return v
	case float64:
		if durationKeys[key] {
			return time.Duration(v).String()
		}
		return v
	}
	return x
}

// summarize renders a state for the "state" script command.
func summarize(st *FlowState) []string {
	if st == nil {
		return []string{"(no state)"}
	}
	out := []string{fmt.Sprintf("run %s type=%s status=%s started=%s", st.RunID, st.FlowType, st.Status, rel(st.StartedAt))}
	if !st.TimeoutAt.IsZero() {
		out[0] += fmt.Sprintf(" timeout=%s/%s", rel(st.TimeoutAt), st.TimeoutPolicy)
	}
	if len(st.History) > 0 && st.History[0].Start != nil && st.History[0].Start.Reset != nil {
		out[0] += " resetFrom=" + st.History[0].Start.Reset.ResetRunID
	}
	if id := st.ResetRunID(); id != "" {
		out[0] += " resetTo=" + id
	}
	for _, s := range st.Steps {
		line := fmt.Sprintf("step %s phase=%s", s.ID, s.Phase)
		if s.Phase != PhaseWaiting {
			a := s.Attempt
			line += fmt.Sprintf(" %s#%d %s first=%s", a.Method, a.Number, a.State, rel(a.FirstAt))
			if a.State == AttemptPending {
				line += " notBefore=" + rel(a.NotBefore)
			} else {
				line += fmt.Sprintf(" epoch=%d timeoutAt=%s", a.Epoch, rel(a.TimeoutAt))
			}
		}
		if s.ParentID != "" {
			line += " parent=" + s.ParentID
		}
		if f := s.WaitForFailed; f != nil {
			line += fmt.Sprintf(" waitForFailed=%s:%s", f.Type, f.Message)
		}
		out = append(out, line)
		if f := s.LastFailure; f != nil {
			out = append(out, fmt.Sprintf("  lastFailure %s#%d at %s %s: %s stack=%q", f.Method, f.Attempt, rel(f.At), f.Type, f.Message, f.Stack))
		}
		if w := s.Wait; w != nil {
			out = append(out, fmt.Sprintf("  wait %s done=%v fired=%v", w.Mode, w.Done(), w.FiredTimers()))
			for i, c := range w.Conditions {
				line := fmt.Sprintf("    [%d] ", i)
				if c.Kind == CondTimer {
					line += fmt.Sprintf("timer #%d at=%s", c.TimerIndex, rel(c.FireAt))
				} else if sf := c.SubFlow; sf != nil {
					line += fmt.Sprintf("subflow #%d %s type=%s reuse=%s", sf.Index, sf.FlowID, sf.Spec.FlowType, sf.Spec.Reuse)
					if sf.RunID != "" {
						line += " run=" + sf.RunID
					}
					if r := sf.Result; r != nil {
						line += fmt.Sprintf(" result=%s", r.Status)
						if n := len(r.Outputs); n > 0 {
							line += fmt.Sprintf(" out=%s", r.Outputs[n-1].Value.Data)
						}
					}
				} else {
					line += fmt.Sprintf("channel %s %s min=%d max=%d", c.Channel, c.Bound, c.Min, c.Max)
				}
				if c.ID != "" {
					line += " id=" + c.ID
				}
				if c.Satisfied {
					line += " satisfied"
				}
				if c.Skipped {
					line += " skipped"
				}
				if c.Kind == CondChannel && c.Satisfied {
					line += " got=" + messages(c.Messages)
				}
				out = append(out, line)
			}
		}
	}
	for _, ch := range sortedKeys(st.Channels) {
		out = append(out, fmt.Sprintf("queue %s %s", ch, messages(st.Channels[ch])))
	}
	for _, k := range sortedKeys(st.Attributes) {
		out = append(out, fmt.Sprintf("attr %s=%s", k, st.Attributes[k].Data))
	}
	for _, o := range st.Outputs {
		out = append(out, fmt.Sprintf("output %s %s=%s", o.StepExecID, o.StepType, o.Value.Data))
	}
	if ids := st.PublishRequestIDs; len(ids) > 0 {
		out = append(out, fmt.Sprintf("publish request IDs %v", ids))
	}
	if ids := st.RPCCallIDs; len(ids) > 0 {
		out = append(out, fmt.Sprintf("committed RPC calls %v", ids))
	}
	if p := st.Parent; p != nil {
		out = append(out, fmt.Sprintf("parent %s run=%s step=%s index=%d", p.FlowID, p.RunID, p.StepExecID, p.Index))
	}
	for _, l := range st.RPCLocks {
		out = append(out, fmt.Sprintf("rpc lock %s %s %v epoch=%d", l.CallID, l.Name, l.Locks, l.Epoch))
	}
	for _, s := range st.Steps {
		if held := s.heldLocks(); len(held) > 0 {
			out = append(out, fmt.Sprintf("step lock %s %v", s.ID, held))
		}
	}
	if c := st.Close; c != nil {
		out = append(out, fmt.Sprintf("closed at %s %s %s %q", rel(st.ClosedAt), c.Status, c.ErrorType, c.Message))
	}
	return out
}

func messages(ms []Message) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%d:%s", m.Seq, m.Value.Data)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
