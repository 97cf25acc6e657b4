package engine

import (
	"fmt"
	"strings"
	"time"
)

// command turns one script line into a command, or runs a harness-only
// command and returns its output.
func (h *harness) command(name string, kv map[string]string, pos []arg) (Command, []string, error) {
	first := ""
	if len(pos) > 0 && pos[0].key == "" {
		first = pos[0].val
	}
	switch name {
	case "config":
		opt := func(k string) int {
			if v, ok := kv[k]; ok {
				return atoi(v)
			}
			return 0
		}
		h.e = New(Config{MaxPayloadBytes: opt("maxPayload"), MaxRequestBytes: opt("maxRequest"),
			MaxFlowAttributeBytes: opt("maxAttrs"), ContinueAsNewHistoryEvents: opt("continueAt")})
		return nil, nil, nil
	case "def":
		h.def = parseDef(kv, pos)
		return nil, nil, nil
	case "typedef":
		// The definition the node's registry holds for another flow type
		// (a subflow's, E31).
		d := parseDef(kv, pos)
		h.defs[d.Type] = d
		return nil, nil, nil
	case "use":
		h.use(first)
		return nil, []string{"flow " + first}, nil
	case "link":
		// "link crash": the parent's updates are lost (the node crashed
		// after the child's start was durable, before the link was).
		return nil, h.link(first == "crash"), nil
	case "notify":
		upd, ok := h.st.ParentNotice()
		if !ok {
			return nil, []string{"(no parent notice)"}, nil
		}
		return nil, h.decideOn(upd.FlowID, upd), nil
	case "nodef":
		h.def = nil
		return nil, nil, nil
	case "setdef":
		c := SetDefinition{FlowID: h.flowID, Definition: h.def}
		for _, p := range pos {
			if k, ok := strings.CutPrefix(p.key, "defaults:"); ok {
				if c.Defaults == nil {
					c.Defaults = &StepOptions{}
				}
				setOption(c.Defaults, k, p.val)
			}
		}
		return c, nil, nil
	case "tick":
		h.now = h.now.Add(dur(first))
		return nil, nil, nil
	case "at":
		h.now = base.Add(dur(first))
		return nil, nil, nil
	case "epoch":
		h.epoch = uint64(atoi(first))
		return nil, nil, nil
	case "start":
		return h.start(kv, pos), nil, nil
	case "dispatch":
		tok := h.token(first, "", kv, true)
		h.tokens[first] = tok
		_, async := kv["async"]
		for _, p := range pos {
			async = async || p.val == "async"
		}
		return TaskStarted{Token: tok, Async: async}, nil, nil
	case "waitfor":
		tok := h.token(first, MethodWaitFor, kv, false)
		w, staged, locals := parseWait(pos[1:])
		return WaitForResult{Token: tok, Wait: w, Staged: staged, Locals: locals}, nil, nil
	case "execute":
		tok := h.token(first, MethodExecute, kv, false)
		dec, staged := parseDecision(pos[1:])
		return ExecuteResult{Token: tok, Decision: dec, Staged: staged}, nil, nil
	case "fail":
		tok := h.token(first, "", kv, false)
		c := TaskFailed{Token: tok, Failure: Failure{Type: kv["type"], Message: kv["msg"], Stack: kv["stack"],
			NonRetryable: kv["nonretryable"] == "true"}}
		if ra, ok := kv["retryAfter"]; ok {
			d := dur(ra)
			c.RetryAfter = &d
		}
		return c, nil, nil
	case "timer":
		return h.timer(first, pos, kv), nil, nil
	case "skip":
		c := SkipTimer{FlowID: h.flowID, StepExecID: first, TimerID: kv["id"]}
		if i, ok := kv["index"]; ok {
			c.TimerIndex = atoi(i)
		}
		return c, nil, nil
	case "publish":
		c := PublishToChannel{FlowID: h.flowID, RunID: kv["run"], RequestID: kv["req"]}
		if n, ok := kv["reqlen"]; ok {
			c.RequestID = strings.Repeat("r", atoi(n))
		}
		for _, p := range pos {
			if p.key != "run" && p.key != "req" && p.key != "reqlen" {
				c.Messages = append(c.Messages, Publish{Channel: p.key, Value: val(p.val)})
			}
		}
		return c, nil, nil
	case "setattr":
		c := SetAttributes{FlowID: h.flowID}
		for _, p := range pos {
			c.Attributes = append(c.Attributes, AttributeWrite{Name: p.key, Value: val(p.val)})
		}
		return c, nil, nil
	case "reset":
		// E37: "reset run=R beginning | type=T | exec=ID [beforeExecute] |
		// time=D (after base) [skip] [reason=...] [newrun=ID] [req=ID]".
		c := ResetFlow{FlowID: h.flowID, RunID: kv["run"], NewRunID: h.nextRunID(), Reason: kv["reason"],
			RequestID: kv["req"], Definition: h.def}
		if v, ok := kv["newrun"]; ok {
			c.NewRunID = v
		}
		for _, p := range pos {
			switch p.val {
			case "beginning":
				c.Point.Kind = ResetBeginning
			case "beforeExecute":
				c.Point.BeforeExecute = true
			case "skip":
				c.SkipReapply = true
			}
		}
		if v, ok := kv["type"]; ok {
			c.Point.Kind, c.Point.StepType = ResetStepType, v
		}
		if v, ok := kv["exec"]; ok {
			c.Point.Kind, c.Point.StepExecID = ResetStepExecution, v
		}
		if v, ok := kv["time"]; ok {
			c.Point.Kind, c.Point.Time = ResetEventTime, base.Add(dur(v))
		}
		if v, ok := kv["kind"]; ok {
			c.Point.Kind = ResetPointKind(v)
		}
		return c, nil, nil
	case "continue":
		// E37: "continue [run=R] [reason=TEXT] [req=ID]"; the run
		// defaults to the latest.
		run := kv["run"]
		if run == "" && h.st != nil {
			run = h.st.RunID
		}
		if run == "none" {
			run = ""
		}
		return ContinueAsNew{FlowID: h.flowID, RunID: run, Reason: kv["reason"], RequestID: kv["req"]}, nil, nil
	case "stop":
		return StopFlow{FlowID: h.flowID, RunID: kv["run"], Kind: StopKind(strings.ToUpper(first)), Reason: kv["reason"]}, nil, nil
	case "rpc":
		return h.rpc(first, kv, pos)
	case "rpclock":
		// E30: "rpclock NAME locks=a|b [call=ID]" takes a call's locks;
		// "rpcdone [out=...] [attr:...]" returns its result, and
		// "rpcunlock [reason=...]" releases them without one.
		h.calls++
		call := InvokeRPC{FlowID: h.flowID, CallID: fmt.Sprintf("c%d", h.calls), Name: first, Input: val(kv["input"]),
			Locks: strings.Split(kv["locks"], "|")}
		if v, ok := kv["call"]; ok {
			call.CallID = v
		}
		h.lockedCall = &call
		return LockRPC{Call: call, Epoch: h.epoch}, nil, nil
	case "rpcdone":
		if h.lockedCall == nil {
			return nil, nil, fmt.Errorf("rpcdone: no rpclock yet")
		}
		if first == "late" {
			// The worker's result arrives after the locks were released:
			// its task was built while it held them.
			c := *h.lockedCall
			tok := Token{Epoch: h.epoch, FlowID: h.flowID, RunID: h.st.RunID, Method: MethodRPC, CallID: c.CallID}
			return RPCResult{Token: tok, Name: c.Name, StartedAt: h.now, Output: val(kv["out"]), Locked: true}, nil, nil
		}
		return h.rpcCall(*h.lockedCall, kv, pos)
	case "rpcunlock":
		if h.lockedCall == nil {
			return nil, nil, fmt.Errorf("rpcunlock: no rpclock yet")
		}
		return UnlockRPC{FlowID: h.flowID, CallID: h.lockedCall.CallID, Reason: kv["reason"]}, nil, nil
	case "heartbeat":
		// heartbeat STEP [details=X]: a heartbeat with details from the
		// attempt last handed out for STEP.
		return Heartbeat{Token: h.token(first, "", kv, false), Details: val(kv["details"])}, nil, nil
	case "rpcresend":
		// The worker sends the last RPC result again (its stream broke
		// before the TaskAck); "noname" is what the node submits once it
		// forgot the call (no name, no input), "epoch=N" overrides the
		// token's epoch, "call=ID" its call ID (a call that never
		// committed).
		if h.lastRPC == nil {
			return nil, nil, fmt.Errorf("rpcresend: no RPC result yet")
		}
		c := *h.lastRPC
		if first == "noname" {
			c.Name, c.Input, c.StartedAt = "", Value{}, time.Time{}
		}
		if v, ok := kv["epoch"]; ok {
			c.Token.Epoch = uint64(atoi(v))
		}
		if v, ok := kv["call"]; ok {
			c.Token.CallID = v
		}
		return c, nil, nil
	case "reload":
		// A restart: the state is rebuilt from the logged records ("log")
		// or read back from its encoding ("snapshot").
		switch first {
		case "log":
			h.st = h.replayed(h.flowID)
		case "snapshot":
			st, err := UnmarshalState(mustMarshalState(h.st))
			if err != nil {
				return nil, nil, err
			}
			h.st = st
		default:
			return nil, nil, fmt.Errorf("reload log|snapshot")
		}
		return nil, nil, nil
	case "recover":
		return RecoverAttempts{FlowID: h.flowID, Epoch: uint64(atoi(kv["epoch"]))}, nil, nil
	case "state":
		return nil, summarize(h.st), nil
	case "tasks":
		var out []string
		for _, r := range h.st.PendingTasks() {
			out = append(out, formatEffect(DispatchTask{r}))
		}
		return nil, orNone(out), nil
	case "timers":
		var out []string
		for _, a := range h.st.Timers() {
			out = append(out, formatEffect(a))
		}
		return nil, orNone(out), nil
	case "task":
		task, err := h.st.Task(h.token(first, "", kv, false))
		if err != nil {
			return nil, []string{"error: " + err.Error()}, nil
		}
		return nil, []string{render(task)}, nil
	case "history":
		var out []string
		for _, ev := range h.st.History {
			out = append(out, render(ev))
		}
		return nil, out, nil
	case "result":
		if h.st == nil {
			return nil, []string{"(no state)"}, nil
		}
		r, ok := h.st.Result()
		if !ok {
			return nil, []string{"(running)"}, nil
		}
		return nil, []string{render(r)}, nil
	}
	return nil, nil, fmt.Errorf("unknown script command %q", name)
}

