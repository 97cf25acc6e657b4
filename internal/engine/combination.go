package engine

import (
	"fmt"
	"slices"
)

// AnyCombination waits (E32): an OR of AND groups over one list of
// conditions. Every condition has a unique ID, every group names at least
// one condition by ID, and every condition belongs to at least one group
// (a condition in no group could never matter). A condition may belong to
// several groups.
//
// Evaluation: timer and subflow conditions hold by themselves (a timer
// fires, a child closes), as under AllOf. Channel conditions consume
// nothing until a whole group can hold: the groups are tried in declared
// order, and the first whose timers and subflows all hold and whose
// channel conditions can all be served from the queues wins. For each
// channel, the winning group's conditions reading it reserve their minimum
// counts first, then the rest of the queue goes as extra capacity (up to
// each condition's maximum, all for an unbounded one) in declaration order
// (the conditions' order in the Wait). One ConditionSatisfied record per
// channel condition of the group, in declaration order, then takes the
// counts from the queue heads, so a message never goes to two conditions.
// Conditions outside the winning group consume nothing.

// validateGroups checks an AnyCombination's IDs and groups; field names
// the Wait.
func validateGroups(field string, w *Wait) error {
	ids := make(map[string]int, len(w.Conditions))
	for i, c := range w.Conditions {
		f := fmt.Sprintf("%s.conditions[%d].id", field, i)
		if c.ID == "" {
			return invalidArg(f, "ANY_COMBINATION needs an ID on every condition")
		}
		if _, dup := ids[c.ID]; dup {
			return invalidArg(f, "duplicate condition ID %q", c.ID)
		}
		ids[c.ID] = i
	}
	if len(w.Groups) == 0 {
		return invalidArg(field+".groups", "ANY_COMBINATION needs at least one group")
	}
	used := make([]bool, len(w.Conditions))
	for g, group := range w.Groups {
		f := fmt.Sprintf("%s.groups[%d]", field, g)
		if len(group) == 0 {
			return invalidArg(f, "a group needs at least one condition")
		}
		seen := map[string]bool{}
		for j, id := range group {
			i, ok := ids[id]
			if !ok {
				return invalidArg(fmt.Sprintf("%s[%d]", f, j), "no condition has ID %q", id)
			}
			if seen[id] {
				return invalidArg(fmt.Sprintf("%s[%d]", f, j), "condition %q is twice in the group", id)
			}
			seen[id] = true
			used[i] = true
		}
	}
	if i := slices.Index(used, false); i >= 0 {
		return invalidArg(fmt.Sprintf("%s.conditions[%d]", field, i), "condition %q is in no group", w.Conditions[i].ID)
	}
	return nil
}

// groupIndexes maps a validated AnyCombination's groups to condition
// indexes.
func groupIndexes(w *Wait) [][]int {
	ids := make(map[string]int, len(w.Conditions))
	for i, c := range w.Conditions {
		ids[c.ID] = i
	}
	out := make([][]int, len(w.Groups))
	for g, group := range w.Groups {
		out[g] = make([]int, len(group))
		for j, id := range group {
			out[g][j] = ids[id]
		}
	}
	return out
}

// groupDone returns the first group whose conditions all hold, or -1.
func (w *StoredWait) groupDone() int {
	for g, group := range w.Groups {
		ok := true
		for _, i := range group {
			if i < 0 || i >= len(w.Conditions) || !w.Conditions[i].Satisfied {
				ok = false
				break
			}
		}
		if ok {
			return g
		}
	}
	return -1
}

// Winner returns the group that satisfied an AnyCombination, or -1.
func (w *StoredWait) Winner() int {
	if w == nil || w.Mode != AnyCombination {
		return -1
	}
	return w.groupDone()
}

// combinationTakes returns, for the first group that can hold against the
// queues, the count each of its unsatisfied channel conditions takes, by
// condition index in declaration order; ok is false when no group can.
func (w *StoredWait) combinationTakes(queue func(channel string) int) (idx, counts []int, ok bool) {
	for _, group := range w.Groups {
		idx = idx[:0]
		need := map[string]int{}
		holds := true
		for _, i := range group {
			c := &w.Conditions[i]
			switch {
			case c.Kind == CondChannel && !c.Satisfied:
				idx = append(idx, i)
				need[c.Channel] += c.Min
			case !c.Satisfied:
				holds = false
			}
		}
		if !holds {
			continue
		}
		for ch, n := range need {
			if queue(ch) < n {
				holds = false
				break
			}
		}
		if !holds {
			continue
		}
		slices.Sort(idx)
		left := make(map[string]int, len(need))
		for ch, n := range need {
			left[ch] = queue(ch) - n
		}
		counts = make([]int, len(idx))
		for k, i := range idx {
			c := &w.Conditions[i]
			extra := left[c.Channel]
			if c.Max > 0 {
				extra = min(extra, c.Max-c.Min)
			}
			counts[k] = c.Min + extra
			left[c.Channel] -= extra
		}
		return idx, counts, true
	}
	return nil, nil, false
}

// evaluateCombination consumes the messages of an AnyCombination's first
// group that can hold (see above).
func (d *decider) evaluateCombination(s *StepExec) {
	idx, counts, ok := s.Wait.combinationTakes(func(ch string) int { return len(d.st.Channels[ch]) })
	if !ok {
		return
	}
	id := s.ID
	for k, i := range idx {
		d.emit(ConditionSatisfied{StepExecID: id, Index: i, Count: counts[k]})
	}
}
