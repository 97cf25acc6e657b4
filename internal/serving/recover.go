package serving

import (
	"context"
	"fmt"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/wal"
)

// ReplayApply returns the apply function for wal.Fence: each batch found
// in the log (and the new fence) is applied to the store without effects
// (T1). Effects of replayed batches are not performed; Recover rebuilds
// what the serving core needs from the committed state instead.
func ReplayApply(store flowstore.Store) func(wal.Batch) error {
	return func(b wal.Batch) error {
		_, err := applyBatch(store, b)
		return err
	}
}

// ReplayWhile is ReplayApply that applies nothing more once ctx ended: a
// takeover's replay runs while its lease holds, and stops at the next
// batch (not after the batches already read ahead) when the lease stops.
func ReplayWhile(ctx context.Context, store flowstore.Store) func(wal.Batch) error {
	apply := ReplayApply(store)
	return func(b wal.Batch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return apply(b)
	}
}

// Recover prepares the core to serve after the log was replayed and fenced:
// it seeds the flow type registry from the running flows' definitions, and
// for every running flow it arms the durable timers (those due during the
// outage fire at once, E20, T5), queues the attempts waiting for a worker
// (T4, and ASYNC attempts whose start was not durable, T3), and submits
// RecoverAttempts with the new epoch for flows with attempts handed out by
// an earlier epoch (T2) or RPC locks taken by one (E30), and waits until
// that is durable. Then the core
// starts answering public calls. The writer must be running. The rules
// (T1-T5) are stated in doc.go, "Recovery after a takeover".
func (c *Core) Recover(ctx context.Context) error {
	var stale, subflows []string
	var timers, tasks int
	seeded := map[string]*engine.FlowState{}
	lenient := map[string]bool{}
	err := c.cfg.Store.RunningFlows(func(st *engine.FlowState) error {
		if st.Definition != nil {
			if prev := seeded[st.FlowType]; prev == nil || st.StartedAt.After(prev.StartedAt) {
				seeded[st.FlowType] = st
			}
		} else {
			lenient[st.FlowType] = true
		}
		if len(st.PendingSubFlows()) > 0 {
			subflows = append(subflows, st.FlowID)
		}
		for _, t := range st.Timers() {
			c.timers.arm(t)
			timers++
		}
		for _, r := range st.PendingTasks() {
			c.disp.enqueue(r)
			tasks++
		}
		if interrupted(st, c.cfg.Epoch) {
			stale = append(stale, st.FlowID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	// The store's type index names the run that took each type's latest
	// declaration, closed runs included: it wins over the latest running
	// run (a store written before the index existed has none).
	err = c.cfg.Store.FlowTypes(func(typ, flowID, runID string) error {
		st, err := c.cfg.Store.Run(flowID, runID)
		if err != nil {
			return err
		}
		if st != nil && st.Definition != nil {
			seeded[typ] = st
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recover: declared flow types: %w", err)
	}
	c.seedDefinitions(seeded, lenient)
	futures := make([]decision, 0, len(stale))
	for _, id := range stale {
		d, err := call(ctx, c.seq, func() decision {
			d, _ := c.seq.decide(id, engine.RecoverAttempts{FlowID: id, Epoch: c.cfg.Epoch})
			return d
		})
		if err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		futures = append(futures, d)
	}
	// Serve only once the interrupted attempts are failed durably, so that
	// no read shows them running under the old epoch.
	for i, d := range futures {
		if d.err != nil {
			c.log.Warn("attempts not recovered", "flowId", stale[i], "err", d.err)
			continue
		}
		if err := d.result(ctx); err != nil {
			return fmt.Errorf("recover attempts: %w", err)
		}
	}
	// The subflow steps a crash cut off (subflow.go), before serving.
	if err := c.recoverSubFlows(ctx, subflows); err != nil {
		return err
	}
	c.log.Info("recovered", "timers", timers, "pendingTasks", tasks, "flowsWithInterruptedAttempts", len(stale),
		"flowsWithPendingSubFlows", len(subflows))
	c.serving.Store(true)
	return nil
}

// interrupted reports whether st has attempts or RPC calls an earlier epoch
// than epoch handed out: RecoverAttempts fails the attempts and releases
// the calls' locks (E30), which nothing else would.
func interrupted(st *engine.FlowState, epoch uint64) bool {
	for _, s := range st.Steps {
		if s.Phase != engine.PhaseWaiting && s.Attempt.State == engine.AttemptRunning && s.Attempt.Epoch < epoch {
			return true
		}
	}
	for _, l := range st.RPCLocks {
		if l.Epoch < epoch {
			return true
		}
	}
	return false
}

// seedDefinitions registers, for each flow type with running flows, the
// definition of its latest started run, so that flows started after a
// restart but before a worker of the type reconnects still get one (a
// worker's Hello then replaces it). lenient holds the types with running
// runs that have no definition (a crash came before the one a worker's
// declaration set was durable): a seeded type among them is marked
// unswept, so that its first declaration sets their definition even when
// it equals the seed (register).
func (c *Core) seedDefinitions(latest map[string]*engine.FlowState, lenient map[string]bool) {
	c.defs.mu.Lock()
	defer c.defs.mu.Unlock()
	for typ, st := range latest {
		if _, ok := c.defs.m[typ]; !ok {
			c.defs.m[typ] = server.FlowTypeDecl{Definition: st.Definition, Defaults: st.Config}
			if lenient[typ] {
				c.defs.unswept[typ] = true
			}
		}
	}
}
