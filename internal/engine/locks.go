package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Attribute locks (E30). See doc.go, "Attribute locks", for the rules and
// the choices behind them.
//
// A lock key names what one lock covers. Today a key is an attribute
// name. Attribute maps (E33) add one key per map instance; only
// validateLockKey (what a key may be) and lockDeclared (whether the flow
// declares what it covers) then learn the instance form, since every other
// function here compares keys as opaque strings.

// MaxLocks is the most locks one lock set may name.
const MaxLocks = 32

// RPCLock is the lock set one RPC call holds (FlowState.RPCLocks).
type RPCLock struct {
	CallID string   `json:"callId"`
	Name   string   `json:"name"`
	Locks  []string `json:"locks"`
	Epoch  uint64   `json:"epoch"`
}

// validateLockKey checks one lock key's form.
func validateLockKey(field, key string) error {
	switch {
	case key == "":
		return invalidArg(field, "must not be empty")
	case len(key) > MaxRequestIDBytes:
		return invalidArg(field, "is %d bytes, at most %d are allowed", len(key), MaxRequestIDBytes)
	}
	return nil
}

// validateLocks checks a lock set's form: at most MaxLocks keys, none
// twice.
func validateLocks(field string, locks []string) error {
	if len(locks) > MaxLocks {
		return invalidArg(field, "names %d locks, at most %d are allowed", len(locks), MaxLocks)
	}
	for i, k := range locks {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := validateLockKey(f, k); err != nil {
			return err
		}
		if slices.Contains(locks[:i], k) {
			return invalidArg(f, "lock %q is named twice", k)
		}
	}
	return nil
}

// lockDeclared reports whether the flow declares what key covers (any key
// on a run without a definition).
func (d *decider) lockDeclared(key string) bool { return d.attributeDeclared(key) }

// checkLocksDeclared checks that every lock of a set covers a declared
// attribute.
func (d *decider) checkLocksDeclared(field string, locks []string) error {
	for i, k := range locks {
		if !d.lockDeclared(k) {
			return invalidArg(fmt.Sprintf("%s[%d]", field, i), "lock %q covers no declared attribute", k)
		}
	}
	return nil
}

// checkOptionLocks checks the lock sets of step options against the
// flow's declared attributes.
func (d *decider) checkOptionLocks(field string, o *StepOptions) error {
	if o == nil {
		return nil
	}
	if o.WaitFor != nil {
		if err := d.checkLocksDeclared(field+".waitFor.locks", o.WaitFor.Locks); err != nil {
			return err
		}
	}
	if o.Execute != nil {
		return d.checkLocksDeclared(field+".execute.locks", o.Execute.Locks)
	}
	return nil
}

// definitionLocks checks a definition's step options' lock sets against
// the attributes it declares.
func definitionLocks(field string, def *FlowDefinition, o *StepOptions) error {
	d := &decider{st: &FlowState{Definition: def}}
	return d.checkOptionLocks(field, o)
}

// heldLocks returns the locks s's current attempt holds: its method's lock
// set while it runs, else none.
func (s *StepExec) heldLocks() []string {
	if s == nil || !s.Options.HasLocks() || s.Phase == PhaseWaiting || s.Attempt.State != AttemptRunning {
		return nil
	}
	return s.Options.MethodLocks(s.Attempt.Method)
}

// wantedLocks returns the locks s's pending attempt waits for, or none.
func (s *StepExec) wantedLocks() []string {
	if !s.Options.HasLocks() || s.Phase == PhaseWaiting || s.Attempt.State != AttemptPending {
		return nil
	}
	return s.Options.MethodLocks(s.Attempt.Method)
}

// HeldLock is one attribute lock and its holder (E30): a step
// execution's running attempt (StepExecID, Method, Attempt) or an RPC call
// (RPCName, CallID).
type HeldLock struct {
	Attribute  string
	StepExecID string
	Method     Method
	Attempt    int
	RPCName    string
	CallID     string
}

// HeldLocks returns the locks held now, sorted by attribute name.
func (st *FlowState) HeldLocks() []HeldLock {
	var out []HeldLock
	for _, s := range st.Steps {
		for _, key := range s.heldLocks() {
			out = append(out, HeldLock{Attribute: key, StepExecID: s.ID, Method: s.Attempt.Method, Attempt: s.Attempt.Number})
		}
	}
	for _, l := range st.RPCLocks {
		for _, key := range l.Locks {
			out = append(out, HeldLock{Attribute: key, RPCName: l.Name, CallID: l.CallID})
		}
	}
	slices.SortStableFunc(out, func(a, b HeldLock) int { return strings.Compare(a.Attribute, b.Attribute) })
	return out
}

// lockHolder describes who holds lock key, "" when nobody does.
func (st *FlowState) lockHolder(key string) string {
	for _, s := range st.Steps {
		if slices.Contains(s.heldLocks(), key) {
			return fmt.Sprintf("step execution %s (%s attempt %d)", s.ID, s.Attempt.Method, s.Attempt.Number)
		}
	}
	for _, l := range st.RPCLocks {
		if slices.Contains(l.Locks, key) {
			return fmt.Sprintf("RPC %q (call %s)", l.Name, l.CallID)
		}
	}
	return ""
}

// lockFirst reports whether pending attempt a comes before b in lock
// order: by the time it became due (NotBefore), then by creation. ia and
// ib are their positions in st.Steps.
func lockFirst(a *StepExec, ia int, b *StepExec, ib int) bool {
	if !a.Attempt.NotBefore.Equal(b.Attempt.NotBefore) {
		return a.Attempt.NotBefore.Before(b.Attempt.NotBefore)
	}
	return ia < ib
}