func orNone(lines []string) []string {
	if len(lines) == 0 {
		return []string{"(none)"}
	}
	return lines
}

func (h *harness) start(kv map[string]string, pos []arg) Command {
	c := StartFlow{FlowID: h.flowID, RunID: h.nextRunID(), FlowType: "order",
		StartStep: kv["step"], Input: val(kv["input"]), RequestID: kv["req"],
		IDReusePolicy: IDReusePolicy(kv["reuse"]), TimeoutPolicy: TimeoutPolicy(kv["timeoutPolicy"]),
		Definition: h.def}
	if h.def != nil {
		c.FlowType = h.def.Type
	}
	if v, ok := kv["run"]; ok {
		c.RunID = v
	}
	if v, ok := kv["flow"]; ok {
		c.FlowID = v
	}
	if v, ok := kv["type"]; ok {
		c.FlowType = v
	}
	if v, ok := kv["timeout"]; ok {
		c.Timeout = dur(v)
	}
	if v, ok := kv["delay"]; ok {
		c.StartDelay = dur(v)
	}
	if v, ok := kv["handler"]; ok {
		c.TimeoutHandler = &TimeoutHandler{StepType: v}
		if d, ok := kv["handlerDeadline"]; ok {
			c.TimeoutHandler.Deadline = dur(d)
		}
	}
	for _, p := range pos {
		if k, ok := strings.CutPrefix(p.key, "fretry:"); ok {
			o := &StepOptions{Execute: &MethodOptions{Retry: c.Retry}}
			setOption(o, "ex."+k, p.val)
			c.Retry = o.Execute.Retry
		}
		if k, ok := strings.CutPrefix(p.key, "attr:"); ok {
			c.Attributes = append(c.Attributes, AttributeWrite{Name: k, Value: val(p.val)})
		}
		if k, ok := strings.CutPrefix(p.key, "config:"); ok {
			if c.Config == nil {
				c.Config = &StepOptions{}
			}
			setOption(c.Config, k, p.val)
		}
		if k, ok := strings.CutPrefix(p.key, "sopt:"); ok {
			if c.StartOptions == nil {
				c.StartOptions = &StepOptions{}
			}
			setOption(c.StartOptions, k, p.val)
		}
	}
	return c
}

