package dex

// Attribute locks (E30).

// WithLocks makes InvokeRPC take the locks of these attributes before the
// RPC runs (E30): the server sends the task only once it holds them all,
// so the handler reads the attributes under the locks, and releases them
// when the result commits, the handler fails, or the call's deadline
// passes (a result that arrives later is refused, so it never writes
// after another holder). When any lock is held, by another RPC or a step
// handler, or a step handler waiting for it is due, the call fails at
// once, having run nothing, with an error matching ErrLockHeld whose
// message names the lock: call again.
//
//	n, err := dex.InvokeRPC(ctx, c, "counter-1", Increment, 1, dex.WithLocks(Count))
//
// Other calls ignore it. Locks are cooperative: they exclude the handlers
// and RPCs that lock the same attributes, not client writes
// (SetAttributes) or handlers that lock nothing.
func WithLocks(attrs ...AttributeDef) CallOption { return locksOption(lockNames(attrs)) }

type locksOption []string

func (o locksOption) applyCall(c *callOptions) { c.locks = append(c.locks, o...) }

// lockNames returns the attributes' names, nil for none.
func lockNames(attrs []AttributeDef) []string {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]string, len(attrs))
	for i, a := range attrs {
		out[i] = a.Name()
	}
	return out
}
