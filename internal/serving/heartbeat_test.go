package serving

import (
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
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
