package serving

import (
	"container/heap"
	"errors"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// Heartbeats and cancellation delivery (E38).
//
// A task with a heartbeat timeout is noted in its session when it goes
// out (session.push): its key and the timeout. Each Heartbeat that lists
// it moves the attempt's HEARTBEAT timer to now + timeout, in the timer
// queue only (timerQueue.move): nothing is logged, and a timer that
// already fired or was never armed is not armed again, so a worker that
// keeps heartbeating an attempt the engine has failed costs nothing. A
// heartbeat with details is also submitted as engine.Heartbeat, which
// logs them when they changed. The SDK sends details at most once per
// heartbeat tick.
//
// The timer is armed when the attempt's start is durable (an ASYNC start
// is logged after the task went out), at start + timeout: heartbeats that
// came before find no timer to move, so the session keeps each task's
// last heartbeat time and armHeartbeat arms no earlier than it +
// timeout.
//
// A CancelTask effect (a step execution cancelled, its run closed) is
// pushed as a TaskCancel to the session the attempt was handed to, if
// any; the worker ends the handler's context.

// heartbeatNoted records that a task with a heartbeat timeout went out on
// s (s.mu held).
func (s *session) heartbeatNoted(t *engine.Task) {
	if t == nil || t.HeartbeatTimeout <= 0 || t.Token.Method == engine.MethodRPC {
		return
	}
	if s.beats == nil {
		s.beats = map[taskKey]time.Duration{}
	}
	s.beats[tokKey(t.Token)] = t.HeartbeatTimeout
}

// beat moves the heartbeat timers of the running tasks that have one, and
// submits the details some of them report.
func (s *session) beat(running []engine.Token, details []server.TaskDetails, now time.Time) {
	c := s.c
	type move struct {
		tok engine.Token
		h   time.Duration
	}
	var moves []move
	s.mu.Lock()
	for _, t := range running {
		k := tokKey(t)
		if h, ok := s.beats[k]; ok {
			if r, ok := s.timerRun[k]; ok {
				t.RunID = r // carried by a continue-as-new: its timer is the new run's
			}
			moves = append(moves, move{t, h})
			if s.lastBeat == nil {
				s.lastBeat = map[taskKey]time.Time{}
			}
			s.lastBeat[k] = now
		}
	}
	s.mu.Unlock()
	for _, m := range moves {
		c.timers.move(engine.ArmTimer{FlowID: m.tok.FlowID, RunID: m.tok.RunID, At: now.Add(m.h),
			Timer: engine.Timer{Kind: engine.TimerHeartbeat, StepExecID: m.tok.StepExecID, Method: m.tok.Method, Attempt: m.tok.Attempt}})
	}
	for _, d := range details {
		if d.Token.Epoch != c.cfg.Epoch || d.Token.Method == engine.MethodRPC {
			continue
		}
		cmd := engine.Heartbeat{Token: d.Token, Details: d.Details}
		c.seq.post(func() {
			if dec, _ := c.seq.decide(cmd.Token.FlowID, cmd); dec.err != nil && !errors.Is(dec.err, engine.ErrStaleToken) &&
				!errors.Is(dec.err, server.ErrNotServing) {
				c.log.Warn("heartbeat details not recorded", "flowId", cmd.Token.FlowID, "stepExecId", cmd.Token.StepExecID, "err", dec.err)
			}
		})
	}
}

// forget drops what s noted about task k (s.mu held).
func (s *session) forget(k taskKey) {
	delete(s.beats, k)
	delete(s.lastBeat, k)
	delete(s.timerRun, k)
}

// armHeartbeat arms a HEARTBEAT timer, no earlier than the last heartbeat
// the attempt's session received plus its timeout.
func (c *Core) armHeartbeat(e engine.ArmTimer) {
	k := taskKey{epoch: c.cfg.Epoch, flowID: e.FlowID, runID: e.RunID, stepExecID: e.Timer.StepExecID,
		method: e.Timer.Method, attempt: e.Timer.Attempt}
	if e.TokenRunID != "" {
		k.runID = e.TokenRunID // the task went out under the run a continue-as-new replaced (E37)
	}
	c.disp.mu.Lock()
	s := c.disp.running[k]
	c.disp.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		if e.TokenRunID != "" {
			if s.timerRun == nil {
				s.timerRun = map[taskKey]string{}
			}
			s.timerRun[k] = e.RunID
		}
		if at, ok := s.lastBeat[k]; ok {
			if due := at.Add(s.beats[k]); due.After(e.At) {
				e.At = due
			}
		}
		s.mu.Unlock()
	}
	c.timers.arm(e)
}

// cancelTask tells the session running a cancelled attempt (E38).
func (d *dispatcher) cancelTask(e engine.CancelTask) {
	tok := engine.Token{Epoch: d.c.cfg.Epoch, FlowID: e.FlowID, RunID: e.RunID, StepExecID: e.StepExecID,
		Method: e.Method, Attempt: e.Attempt}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.running[tokKey(tok)]; s != nil && !s.closed {
		s.push(server.Outgoing{Cancel: &server.TaskCancel{Token: tok, Reason: e.Reason}})
	}
}

// move re-arms timer a at its new time if it is armed; it never arms one.
func (q *timerQueue) move(a engine.ArmTimer) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e := q.find(runKey{a.FlowID, a.RunID}, a.Timer); e != nil {
		e.arm = a
		heap.Fix(&q.h, e.index)
		q.signal()
	}
}
