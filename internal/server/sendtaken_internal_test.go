package server

import (
	"errors"
	"math"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// untakeSession records what sendTaken hands back; nothing else is used.
type untakeSession struct {
	Session
	back []Outgoing
}

func (s *untakeSession) Untake(msgs []Outgoing) { s.back = append(s.back, msgs...) }

// When a send breaks the stream, the tasks taken after it never went out:
// they go back to the session (whose Close hands them to the next free
// slot) instead of waiting for their attempt timeout; the one whose send
// failed, which may have reached the worker, does not (found in review).
//
// Covers: W3
func TestSendTaken_HandsBackWhatNeverWentOut(t *testing.T) {
	t.Parallel()
	task := func(id string) Outgoing {
		return Outgoing{Task: &engine.Task{Token: engine.Token{FlowID: id, Method: engine.MethodExecute, Attempt: 1}, FlowID: id}}
	}
	msgs := []Outgoing{task("a"), task("b"), task("c"), task("d")}
	sent := 0
	broken := errors.New("stream broken")
	send := func(*dexpb.PollWorkerTaskResponse) error {
		sent++
		if sent == 2 {
			return broken
		}
		return nil
	}
	sess := &untakeSession{}
	if err := sendTaken(sess, msgs, send, math.MaxInt32, nil); !errors.Is(err, broken) {
		t.Fatalf("sendTaken = %v, want the send's error", err)
	}
	if len(sess.back) != 2 || sess.back[0].Task.FlowID != "c" || sess.back[1].Task.FlowID != "d" {
		t.Fatalf("handed back %v, want c and d", sess.back)
	}
	sess.back = nil
	sent = 0
	if err := sendTaken(sess, msgs[:1], send, math.MaxInt32, nil); err != nil || len(sess.back) != 0 {
		t.Fatalf("all sent: %v, handed back %v", err, sess.back)
	}
}
