package serving

import (
	"context"
	"errors"

	"github.com/dexzd/dexzd/internal/engine"
)

// Locked RPC calls (E30). A call with a lock set takes it with LockRPC on
// the sequencer before its task is built, and waits until the rpc_locked
// record is durable: the log is ordered, so by then every earlier commit of
// the flow is durable too, and the task, built from committed state, reads
// the attributes the previous holder wrote. Steps need nothing here: a
// method with locks is SYNC, so its task is built once its start (which
// takes the locks) is durable, for the same reason.
//
// The call gives its locks back with UnlockRPC whenever it ends without a
// commit: the worker failed it, the result was refused, or the caller gave
// up (its timeout passed, it went away). UnlockRPC is posted to the
// sequencer, never waited for: it needs no context, and it runs after
// every earlier post, so also after a LockRPC whose caller stopped waiting
// before the sequencer decided it. A result that arrives after the unlock
// is refused by the engine (RPCResult.Locked). After a takeover the new
// epoch releases every call of the old one (RecoverAttempts), so a lock is
// never held by a call that cannot answer.

// lockRPC takes inv's locks and waits until they are durable. On an error
// the locks are not held (or are released by the unlock it posts).
func (c *Core) lockRPC(ctx context.Context, inv engine.InvokeRPC) error {
	cmd := engine.LockRPC{Call: inv, Epoch: c.cfg.Epoch}
	d, err := call(ctx, c.seq, func() decision {
		d, _ := c.seq.decide(inv.FlowID, cmd)
		return d
	})
	if err == nil {
		err = d.err
		if err != nil {
			return err // refused: nothing is held
		}
		err = d.result(ctx)
	}
	if err != nil {
		c.unlockRPC(inv, "the call ended before its locks were durable: "+err.Error())
	}
	return err
}

// unlockRPC releases inv's locks, if it holds any, without waiting.
func (c *Core) unlockRPC(inv engine.InvokeRPC, reason string) {
	c.seq.post(func() {
		d, _ := c.seq.decide(inv.FlowID, engine.UnlockRPC{FlowID: inv.FlowID, CallID: inv.CallID, Reason: reason})
		if d.err != nil && engine.CodeOf(d.err) != engine.CodeNotFound && !errors.Is(d.err, engine.ErrFlowClosed) {
			c.log.Warn("RPC locks not released", "flowId", inv.FlowID, "callId", inv.CallID, "err", d.err)
		}
	})
}