// token returns the token last handed out for step (dispatch makes a fresh
// one from the step's current attempt), with epoch=, attempt=, run= and
// method= overrides to build stale tokens.
func (h *harness) token(step string, m Method, kv map[string]string, fresh bool) Token {
	tok, ok := h.tokens[step]
	if fresh || !ok {
		tok = Token{Epoch: h.epoch, StepExecID: step, Method: m, Attempt: 1}
		if h.st != nil {
			tok.FlowID, tok.RunID = h.st.FlowID, h.st.RunID
		}
		if s := h.st.Step(step); s != nil && s.Phase != PhaseWaiting {
			tok.Method, tok.Attempt = s.Attempt.Method, s.Attempt.Number
		}
	}
	if m != "" {
		tok.Method = m
	}
	if v, ok := kv["epoch"]; ok {
		tok.Epoch = uint64(atoi(v))
	}
	if v, ok := kv["attempt"]; ok {
		tok.Attempt = atoi(v)
	}
	if v, ok := kv["run"]; ok {
		tok.RunID = v
	}
	if v, ok := kv["method"]; ok {
		tok.Method = Method(v)
	}
	return tok
}

func (h *harness) timer(first string, pos []arg, kv map[string]string) Command {
	c := TimerFired{FlowID: h.flowID, RunID: h.st.RunID}
	if v, ok := kv["run"]; ok {
		c.RunID = v
	}
	switch first {
	case "flow":
		c.Timer = Timer{Kind: TimerFlowTimeout}
	case "handler":
		c.Timer = Timer{Kind: TimerTimeoutHandler}
	case "attempt", "heartbeat":
		step := pos[1].val
		c.Timer = Timer{Kind: TimerAttemptTimeout, StepExecID: step}
		if first == "heartbeat" {
			c.Timer.Kind = TimerHeartbeat
		}
		if s := h.st.Step(step); s != nil {
			c.Timer.Method, c.Timer.Attempt = s.Attempt.Method, s.Attempt.Number
		}
		if v, ok := kv["attempt"]; ok {
			c.Timer.Attempt = atoi(v)
		}
	default:
		c.Timer = Timer{Kind: TimerWait, StepExecID: first, Index: atoi(pos[1].val)}
	}
	return c
}

