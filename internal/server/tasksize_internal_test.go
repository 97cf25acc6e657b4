package server

import (
	"math"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// A task larger than the worker accepts is not sent (the worker would end
// the stream on it, losing every task sent after it, issue 11): it goes to
// tooLarge with its encoded size, and the tasks around it are sent, in
// order, on the same stream; nothing is handed back.
//
// Covers: W3, E28
func TestSendTaken_TaskTooLargeIsNotSentAndOthersAre(t *testing.T) {
	t.Parallel()
	task := func(id string, input int) Outgoing {
		return Outgoing{Task: &engine.Task{Token: engine.Token{FlowID: id, Method: engine.MethodExecute, Attempt: 1}, FlowID: id,
			Input: engine.Value{Data: make([]byte, input)}}}
	}
	msgs := []Outgoing{task("a", 10), task("big", 2000), task("c", 10), {Drain: &Drain{Reason: DrainShutdown}}}
	var sent []string
	send := func(m *dexpb.PollWorkerTaskResponse) error {
		if tk := m.GetTask(); tk != nil {
			sent = append(sent, tk.GetFlowId())
		} else {
			sent = append(sent, "drain")
		}
		return nil
	}
	var tooLarge []string
	sizes := map[string]int{}
	sess := &untakeSession{}
	err := sendTaken(sess, msgs, send, 1000, func(t *engine.Task, size int) {
		tooLarge = append(tooLarge, t.FlowID)
		sizes[t.FlowID] = size
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 3 || sent[0] != "a" || sent[1] != "c" || sent[2] != "drain" {
		t.Fatalf("sent %v, want a, c, drain", sent)
	}
	if len(tooLarge) != 1 || tooLarge[0] != "big" || sizes["big"] <= 2000 {
		t.Fatalf("too large: %v (sizes %v), want big at more than 2000 bytes", tooLarge, sizes)
	}
	if len(sess.back) != 0 {
		t.Fatalf("handed back %v, want nothing", sess.back)
	}
	// The limit is the encoded message's size: a task of exactly the limit
	// is sent.
	var exact int
	_ = sendTaken(sess, msgs[1:2], send, 0, func(_ *engine.Task, size int) { exact = size })
	sent = nil
	if err := sendTaken(sess, msgs[1:2], send, exact, func(*engine.Task, int) { t.Fatal("a task of exactly the limit is too large") }); err != nil ||
		len(sent) != 1 {
		t.Fatalf("task of exactly %d bytes: sent %v, %v", exact, sent, err)
	}
}

// The largest task sent to a worker is what its Hello says it accepts,
// gRPC's default 4 MiB when it does not say (an older SDK), and never more
// than the server's own message limit, which Welcome states.
//
// Covers: E28, W1
func TestMaxTaskBytes_FromHello(t *testing.T) {
	t.Parallel()
	s := New(Options{MaxPayloadBytes: 4 << 20})
	msg := s.MaxMessageBytes() // 9 MiB with the default limits
	tests := []struct {
		name  string
		hello *dexpb.Hello
		want  int
	}{
		{"older SDK", &dexpb.Hello{}, 4 << 20},
		{"smaller limit", &dexpb.Hello{MaxTaskBytes: 1 << 20}, 1 << 20},
		{"unlimited worker", &dexpb.Hello{MaxTaskBytes: math.MaxUint32}, msg},
		{"just above the server's", &dexpb.Hello{MaxTaskBytes: uint32(msg + 1)}, msg}, //nolint:gosec // far below MaxUint32
	}
	for _, tt := range tests {
		if got := s.maxTaskBytes(tt.hello); got != tt.want {
			t.Errorf("%s: max task bytes %d, want %d", tt.name, got, tt.want)
		}
	}
}
