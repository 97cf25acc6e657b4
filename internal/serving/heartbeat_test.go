package serving

import (
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// A heartbeat moves an attempt's armed HEARTBEAT timer, and never arms
// one that is not armed (it fired, or the attempt never had one): a
// worker that keeps heartbeating a failed attempt schedules nothing.
//
// Covers: E38
func TestTimerQueue_MoveOnlyMovesArmedTimers(t *testing.T) {
	q := newTimerQueue(func(engine.ArmTimer) {})
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	hb := engine.Timer{Kind: engine.TimerHeartbeat, StepExecID: "A-1", Method: engine.MethodExecute, Attempt: 1}
	q.move(engine.ArmTimer{FlowID: "f", RunID: "r", Timer: hb, At: t0})
	if n := q.len(); n != 0 {
		t.Fatalf("move armed a timer: %d armed", n)
	}
	q.arm(engine.ArmTimer{FlowID: "f", RunID: "r", Timer: hb, At: t0.Add(time.Second)})
	other := engine.Timer{Kind: engine.TimerAttemptTimeout, StepExecID: "A-1", Method: engine.MethodExecute, Attempt: 1}
	q.arm(engine.ArmTimer{FlowID: "f", RunID: "r", Timer: other, At: t0.Add(2 * time.Second)})
	q.move(engine.ArmTimer{FlowID: "f", RunID: "r", Timer: hb, At: t0.Add(3 * time.Second)})
	if n := q.len(); n != 2 {
		t.Fatalf("%d timers armed, want 2", n)
	}
	q.mu.Lock()
	first := q.h[0].arm
	q.mu.Unlock()
	if first.Timer != other {
		t.Fatalf("first due is %v, want the attempt timeout (the heartbeat timer moved to +3s)", first.Timer)
	}
}

// An ASYNC attempt's start is durable after its task went out, and only
// then is its HEARTBEAT timer armed, at start + timeout; heartbeats that
// came in between had no timer to move. The timer is armed at the last
// heartbeat + timeout instead, so a small timeout and a slow commit do not
// fail a healthy attempt (found in review: the timer was armed in the
// past and fired at once).
//
// Covers: E38
func TestArmHeartbeat_CountsHeartbeatsBeforeTheStartWasDurable(t *testing.T) {
	c := &Core{}
	c.disp = newDispatcher(c)
	c.timers = newTimerQueue(func(engine.ArmTimer) {})
	s := &session{c: c, inflight: map[taskKey]time.Time{}}
	tok := engine.Token{FlowID: "f", RunID: "r", StepExecID: "A-1", Method: engine.MethodExecute, Attempt: 1}
	c.disp.running[tokKey(tok)] = s
	s.push(server.Outgoing{Task: &engine.Task{Token: tok, HeartbeatTimeout: time.Second}})
	start := time.Now()
	beat := start.Add(700 * time.Millisecond)
	s.beat([]engine.Token{tok}, nil, beat) // before the timer is armed
	hb := engine.Timer{Kind: engine.TimerHeartbeat, StepExecID: "A-1", Method: engine.MethodExecute, Attempt: 1}
	c.armHeartbeat(engine.ArmTimer{FlowID: "f", RunID: "r", Timer: hb, At: start.Add(time.Second)})
	c.timers.mu.Lock()
	at := c.timers.h[0].arm.At
	c.timers.mu.Unlock()
	if !at.Equal(beat.Add(time.Second)) {
		t.Fatalf("armed at start+%v, want the heartbeat + 1s (start+1.7s)", at.Sub(start))
	}
}