func (h *harness) rpc(name string, kv map[string]string, pos []arg) (Command, []string, error) {
	h.calls++
	call := InvokeRPC{FlowID: h.flowID, RunID: kv["run"], CallID: fmt.Sprintf("c%d", h.calls), Name: name, Input: val(kv["input"])}
	if v, ok := kv["call"]; ok {
		call.CallID = v
	}
	return h.rpcCall(call, kv, pos)
}

// rpcCall builds call's task and its worker's result.
func (h *harness) rpcCall(call InvokeRPC, kv map[string]string, pos []arg) (Command, []string, error) {
	task, err := h.e.RPCTask(h.st, call, h.epoch)
	if err != nil {
		return nil, []string{"error: " + err.Error()}, nil
	}
	out := []string{"task " + render(task)}
	c := RPCResult{Token: task.Token, Name: call.Name, StartedAt: h.now, Input: call.Input, Output: val(kv["out"]),
		Locked: len(call.Locks) > 0}
	for _, p := range pos {
		switch {
		case p.val == "error":
			return nil, append(out, "(worker error: nothing to commit)"), nil
		case strings.HasPrefix(p.key, "attr:"):
			c.Staged.Attributes = append(c.Staged.Attributes, AttributeWrite{Name: p.key[5:], Value: val(p.val)})
		case strings.HasPrefix(p.key, "pub:"):
			c.Staged.Publishes = append(c.Staged.Publishes, Publish{Channel: p.key[4:], Value: val(p.val)})
		case strings.HasPrefix(p.key, "event:"):
			if c.Staged.StagedEvents == nil {
				c.Staged.StagedEvents = &StagedEvents{}
			}
			c.Staged.Events = append(c.Staged.Events, UserEvent{Name: p.key[6:], Value: val(p.val)})
		case p.key == "goto":
			st, in, _ := strings.Cut(p.val, ":")
			c.Movements = append(c.Movements, Movement{StepType: st, Input: val(in)})
		case p.key == "cancel":
			c.CancelSteps = append(c.CancelSteps, splitList(p.val)...)
		}
	}
	h.lastRPC = &c
	return c, out, nil
}

