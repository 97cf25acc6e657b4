package engine

import (
	"fmt"
	"time"
)

// WaitMode combines the conditions of a Wait (E15).
type WaitMode string

// Wait modes (E15).
const (
	Until WaitMode = "UNTIL"  // exactly one condition
	AllOf WaitMode = "ALL_OF" // every condition
	AnyOf WaitMode = "ANY_OF" // the first condition satisfied wins
	// AnyCombination holds once every condition of one of its groups
	// holds (an OR of ANDs, E32, combination.go).
	AnyCombination WaitMode = "ANY_COMBINATION"
)

// Bound is the kind of a channel condition (E17).
type Bound string

// Channel condition bounds (E17).
const (
	ForOne        Bound = "FOR_ONE"          // ready at >= 1, takes 1
	ForN          Bound = "FOR_N"            // ready at >= N, takes N
	AtLeast       Bound = "AT_LEAST"         // ready at >= N, takes all
	AtMost        Bound = "AT_MOST"          // always ready, takes up to N
	AtLeastAtMost Bound = "AT_LEAST_AT_MOST" // ready at >= N, takes up to M
)

// Wait is what a WaitFor attempt returns: conditions relative to the moment
// it is stored. A nil Wait, or one without conditions, means "no wait":
// Execute runs at once (E4).
type Wait struct {
	Mode       WaitMode    `json:"mode"`
	Conditions []Condition `json:"conditions,omitempty"`
	// Groups are an AnyCombination's AND groups, each a list of condition
	// IDs, in the order they are tried (E32).
	Groups [][]string `json:"groups,omitempty"`
}

// Condition is one timer, channel or subflow condition; exactly one of
// Timer, Channel and SubFlow is set. ID is optional and unique within the
// Wait.
type Condition struct {
	ID      string            `json:"id,omitempty"`
	Timer   *time.Duration    `json:"timer,omitempty"`
	Channel *ChannelCondition `json:"channel,omitempty"`
	SubFlow *SubFlowCondition `json:"subFlow,omitempty"` // E31, subflow.go
}

// ChannelCondition waits for messages on one channel (E17). N and M are the
// bound's parameters: ForN(N), AtLeast(N), AtMost(N), AtLeastAtMost(N, M).
type ChannelCondition struct {
	Channel string `json:"channel"`
	Bound   Bound  `json:"bound"`
	N       int    `json:"n,omitempty"`
	M       int    `json:"m,omitempty"`
}

// CondKind says what a stored condition waits for.
type CondKind string

// Condition kinds.
const (
	CondTimer   CondKind = "TIMER"
	CondChannel CondKind = "CHANNEL"
	CondSubFlow CondKind = "SUB_FLOW" // E31
)

// StoredWait is a Wait as stored durably: timers carry absolute fire times,
// channel conditions their normalised bounds, and every condition what it
// got (E15, E18).
type StoredWait struct {
	Mode       WaitMode          `json:"mode"`
	Conditions []StoredCondition `json:"conditions"`
	// Groups are an AnyCombination's groups as condition indexes (E32).
	Groups [][]int `json:"groups,omitempty"`
	// Locals are the step-execution locals the WaitFor wrote, for the
	// same execution's Execute (E32). They ride on the Wait so that a
	// step without them pays nothing in StepExec; a WaitFor that wrote
	// locals but returned no Wait stores a Wait without conditions.
	Locals map[string]Value `json:"locals,omitempty"`
}

// StoredCondition is one condition of a stored Wait.
type StoredCondition struct {
	ID   string   `json:"id,omitempty"`
	Kind CondKind `json:"kind"`
	// TimerIndex counts timer conditions from 0 in declaration order; -1
	// for a channel condition (E15).
	TimerIndex int       `json:"timerIndex"`
	FireAt     time.Time `json:"fireAt,omitzero"`
	Channel    string    `json:"channel,omitempty"`
	Bound      Bound     `json:"bound,omitempty"`
	// Min is how many messages make the condition ready; Max how many it
	// takes at most (0: all that are queued).
	Min int `json:"min,omitempty"`
	Max int `json:"max,omitempty"`
	// Satisfied: the timer fired (or was skipped), or the channel condition
	// consumed its messages.
	Satisfied bool      `json:"satisfied,omitempty"`
	Skipped   bool      `json:"skipped,omitempty"` // fired by SkipTimer (E19)
	Messages  []Message `json:"messages,omitempty"`
	// SubFlow is a subflow condition's child and what it got (E31).
	SubFlow *StoredSubFlow `json:"subFlow,omitempty"`
}

// Done reports whether the wait is satisfied: Until and AnyOf by one
// condition, AllOf by all of them.
func (w *StoredWait) Done() bool {
	n := 0
	for _, c := range w.Conditions {
		if c.Satisfied {
			n++
		}
	}
	switch w.Mode {
	case AllOf:
		return n == len(w.Conditions)
	case AnyCombination:
		return w.groupDone() >= 0
	}
	return n > 0
}

// FiredTimers returns the indexes of the timers that fired, in order (E18).
func (w *StoredWait) FiredTimers() []int {
	var out []int
	for _, c := range w.Conditions {
		if c.Kind == CondTimer && c.Satisfied {
			out = append(out, c.TimerIndex)
		}
	}
	return out
}

// pendingTimer reports whether condition i is a timer that may still fire.
func (w *StoredWait) pendingTimer(i int) bool {
	if i < 0 || i >= len(w.Conditions) || w.Done() {
		return false
	}
	c := w.Conditions[i]
	return c.Kind == CondTimer && !c.Satisfied
}

