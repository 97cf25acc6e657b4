package server

import (
	"fmt"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// waitIn converts a WaitFor's Wait (E15). No kind set means no wait. The
// engine validates the conditions; an invalid one fails the attempt with
// INVALID_USER_FLOW_CODE.
func waitIn(w *dexpb.Wait) (*engine.Wait, error) {
	var mode engine.WaitMode
	var conds []*dexpb.WaitCondition
	var groups [][]string
	switch k := w.GetKind().(type) {
	case nil:
		return nil, nil
	case *dexpb.Wait_Until:
		mode, conds = engine.Until, []*dexpb.WaitCondition{k.Until}
	case *dexpb.Wait_AllOf:
		mode, conds = engine.AllOf, k.AllOf.GetConditions()
	case *dexpb.Wait_AnyOf:
		mode, conds = engine.AnyOf, k.AnyOf.GetConditions()
		if len(conds) == 0 {
			return nil, argError("wait.anyOf.conditions", "must not be empty")
		}
	case *dexpb.Wait_AnyCombinationOf:
		mode, conds = engine.AnyCombination, k.AnyCombinationOf.GetConditions()
		if len(conds) == 0 {
			return nil, argError("wait.anyCombinationOf.conditions", "must not be empty")
		}
		groups = make([][]string, 0, len(k.AnyCombinationOf.GetGroups()))
		for _, g := range k.AnyCombinationOf.GetGroups() {
			groups = append(groups, g.GetConditionIds())
		}
	}
	out := &engine.Wait{Mode: mode, Groups: groups}
	for i, c := range conds {
		ec := engine.Condition{ID: c.GetId()}
		switch k := c.GetCondition().(type) {
		case *dexpb.WaitCondition_Timer:
			d, err := optDuration(fmt.Sprintf("wait.conditions[%d].timer.duration", i), k.Timer.GetDuration())
			if err != nil {
				return nil, err
			}
			if d == nil {
				var zero time.Duration
				d = &zero
			}
			ec.Timer = d
		case *dexpb.WaitCondition_Channel:
			cc, err := channelCondIn(fmt.Sprintf("wait.conditions[%d].channel", i), k.Channel)
			if err != nil {
				return nil, err
			}
			ec.Channel = cc
		case *dexpb.WaitCondition_SubFlow:
			sf, err := subFlowIn(fmt.Sprintf("wait.conditions[%d].subFlow", i), k.SubFlow)
			if err != nil {
				return nil, err
			}
			ec.SubFlow = sf
		}
		out.Conditions = append(out.Conditions, ec)
	}
	return out, nil
}

func channelCondIn(field string, c *dexpb.ChannelCondition) (*engine.ChannelCondition, error) {
	out := &engine.ChannelCondition{Channel: c.GetChannel()}
	switch c.GetBound() {
	case dexpb.ChannelBound_CHANNEL_BOUND_FOR_ONE:
		out.Bound = engine.ForOne
	case dexpb.ChannelBound_CHANNEL_BOUND_FOR_N:
		out.Bound, out.N = engine.ForN, int(c.GetN())
	case dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST:
		out.Bound, out.N = engine.AtLeast, int(c.GetN())
	case dexpb.ChannelBound_CHANNEL_BOUND_AT_MOST:
		out.Bound, out.N = engine.AtMost, int(c.GetN())
	case dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST_AT_MOST:
		out.Bound, out.N, out.M = engine.AtLeastAtMost, int(c.GetMin()), int(c.GetMax())
	default:
		return nil, argError(field+".bound", "must be set")
	}
	return out, nil
}

// waitOut renders a stored Wait as the Wait the WaitFor returned. Timer
// durations are not kept by the engine (only absolute fire times, which
// WaitState carries), so timer conditions come back without a duration.
func waitOut(w *engine.StoredWait) *dexpb.Wait {
	if w == nil || len(w.Conditions) == 0 {
		return nil
	}
	conds := make([]*dexpb.WaitCondition, 0, len(w.Conditions))
	for _, c := range w.Conditions {
		wc := &dexpb.WaitCondition{Id: c.ID}
		switch {
		case c.Kind == engine.CondTimer:
			wc.Condition = &dexpb.WaitCondition_Timer{Timer: &dexpb.TimerCondition{}}
		case c.SubFlow != nil:
			wc.Condition = &dexpb.WaitCondition_SubFlow{SubFlow: subFlowCondOut(c.SubFlow)}
		default:
			wc.Condition = &dexpb.WaitCondition_Channel{Channel: channelCondOut(c)}
		}
		conds = append(conds, wc)
	}
	switch w.Mode {
	case engine.AnyCombination:
		wc := &dexpb.WaitCombinations{Conditions: conds}
		for _, g := range w.Groups {
			ids := make([]string, 0, len(g))
			for _, i := range g {
				if i >= 0 && i < len(w.Conditions) {
					ids = append(ids, w.Conditions[i].ID)
				}
			}
			wc.Groups = append(wc.Groups, &dexpb.ConditionGroup{ConditionIds: ids})
		}
		return &dexpb.Wait{Kind: &dexpb.Wait_AnyCombinationOf{AnyCombinationOf: wc}}
	case engine.Until:
		if len(conds) == 1 {
			return &dexpb.Wait{Kind: &dexpb.Wait_Until{Until: conds[0]}}
		}
	case engine.AnyOf:
		return &dexpb.Wait{Kind: &dexpb.Wait_AnyOf{AnyOf: &dexpb.WaitConditions{Conditions: conds}}}
	}
	return &dexpb.Wait{Kind: &dexpb.Wait_AllOf{AllOf: &dexpb.WaitConditions{Conditions: conds}}}
}

func channelCondOut(c engine.StoredCondition) *dexpb.ChannelCondition {
	out := &dexpb.ChannelCondition{Channel: c.Channel}
	switch c.Bound {
	case engine.ForOne:
		out.Bound = dexpb.ChannelBound_CHANNEL_BOUND_FOR_ONE
	case engine.ForN:
		out.Bound, out.N = dexpb.ChannelBound_CHANNEL_BOUND_FOR_N, uint32(c.Min)
	case engine.AtLeast:
		out.Bound, out.N = dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST, uint32(c.Min)
	case engine.AtMost:
		out.Bound, out.N = dexpb.ChannelBound_CHANNEL_BOUND_AT_MOST, uint32(c.Max)
	case engine.AtLeastAtMost:
		out.Bound, out.Min, out.Max = dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST_AT_MOST, uint32(c.Min), uint32(c.Max)
	}
	return out
}

// resultsOut renders what an Execute learns about its satisfied Wait (E18).
func resultsOut(w *engine.StoredWait) *dexpb.ConditionResults {
	if w == nil {
		return nil
	}
	out := &dexpb.ConditionResults{}
	if g := w.Winner(); g >= 0 {
		wg := uint32(g) //nolint:gosec // a group index
		out.WinningGroup = &wg
	}
	ch := 0
	for _, c := range w.Conditions {
		if c.Kind == engine.CondTimer {
			out.Timers = append(out.Timers, &dexpb.TimerResult{TimerIndex: uint32(c.TimerIndex), ConditionId: c.ID,
				Fired: c.Satisfied, Skipped: c.Skipped})
			continue
		}
		if c.SubFlow != nil {
			out.SubFlows = append(out.SubFlows, subFlowResultOut(c))
			continue
		}
		r := &dexpb.ChannelResult{ChannelConditionIndex: uint32(ch), ConditionId: c.ID, Channel: c.Channel, Satisfied: c.Satisfied}
		for _, m := range c.Messages {
			r.Messages = append(r.Messages, valueOut(m.Value))
		}
		out.Channels = append(out.Channels, r)
		ch++
	}
	return out
}

// waitStateOut renders a stored Wait with the state of its conditions.
func waitStateOut(w *engine.StoredWait) *dexpb.WaitState {
	if w == nil || len(w.Conditions) == 0 { // no Wait (a Wait holding only locals, E32)
		return nil
	}
	done := w.Done()
	out := &dexpb.WaitState{Wait: waitOut(w), Satisfied: done}
	ch := 0
	for _, c := range w.Conditions {
		if c.Kind == engine.CondTimer {
			ts := &dexpb.TimerState{TimerIndex: uint32(c.TimerIndex), ConditionId: c.ID, FireTime: tsOut(c.FireAt)}
			switch {
			case c.Skipped:
				ts.Status = dexpb.TimerStatus_TIMER_STATUS_SKIPPED
			case c.Satisfied:
				ts.Status = dexpb.TimerStatus_TIMER_STATUS_FIRED
			case done:
				ts.Status = dexpb.TimerStatus_TIMER_STATUS_CANCELED
			default:
				ts.Status = dexpb.TimerStatus_TIMER_STATUS_PENDING
			}
			out.Timers = append(out.Timers, ts)
			continue
		}
		if c.SubFlow != nil {
			out.SubFlows = append(out.SubFlows, subFlowStateOut(c))
			continue
		}
		out.Channels = append(out.Channels, &dexpb.ChannelConditionState{ChannelConditionIndex: uint32(ch), ConditionId: c.ID,
			Channel: c.Channel, Satisfied: c.Satisfied, ConsumedCount: uint32(len(c.Messages))})
		ch++
	}
	return out
}