// parseDef reads "def type=order steps=A:wf,B rpcs=x attrs=a,b channels=c
// indexed=a:KEYWORD,b:INT:Amount opt:B:key=val".
func parseDef(kv map[string]string, pos []arg) *FlowDefinition {
	d := &FlowDefinition{Type: "order", Steps: map[string]StepDef{}}
	if v, ok := kv["type"]; ok {
		d.Type = v
	}
	d.Start = kv["start"]
	for _, s := range splitList(kv["steps"]) {
		name, wf, _ := strings.Cut(s, ":")
		d.Steps[name] = StepDef{HasWaitFor: wf == "wf"}
	}
	d.RPCs, d.Attributes, d.Channels = splitList(kv["rpcs"]), splitList(kv["attrs"]), splitList(kv["channels"])
	for _, s := range splitList(kv["indexed"]) { // attr:TYPE[:key]
		parts := strings.SplitN(s, ":", 3)
		ia := IndexedAttribute{Key: parts[0], Type: IndexType(parts[1])}
		if len(parts) == 3 {
			ia.Key = parts[2]
		}
		if d.Indexed == nil {
			d.Indexed = map[string]IndexedAttribute{}
		}
		d.Indexed[parts[0]] = ia
	}
	for _, p := range pos {
		rest, ok := strings.CutPrefix(p.key, "opt:")
		if !ok {
			continue
		}
		step, key, _ := strings.Cut(rest, ":")
		sd := d.Steps[step]
		if sd.Options == nil {
			sd.Options = &StepOptions{}
		}
		setOption(sd.Options, key, p.val)
		d.Steps[step] = sd
	}
	return d
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// setOption sets one option: "[wf.|ex.]key" for one method or both.
func setOption(o *StepOptions, key, v string) {
	switch key {
	case "waitForFailure":
		o.WaitForFailure = FailurePolicy(v)
		return
	case "recovery":
		o.RecoveryStep = v
		return
	}
	methods := []**MethodOptions{&o.WaitFor, &o.Execute}
	if k, ok := strings.CutPrefix(key, "wf."); ok {
		key, methods = k, methods[:1]
	} else if k, ok := strings.CutPrefix(key, "ex."); ok {
		key, methods = k, methods[1:]
	}
	for _, mp := range methods {
		if *mp == nil {
			*mp = &MethodOptions{}
		}
		m := *mp
		if m.Retry == nil && key != "timeout" && key != "durability" && key != "locks" && key != "heartbeat" {
			m.Retry = &RetryOptions{}
		}
		switch key {
		case "timeout":
			d := dur(v)
			m.Timeout = &d
		case "durability":
			m.Durability = Durability(v)
		case "locks":
			m.Locks = strings.Split(v, "|")
		case "heartbeat":
			d := dur(v)
			m.HeartbeatTimeout = &d
		case "initial":
			d := dur(v)
			m.Retry.InitialInterval = &d
		case "coef":
			var f float64
			fmt.Sscan(v, &f)
			m.Retry.Coefficient = &f
		case "maxInterval":
			d := dur(v)
			m.Retry.MaxInterval = &d
		case "maxAttempts":
			n := atoi(v)
			m.Retry.MaxAttempts = &n
		case "maxTotal":
			d := dur(v)
			m.Retry.MaxTotal = &d
		default:
			panic("unknown option " + key)
		}
	}
}

// parseWait reads "none" | "until|all|any COND..." plus staged writes.
// Conditions: timer:10s[#id], ch:NAME:one|n=3|atleast=2|atmost=2|range=1-3[#id].
// "combo" is ANY_COMBINATION, with "group=ID,ID" per group (E32);
// "local:KEY=VAL" writes a step-execution local.
func parseWait(pos []arg) (*Wait, Staged, map[string]Value) {
	var w *Wait
	var staged Staged
	var locals map[string]Value
	for _, p := range pos {
		if parseStaged(p, &staged) {
			continue
		}
		if k, ok := strings.CutPrefix(p.key, "local:"); ok {
			if locals == nil {
				locals = map[string]Value{}
			}
			locals[k] = val(p.val)
			continue
		}
		if p.key == "group" {
			w.Groups = append(w.Groups, splitList(p.val))
			continue
		}
		if p.key == "" && p.val == "combo" {
			w = &Wait{Mode: AnyCombination}
			continue
		}
		word := p.val
		if p.key != "" {
			word = p.key + "=" + p.val
		}
		switch word {
		case "none":
			continue
		case "until", "all", "any", "bogus":
			w = &Wait{Mode: map[string]WaitMode{"until": Until, "all": AllOf, "any": AnyOf, "bogus": "BOGUS"}[word]}
			continue
		}
		body, id, _ := strings.Cut(word, "#")
		c := Condition{ID: id}
		if d, ok := strings.CutPrefix(body, "timer:"); ok {
			td := dur(d)
			c.Timer = &td
		} else if rest, ok := strings.CutPrefix(body, "ch:"); ok {
			name, bound, _ := strings.Cut(rest, ":")
			cc := &ChannelCondition{Channel: name}
			b, n, _ := strings.Cut(bound, "=")
			switch b {
			case "one":
				cc.Bound = ForOne
			case "n":
				cc.Bound, cc.N = ForN, atoi(n)
			case "atleast":
				cc.Bound, cc.N = AtLeast, atoi(n)
			case "atmost":
				cc.Bound, cc.N = AtMost, atoi(n)
			case "range":
				lo, hi, _ := strings.Cut(n, "-")
				cc.Bound, cc.N, cc.M = AtLeastAtMost, atoi(lo), atoi(hi)
			default:
				cc.Bound = Bound(b)
			}
			c.Channel = cc
		} else if rest, ok := strings.CutPrefix(body, "sub:"); ok {
			// sub:TYPE[:INPUT[:REUSE]] (E31)
			parts := strings.Split(rest, ":")
			sf := &SubFlowCondition{FlowType: parts[0]}
			if len(parts) > 1 {
				sf.Input = val(parts[1])
			}
			if len(parts) > 2 {
				sf.Reuse = SubFlowReuse(parts[2])
			}
			c.SubFlow = sf
		} else {
			panic("bad condition " + word)
		}
		w.Conditions = append(w.Conditions, c)
	}
	return w, staged, locals
}

func parseStaged(p arg, s *Staged) bool {
	if k, ok := strings.CutPrefix(p.key, "attr:"); ok {
		s.Attributes = append(s.Attributes, AttributeWrite{Name: k, Value: val(p.val)})
		return true
	}
	if k, ok := strings.CutPrefix(p.key, "pub:"); ok {
		s.Publishes = append(s.Publishes, Publish{Channel: k, Value: val(p.val)})
		return true
	}
	if k, ok := strings.CutPrefix(p.key, "event:"); ok {
		if s.StagedEvents == nil {
			s.StagedEvents = &StagedEvents{}
		}
		s.Events = append(s.Events, UserEvent{Name: k, Value: val(p.val)})
		return true
	}
	return p.key == "epoch" || p.key == "attempt" || p.key == "run" || p.key == "method"
}

// parseDecision reads "goto B:in [skipwf] [mopt:key=val] ..." | "complete
// OUT" | "force-complete OUT" | "fail REASON" | "deadend" | "kind=X", plus
// staged writes.
func parseDecision(pos []arg) (Decision, Staged) {
	var d Decision
	var staged Staged
	for i := 0; i < len(pos); i++ {
		p := pos[i]
		if parseStaged(p, &staged) {
			continue
		}
		next := func() string {
			if i+1 < len(pos) && pos[i+1].key == "" {
				i++
				return pos[i].val
			}
			return ""
		}
		switch {
		case p.key == "kind":
			d.Kind = DecisionKind(p.val)
		case p.key == "goto":
			if d.Kind == "" {
				d.Kind = DecideMovements
			}
			st, in, _ := strings.Cut(p.val, ":")
			d.Movements = append(d.Movements, Movement{StepType: st, Input: val(in)})
		case p.key == "output":
			d.Output = val(p.val)
		case p.key == "ifempty":
			// ifempty=CH,CH output=OUT goto=B:in ...: E32's
			// ForceCompleteIfChannelsEmpty ("-" for no channel).
			d.Kind = DecideForceCompleteIfChannelsEmpty
			d.IfChannelsEmpty = &IfChannelsEmpty{}
			if p.val != "-" {
				d.Channels = splitList(p.val)
			}
		case p.key == "cancel", p.key == "cancelsib":
			if d.Cancel == nil {
				d.Cancel = &CancelSelector{}
			}
			if p.key == "cancel" {
				d.Cancel.Steps = append(d.Cancel.Steps, splitList(p.val)...)
			} else {
				d.Cancel.Siblings = append(d.Cancel.Siblings, splitList(p.val)...)
			}
		case strings.HasPrefix(p.key, "mopt:"):
			m := &d.Movements[len(d.Movements)-1]
			if m.Options == nil {
				m.Options = &StepOptions{}
			}
			setOption(m.Options, p.key[5:], p.val)
		case p.val == "skipwf":
			d.Movements[len(d.Movements)-1].SkipWaitFor = true
		case p.val == "complete":
			d.Kind, d.Output = DecideGracefulComplete, val(next())
		case p.val == "force-complete":
			d.Kind, d.Output = DecideForceComplete, val(next())
		case p.val == "fail":
			d.Kind, d.Reason = DecideForceFail, next()
		case p.val == "deadend":
			d.Kind = DecideDeadEnd
		case p.val == "continue":
			d.ContinueAsNew = true // E37
		case p.key == "reason":
			d.Reason = p.val
		default:
			panic("bad decision word " + p.val)
		}
	}
	return d, staged
}