// lockWaiter returns a pending attempt that is due at now, wants key and
// comes before self in lock order (self nil: any such attempt), or nil.
func (st *FlowState) lockWaiter(key string, now time.Time, self *StepExec) *StepExec {
	iself := slices.Index(st.Steps, self)
	for i, s := range st.Steps {
		if s == self || now.Before(s.Attempt.NotBefore) || !slices.Contains(s.wantedLocks(), key) {
			continue
		}
		if self == nil || lockFirst(s, i, self, iself) {
			return s
		}
	}
	return nil
}

// lockConflict returns an ABORTED error (ErrLockHeld) naming the first
// lock of locks that is held, or that a waiting attempt before self takes
// first (self nil for an RPC call: any due waiting attempt); nil when the
// whole set can be taken now.
func (st *FlowState) lockConflict(locks []string, now time.Time, self *StepExec) error {
	for _, k := range locks {
		if h := st.lockHolder(k); h != "" {
			return &Error{Code: CodeAborted, Reason: ErrLockHeld, Message: fmt.Sprintf("lock %q is held by %s", k, h)}
		}
	}
	for _, k := range locks {
		if w := st.lockWaiter(k, now, self); w != nil {
			return &Error{Code: CodeAborted, Reason: ErrLockHeld,
				Message: fmt.Sprintf("lock %q is awaited by step execution %s (%s attempt %d), which waited first", k, w.ID, w.Attempt.Method, w.Attempt.Number)}
		}
	}
	return nil
}

// lockWaiters returns a DispatchTask for every pending attempt that wants
// one of the released locks, in lock order: the node dispatches them again
// (their TaskStarted was refused while the lock was held, and the first in
// order takes it).
func (st *FlowState) lockWaiters(released []string) []Effect {
	return st.lockWaitersBut(released, nil)
}

// lockWaitersBut is lockWaiters without except (an attempt scheduled by
// the same record, which has its own DispatchTask).
func (st *FlowState) lockWaitersBut(released []string, except *StepExec) []Effect {
	if len(released) == 0 {
		return nil
	}
	type waiter struct {
		s *StepExec
		i int
	}
	var ws []waiter
	for i, s := range st.Steps {
		if s != except && slices.ContainsFunc(s.wantedLocks(), func(k string) bool { return slices.Contains(released, k) }) {
			ws = append(ws, waiter{s, i})
		}
	}
	slices.SortStableFunc(ws, func(a, b waiter) int {
		if lockFirst(a.s, a.i, b.s, b.i) {
			return -1
		}
		return 1
	})
	out := make([]Effect, len(ws))
	for i, w := range ws {
		out[i] = DispatchTask{st.taskRef(w.s)}
	}
	return out
}

// rpcLock returns the index of the RPC lock call id holds, or -1.
func (st *FlowState) rpcLock(id string) int {
	return slices.IndexFunc(st.RPCLocks, func(l RPCLock) bool { return l.CallID == id })
}

// unlockRPC removes call id's RPC lock and returns the locks it held.
func (st *FlowState) unlockRPC(id string) []string {
	i := st.rpcLock(id)
	if i < 0 {
		return nil
	}
	released := st.RPCLocks[i].Locks
	// A new slice: a clone of the state shares the old one (Clone).
	st.RPCLocks = append(slices.Clone(st.RPCLocks[:i]), st.RPCLocks[i+1:]...)
	if len(st.RPCLocks) == 0 {
		st.RPCLocks = nil
	}
	return released
}

// lockRPC decides LockRPC (E30).
func (d *decider) lockRPC(c LockRPC) error {
	call := c.Call
	if err := d.checkRPC(call); err != nil {
		return err
	}
	if len(call.Locks) == 0 {
		return invalidArg("locks", "must name at least one lock")
	}
	if err := validateLocks("locks", call.Locks); err != nil {
		return err
	}
	if err := d.checkLocksDeclared("locks", call.Locks); err != nil {
		return err
	}
	if d.st.rpcLock(call.CallID) >= 0 {
		return invalidArg("callId", "call %q holds its locks already", call.CallID)
	}
	if err := d.st.lockConflict(call.Locks, d.now, nil); err != nil {
		return err
	}
	d.emit(RPCLocked{CallID: call.CallID, Name: call.Name, Locks: slices.Clone(call.Locks), Epoch: c.Epoch})
	return nil
}

// unlockRPC decides UnlockRPC (E30): nothing when the call holds no lock
// (it committed, was released already, or its run closed).
func (d *decider) unlockRPC(c UnlockRPC) error {
	if err := d.target(c.FlowID, ""); err != nil {
		return err
	}
	if !d.st.Running() || d.st.rpcLock(c.CallID) < 0 {
		return nil
	}
	d.emit(RPCUnlocked{CallID: c.CallID, Reason: validText(c.Reason)})
	return nil
}

// recoverRPCLocks releases the locks of RPC calls handed out by an earlier
// epoch than epoch: their results are refused (W2), so they would never
// release them (T2).
func (d *decider) recoverRPCLocks(epoch uint64) {
	for _, l := range slices.Clone(d.st.RPCLocks) {
		if l.Epoch < epoch && d.st.Running() {
			d.emit(RPCUnlocked{CallID: l.CallID,
				Reason: fmt.Sprintf("call %s was handed out in epoch %d before a takeover", l.CallID, l.Epoch)})
		}
	}
}
