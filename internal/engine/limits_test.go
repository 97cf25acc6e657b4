package engine

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// Covers: E28
func TestConfig_LimitDefaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cfg            Config
		request, attrs int
	}{
		{Config{}, 8 << 20, 4 << 20},
		{Config{MaxPayloadBytes: 64 << 20}, 64 << 20, 64 << 20},
		{Config{MaxRequestBytes: 1 << 20, MaxFlowAttributeBytes: 2 << 20}, 1 << 20, 2 << 20},
	}
	for _, c := range cases {
		if got := c.cfg.maxRequest(); got != c.request {
			t.Errorf("%+v: maxRequest = %d, want %d", c.cfg, got, c.request)
		}
		if got := c.cfg.maxFlowAttributes(); got != c.attrs {
			t.Errorf("%+v: maxFlowAttributes = %d, want %d", c.cfg, got, c.attrs)
		}
	}
}

// The scenario of issue 11: a StartFlow with 12 attributes of 4 MiB each
// under the default limits is refused with RESOURCE_EXHAUSTED naming
// limits.maxRequestBytes, and nothing is to be logged.
//
// Covers: E28
func TestDecide_StartWithTwelveLargeAttributesIsRefused(t *testing.T) {
	t.Parallel()
	e := New(Config{})
	big := Value{Type: "bytes", Data: make([]byte, 4<<20)}
	c := StartFlow{FlowID: "f", FlowType: "t", RunID: "r"}
	for i := range 12 {
		c.Attributes = append(c.Attributes, AttributeWrite{Name: string(rune('a' + i)), Value: big})
	}
	recs, err := e.Decide(nil, c, time.Unix(0, 0))
	var ee *Error
	if !errors.As(err, &ee) || ee.Code != CodeResourceExhausted || ee.Limit != "limits.maxRequestBytes" ||
		!strings.Contains(ee.Message, "limits.maxRequestBytes") ||
		!strings.Contains(ee.Message, "50331648 bytes") {
		t.Fatalf("Decide = %v, %v; want RESOURCE_EXHAUSTED naming limits.maxRequestBytes and the size", recs, err)
	}
	if len(recs) != 0 {
		t.Fatalf("records on a refusal: %v", recs)
	}
	c.Attributes = c.Attributes[:2] // 8 MiB: at the request limit, above the attribute limit
	if _, err := e.Decide(nil, c, time.Unix(0, 0)); CodeOf(err) != CodeResourceExhausted ||
		!strings.Contains(err.Error(), "limits.maxFlowAttributeBytes") {
		t.Fatalf("two attributes of 4 MiB: %v; want RESOURCE_EXHAUSTED naming limits.maxFlowAttributeBytes", err)
	}
	c.Attributes = c.Attributes[:1]
	c.StartStep, c.Input = "s", big // 8 MiB: at both limits
	if _, err := e.Decide(nil, c, time.Unix(0, 0)); err != nil {
		t.Fatalf("an input and an attribute of 4 MiB: %v", err)
	}
}

// MaxDecisionBytes bounds the encoded records of the largest requests the
// limits accept, so the node's log record limit (sized from it) never
// refuses one: an Execute whose movement inputs fill the request, and an
// RPC with an input at the value limit whose result's movements fill the
// request.
//
// Covers: E28
func TestEngine_MaxDecisionBytesBoundsTheLargestRequests(t *testing.T) {
	t.Parallel()
	n := startedNode(t)
	big := Value{Type: "bytes", Data: bytes.Repeat([]byte{0xff}, DefaultMaxPayloadBytes)}
	moves := []Movement{{StepType: "Charge", Input: big}, {StepType: "Charge", Input: big}}
	encoded := func(recs []Record) int {
		total := 0
		for _, r := range recs {
			b, err := MarshalRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			total += len(b)
		}
		return total
	}
	limit := n.e.MaxDecisionBytes()

	n.must(TaskStarted{Token: tok(n.st, "Reserve-1", 1)}, base)
	recs, err := n.e.Decide(n.st, ExecuteResult{Token: tok(n.st, "Reserve-1", 1),
		Decision: Decision{Kind: DecideMovements, Movements: moves}}, base)
	if err != nil || len(recs) < 3 {
		t.Fatalf("Execute with 8 MiB of movement inputs: %v, %d records", err, len(recs))
	}
	if got := encoded(recs); got > limit {
		t.Errorf("Execute: records are %d bytes encoded, above MaxDecisionBytes %d", got, limit)
	}

	task, err := n.e.RPCTask(n.st, InvokeRPC{FlowID: "o-1", CallID: "c1", Name: "status", Input: big}, 1)
	if err != nil {
		t.Fatal(err)
	}
	recs, err = n.e.Decide(n.st, RPCResult{Token: task.Token, Name: "status", Input: big, Movements: moves}, base)
	if err != nil {
		t.Fatalf("RPC result with 8 MiB of movement inputs: %v", err)
	}
	if got := encoded(recs); got > limit || got < limit*3/4 {
		t.Errorf("RPC: records are %d bytes encoded; MaxDecisionBytes %d should bound them closely", got, limit)
	}
}