func (w *StoredWait) clone() *StoredWait {
	if w == nil {
		return nil
	}
	// Groups and Locals are never changed once stored: clones share them.
	c := &StoredWait{Mode: w.Mode, Conditions: make([]StoredCondition, len(w.Conditions)), Groups: w.Groups, Locals: w.Locals}
	copy(c.Conditions, w.Conditions)
	for i := range c.Conditions {
		c.Conditions[i].Messages = clip(c.Conditions[i].Messages)
		if sf := c.Conditions[i].SubFlow; sf != nil {
			cp := *sf
			c.Conditions[i].SubFlow = &cp
		}
	}
	return c
}

// isEmpty reports whether w means "no wait".
func (w *Wait) isEmpty() bool { return w == nil || len(w.Conditions) == 0 }

// validateWait checks a worker's Wait; channelOK says whether a channel name
// is declared. The error names the offending field below field.
func validateWait(field string, w *Wait, channelOK func(string) bool) error {
	if w != nil && w.Mode == AnyCombination && len(w.Conditions) == 0 {
		return invalidArg(field+".conditions", "ANY_COMBINATION needs at least one condition")
	}
	if w.isEmpty() {
		return nil
	}
	switch w.Mode {
	case Until:
		if len(w.Conditions) != 1 {
			return invalidArg(field+".conditions", "UNTIL takes exactly one condition, got %d", len(w.Conditions))
		}
	case AllOf, AnyOf:
		if len(w.Groups) > 0 {
			return invalidArg(field+".groups", "only ANY_COMBINATION takes groups")
		}
	case AnyCombination:
		if err := validateGroups(field, w); err != nil {
			return err
		}
	default:
		return invalidArg(field+".mode", "unknown mode %q", w.Mode)
	}
	ids := map[string]bool{}
	prefix := field
	for i, c := range w.Conditions {
		field := fmt.Sprintf("%s.conditions[%d]", prefix, i)
		if c.ID != "" {
			if ids[c.ID] {
				return invalidArg(field+".id", "duplicate condition ID %q", c.ID)
			}
			ids[c.ID] = true
		}
		switch {
		case c.SubFlow != nil && (c.Timer != nil || c.Channel != nil):
			return invalidArg(field, "subFlow set with a timer or a channel")
		case c.SubFlow != nil:
			// Checked by checkSubFlows (subflow.go), which knows the limits.
		case c.Timer != nil && c.Channel != nil:
			return invalidArg(field, "both timer and channel set")
		case c.Timer != nil:
			if *c.Timer < 0 {
				return invalidArg(field+".timer", "negative duration %v", *c.Timer)
			}
		case c.Channel != nil:
			if _, _, err := channelBounds(c.Channel); err != nil {
				return invalidArg(field+".channel", "%v", err)
			}
			if !channelOK(c.Channel.Channel) {
				return invalidArg(field+".channel", "channel %q is not declared", c.Channel.Channel)
			}
		default:
			return invalidArg(field, "none of timer, channel and subFlow set")
		}
	}
	return nil
}

// channelBounds returns how many messages make c ready and how many it takes
// at most (0: all) (E17).
func channelBounds(c *ChannelCondition) (lo, hi int, err error) {
	if c.Channel == "" {
		return 0, 0, fmt.Errorf("empty channel name")
	}
	switch c.Bound {
	case ForOne:
		return 1, 1, nil
	case ForN:
		if c.N < 1 {
			return 0, 0, fmt.Errorf("FOR_N needs n >= 1, got %d", c.N)
		}
		return c.N, c.N, nil
	case AtLeast:
		if c.N < 1 {
			return 0, 0, fmt.Errorf("AT_LEAST needs n >= 1, got %d", c.N)
		}
		return c.N, 0, nil
	case AtMost:
		if c.N < 1 {
			return 0, 0, fmt.Errorf("AT_MOST needs n >= 1, got %d", c.N)
		}
		return 0, c.N, nil
	case AtLeastAtMost:
		if c.N < 0 || c.M < 1 || c.N > c.M {
			return 0, 0, fmt.Errorf("AT_LEAST_AT_MOST needs 0 <= n <= m, m >= 1, got n=%d m=%d", c.N, c.M)
		}
		return c.N, c.M, nil
	default:
		return 0, 0, fmt.Errorf("unknown bound %q", c.Bound)
	}
}

// storeWait converts a validated Wait to its stored form, timers made
// absolute from now (E15).
func storeWait(w *Wait, now time.Time) *StoredWait {
	sw := &StoredWait{Mode: w.Mode, Conditions: make([]StoredCondition, len(w.Conditions))}
	if w.Mode == AnyCombination {
		sw.Groups = groupIndexes(w)
	}
	timers, subflows := 0, 0
	for i, c := range w.Conditions {
		sc := StoredCondition{ID: c.ID, TimerIndex: -1}
		switch {
		case c.SubFlow != nil:
			sc.Kind = CondSubFlow
			sc.SubFlow = &StoredSubFlow{Spec: *c.SubFlow, Index: subflows}
			subflows++
		case c.Timer != nil:
			sc.Kind = CondTimer
			sc.TimerIndex = timers
			sc.FireAt = now.Add(*c.Timer)
			timers++
		default:
			lo, hi, _ := channelBounds(c.Channel)
			sc.Kind = CondChannel
			sc.Channel = c.Channel.Channel
			sc.Bound = c.Channel.Bound
			sc.Min, sc.Max = lo, hi
		}
		sw.Conditions[i] = sc
	}
	return sw
}

// take returns how many messages condition c consumes from a queue of n
// messages, or -1 when it is not ready (E17).
func (c *StoredCondition) take(n int) int {
	if n < c.Min {
		return -1
	}
	if c.Max > 0 && n > c.Max {
		return c.Max
	}
	return n
}
