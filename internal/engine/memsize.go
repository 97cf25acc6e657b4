package engine

// Memory estimates for the node's caches (issue 11): the bytes a state or a
// history event keeps reachable, counting every value and text plus a
// fixed overhead per element for the structs, maps and slices around them.
// They are estimates for eviction, not exact accounting; what matters is
// that they grow with the values, which dominate a large flow's memory.
const (
	memState    = 1024 // a FlowState with its maps, definition and config
	memStep     = 512  // a StepExec with its options
	memEvent    = 256  // a HistoryEvent
	memElement  = 64   // an attribute, message, movement, output or ID
	memFailText = 3    // type, message and stack of a Failure
)

func valueMem(v Value) int { return memElement + len(v.Type) + len(v.Data) + len(v.Ref) }

func failureMem(f *Failure) int {
	if f == nil {
		return 0
	}
	return memFailText*memElement + len(f.Type) + len(f.Message) + len(f.Stack)
}

func writesMem(ws []AttributeWrite) int {
	n := 0
	for _, w := range ws {
		n += len(w.Name) + valueMem(w.Value)
	}
	return n
}

func publishesMem(ps []Publish) int {
	n := 0
	for _, p := range ps {
		n += len(p.Channel) + valueMem(p.Value)
	}
	return n
}

func movementsMem(ms []Movement) int {
	n := 0
	for _, m := range ms {
		n += len(m.StepType) + valueMem(m.Input)
	}
	return n
}

func waitMem(w *StoredWait) int {
	if w == nil {
		return 0
	}
	n := 0
	for _, c := range w.Conditions {
		n += memElement
		for _, m := range c.Messages {
			n += valueMem(m.Value)
		}
	}
	return n
}

// MemoryBytes estimates the memory st keeps reachable without its history
// (see HistoryMemoryBytes): attributes, queued messages, step executions,
// outputs and the remembered request and call IDs.
func (st *FlowState) MemoryBytes() int {
	if st == nil {
		return 0
	}
	n := memState
	for k, v := range st.Attributes {
		n += len(k) + valueMem(v)
	}
	for ch, q := range st.Channels {
		n += len(ch)
		for _, m := range q {
			n += valueMem(m.Value)
		}
	}
	for _, s := range st.Steps {
		n += memStep + valueMem(s.Input) + waitMem(s.Wait)
		if s.LastFailure != nil {
			n += failureMem(&s.LastFailure.Failure)
		}
		if s.WaitForFailed != nil {
			n += failureMem(&s.WaitForFailed.Failure)
		}
	}
	for _, o := range st.Outputs {
		n += len(o.StepType) + len(o.StepExecID) + valueMem(o.Value)
	}
	for _, id := range st.PublishRequestIDs {
		n += memElement + len(id)
	}
	for _, id := range st.RPCCallIDs {
		n += memElement + len(id)
	}
	if st.Close != nil {
		n += len(st.Close.Message)
	}
	return n
}

// HistoryMemoryBytes estimates the memory history events keep reachable.
// Events never change once appended, so a caller may add the estimate of
// the events appended since it last looked to what it had.
func HistoryMemoryBytes(events []*HistoryEvent) int {
	n := 0
	for _, ev := range events {
		n += memEvent + failureMem(ev.Failure) + waitMem(ev.Wait) +
			valueMem(ev.Input) + valueMem(ev.Output) + movementsMem(ev.Movements) +
			writesMem(ev.Staged.Attributes) + publishesMem(ev.Staged.Publishes) +
			publishesMem(ev.Publishes) + writesMem(ev.Attributes)
		if d := ev.Decision; d != nil {
			n += valueMem(d.Output) + movementsMem(d.Movements) + len(d.Reason)
		}
		if s := ev.Start; s != nil {
			n += writesMem(s.Attributes)
			if s.StartStep != nil {
				n += valueMem(s.StartStep.Input)
			}
		}
		if ev.Close != nil {
			n += len(ev.Close.Message)
		}
	}
	return n
}
