package engine

import (
	"fmt"
	"slices"
)

// E32, beside AnyCombination waits (combination.go): conditional close,
// step-execution locals and user events.
//
// ForceCompleteIfChannelsEmpty is decided against the state the decision
// commits on, in the same Decide call: if every named channel's queue is
// empty the flow force-completes with the output, else the fallback
// movements are created. A publish is decided before or after it, never
// in between: before, its message is queued and the fallback runs (and
// sees it); after, the run is closed and the publish is refused with
// ErrFlowClosed. The record carries what Decide found (ChannelsEmpty), so
// replay never re-evaluates the queues.
//
// Step-execution locals: a WaitFor result may carry a small keyed map;
// its WaitForCompleted record holds them and they live on the step's
// StoredWait (a Wait without conditions when the WaitFor returned none),
// so every Execute attempt of that execution gets them in its task, also
// after a restart, a snapshot or a takeover. At most MaxStepLocals keys of
// at most MaxStepLocalKeyBytes each, MaxStepLocalBytes in total (keys and
// values); more fails the WaitFor attempt with INVALID_USER_FLOW_CODE
// naming the limit.
//
// User events: a handler's staged writes may carry events (a name and a
// value); each becomes a USER_EVENT in history right after the event of
// the completion that committed it (WaitFor, Execute or RPC). At most
// MaxUserEvents per result, names of 1 to MaxUserEventNameBytes bytes,
// values within the payload and request limits.
const (
	MaxStepLocals         = 64
	MaxStepLocalKeyBytes  = 256
	MaxStepLocalBytes     = 64 << 10
	MaxUserEvents         = 100
	MaxUserEventNameBytes = 256
)

// effectiveKind is the decision an ExecuteCompleted applies: a
// FORCE_COMPLETE_IF_CHANNELS_EMPTY resolves to FORCE_COMPLETE or
// MOVEMENTS by what Decide found.
func (b ExecuteCompleted) effectiveKind() DecisionKind {
	if b.Kind != DecideForceCompleteIfChannelsEmpty {
		return b.Kind
	}
	if b.IfChannelsEmpty != nil && b.ChannelsEmpty {
		return DecideForceComplete
	}
	return DecideMovements
}

// channelsEmpty reports whether every named channel's queue is empty.
func (st *FlowState) channelsEmpty(names []string) bool {
	for _, n := range names {
		if len(st.Channels[n]) > 0 {
			return false
		}
	}
	return true
}

// checkCloseIfEmpty validates a FORCE_COMPLETE_IF_CHANNELS_EMPTY decision.
func (d *decider) checkCloseIfEmpty(dec Decision) error {
	chans := dec.CloseIfEmpty().Channels
	if len(chans) == 0 {
		return invalidArg("decision.channels", "FORCE_COMPLETE_IF_CHANNELS_EMPTY needs at least one channel")
	}
	for i, ch := range chans {
		f := fmt.Sprintf("decision.channels[%d]", i)
		switch {
		case ch == "":
			return invalidArg(f, "empty channel name")
		case !d.channelDeclared(ch):
			return invalidArg(f, "channel %q is not declared", ch)
		case slices.Contains(chans[:i], ch):
			return invalidArg(f, "channel %q is named twice", ch)
		}
	}
	if len(dec.Movements) == 0 {
		return invalidArg("decision.movements", "FORCE_COMPLETE_IF_CHANNELS_EMPTY needs at least one fallback movement")
	}
	if err := d.checkMovements("decision.movements", dec.Movements); err != nil {
		return err
	}
	return d.checkValue("decision.output", dec.Output)
}

// checkLocals enforces the locals' limits.
func checkLocals(locals map[string]Value) error {
	if len(locals) > MaxStepLocals {
		return invalidArg("locals", "%d step-execution locals, at most %d are allowed", len(locals), MaxStepLocals)
	}
	n := 0
	for k, v := range locals {
		if k == "" {
			return invalidArg("locals", "a local has an empty key")
		}
		if len(k) > MaxStepLocalKeyBytes {
			return invalidArg("locals", "local key %.32q... is %d bytes, at most %d are allowed", k, len(k), MaxStepLocalKeyBytes)
		}
		n += len(k) + v.Len()
	}
	if n > MaxStepLocalBytes {
		return invalidArg("locals", "the step-execution locals total %d bytes, above the limit of %d bytes", n, MaxStepLocalBytes)
	}
	return nil
}

// localBytes is the value bytes of locals, for the request limit.
func localBytes(locals map[string]Value) int {
	n := 0
	for _, v := range locals {
		n += v.Len()
	}
	return n
}

// checkEvents validates a result's user events.
func (d *decider) checkEvents(field string, evs []UserEvent) error {
	if len(evs) > MaxUserEvents {
		return invalidArg(field, "%d events, at most %d per result are allowed", len(evs), MaxUserEvents)
	}
	for i, ev := range evs {
		f := fmt.Sprintf("%s[%d]", field, i)
		if ev.Name == "" {
			return invalidArg(f+".name", "must not be empty")
		}
		if len(ev.Name) > MaxUserEventNameBytes {
			return invalidArg(f+".name", "is %d bytes, at most %d are allowed", len(ev.Name), MaxUserEventNameBytes)
		}
		if err := d.checkValue(f+".value", ev.Value); err != nil {
			return err
		}
	}
	return nil
}

func eventBytes(evs []UserEvent) int {
	n := 0
	for _, ev := range evs {
		n += ev.Value.Len()
	}
	return n
}

// userEvents adds a completion's user events to history (E32).
func (st *FlowState) userEvents(rec Record, evs []UserEvent, stepExecID, stepType, rpc string) {
	for i := range evs {
		st.event(rec, HistoryEvent{Type: EventUser, StepExecID: stepExecID, StepType: stepType, RPC: rpc,
			Staged: Staged{StagedEvents: &StagedEvents{Events: evs[i : i+1 : i+1]}}})
	}
}
