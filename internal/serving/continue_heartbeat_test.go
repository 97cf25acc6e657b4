package serving

import (
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// An attempt RUNNING at a continue-as-new is carried; its worker keeps
// heartbeating under the old run's token. The heartbeats before the switch
// count for the timer the new run arms, and the ones after it move that
// timer (armed under the new run's ID). Before the fix the new run's timer
// was armed from the attempt's start and no beat moved it: the attempt
// failed HEARTBEAT though its worker was alive (adversarial review, P2).
//
// Covers: E37, E38
func TestContinueAsNew_HeartbeatsOfACarriedAttemptMoveTheNewRunsTimer(t *testing.T) {
	e := engine.New(engine.Config{})
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	hb, to := 10*time.Second, time.Hour
	def := &engine.FlowDefinition{Type: "t", Steps: map[string]engine.StepDef{
		"A": {Options: &engine.StepOptions{Execute: &engine.MethodOptions{HeartbeatTimeout: &hb, Timeout: &to}}}}}
	var st *engine.FlowState
	var effects []engine.Effect
	run := func(cmd engine.Command, now time.Time) {
		t.Helper()
		recs, err := e.Decide(st, cmd, now)
		if err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
		for _, r := range recs {
			var eff []engine.Effect
			st, eff = engine.Apply(st, r)
			effects = append(effects, eff...)
		}
	}
	run(engine.StartFlow{FlowID: "f", RunID: "r", FlowType: "t", StartStep: "A", Definition: def}, t0)
	tok := engine.Token{Epoch: 1, FlowID: "f", RunID: "r", StepExecID: "A-1", Method: engine.MethodExecute, Attempt: 1}
	run(engine.TaskStarted{Token: tok}, t0)

	c := &Core{}
	c.disp = newDispatcher(c)
	var fired []engine.ArmTimer
	c.timers = newTimerQueue(func(a engine.ArmTimer) { fired = append(fired, a) })
	c.cfg.Epoch = 1
	s := &session{c: c, inflight: map[taskKey]time.Time{}}
	c.disp.running[tokKey(tok)] = s
	task, err := st.Task(tok)
	if err != nil {
		t.Fatal(err)
	}
	s.push(server.Outgoing{Task: &task})
	c.perform(applied{effects: effects, states: map[string]*engine.FlowState{"f": st}})
	effects = nil

	// The worker heartbeats every 4s (no details): the run r's timer moves.
	for _, at := range []time.Duration{4, 8, 12, 16} {
		s.beat([]engine.Token{tok}, nil, t0.Add(at*time.Second))
	}
	// Continue as new at +18s; the batch's effects are performed.
	run(engine.ContinueAsNew{FlowID: "f", RunID: "r"}, t0.Add(18*time.Second))
	c.perform(applied{effects: effects, states: map[string]*engine.FlowState{"f": st}})
	for _, a := range effects {
		t.Logf("effect %T %+v", a, a)
	}

	// The worker heartbeats at +20s under its token (run r).
	s.beat([]engine.Token{tok}, nil, t0.Add(20*time.Second))

	c.timers.mu.Lock()
	defer c.timers.mu.Unlock()
	for _, e := range c.timers.h {
		t.Logf("armed %s %s at +%v", e.arm.RunID, e.arm.Timer, e.arm.At.Sub(t0))
		if e.arm.Timer.Kind == engine.TimerHeartbeat && !e.arm.At.Equal(t0.Add(30*time.Second)) {
			t.Errorf("heartbeat timer of run %s at +%v, want +30s (the heartbeat at +20s + 10s): the new run's timer was armed from the start, ignoring the beats at +4..+16s, and no beat moves it: the attempt fails though its worker is alive",
				e.arm.RunID, e.arm.At.Sub(t0))
		}
	}
}
