package serving

import (
	"context"
	"fmt"

	"github.com/dexzd/dexzd/internal/engine"
)

// SubFlows (E31) are the one effect that crosses flows. The sequencer runs
// the cross-flow step right after it submitted the records that need it,
// in the same turn (afterDecide): a Wait with subflow conditions starts or
// attaches to each child and links the condition to the child's run
// (engine.LinkSubFlows); a closing child tells its parent its result
// (engine.FlowState.ParentNotice). Each step is an ordinary command on one
// flow with its own envelope, submitted after the one that caused it, so
// the log orders them: the parent's Wait, then the child's start, then the
// link; the child's close, then the parent's update. A crash loses a
// suffix of the log, never a middle, so after a restart or a takeover the
// log can only miss the later steps, and Recover runs LinkSubFlows for
// every running flow with pending subflow conditions: an unlinked one
// decides its child's start again (the same request ID, so it attaches),
// a linked one still waiting takes the result of a child that closed.
// Every step is idempotent, so doing one twice records nothing. Flows
// without subflows pay one type switch per record.

// afterDecide is the sequencer's hook after it submitted recs of flowID;
// st is the flow's head after them.
func (c *Core) afterDecide(flowID string, st *engine.FlowState, recs []engine.Record) {
	if !engine.HasSubFlows(st, recs) {
		return
	}
	if upd, ok := st.ParentNotice(); ok && closedHere(st, recs) {
		d, _ := c.seq.decide(upd.FlowID, upd)
		if d.err != nil && engine.CodeOf(d.err) != engine.CodeFailedPrecondition && engine.CodeOf(d.err) != engine.CodeNotFound {
			c.log.Warn("subflow result not delivered", "flowId", flowID, "parentFlowId", upd.FlowID, "err", d.err)
		}
	}
	if err := engine.LinkSubFlows(coreHost{c}, flowID); err != nil {
		c.log.Warn("subflows not linked", "flowId", flowID, "err", err)
	}
}

// closedHere reports whether recs closed st's run (not an earlier run
// that a restart of the child terminated: that run has no parent waiting
// for it any more).
func closedHere(st *engine.FlowState, recs []engine.Record) bool {
	for _, r := range recs {
		if _, ok := r.Body.(engine.FlowClosed); ok && r.RunID == st.RunID {
			return true
		}
	}
	return false
}

// coreHost is the engine.SubFlowHost of the serving core; it runs on the
// sequencer goroutine only.
type coreHost struct{ c *Core }

func (h coreHost) Flow(flowID string) (*engine.FlowState, error) { return h.c.seq.peek(flowID) }

func (h coreHost) Run(flowID, runID string) (*engine.FlowState, error) {
	st, err := h.c.seq.peek(flowID)
	if err != nil || (st != nil && st.RunID == runID) {
		return st, err
	}
	return h.c.cfg.Store.Run(flowID, runID)
}

func (h coreHost) Decide(flowID string, cmd engine.Command) error {
	if s, ok := cmd.(engine.StartFlow); ok {
		s.RunID = newRunID()
		if decl, ok := h.c.defs.get(s.FlowType); ok {
			s.Definition, s.Config = decl.Definition, decl.Defaults
		}
		if s.Parent != nil {
			// The child's tasks join the parent's trace.
			if p, err := h.c.seq.peek(s.Parent.FlowID); err == nil && p != nil {
				s.TraceContext = p.TraceContext
			}
		}
		cmd = s
	}
	d, _ := h.c.seq.decide(flowID, cmd)
	return d.err
}

// recoverSubFlows runs the cross-flow step for every running flow with
// pending subflow conditions (Recover): whatever a crash cut off between
// the flows is decided again.
func (c *Core) recoverSubFlows(ctx context.Context, ids []string) error {
	for _, id := range ids {
		err, cerr := call(ctx, c.seq, func() error { return engine.LinkSubFlows(coreHost{c}, id) })
		if cerr != nil {
			return fmt.Errorf("recover subflows: %w", cerr)
		}
		if err != nil {
			c.log.Warn("subflows not linked", "flowId", id, "err", err)
		}
	}
	return nil
}
