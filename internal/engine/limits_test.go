package engine

import (
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
	if !errors.As(err, &ee) || ee.Code != CodeResourceExhausted || !strings.Contains(ee.Message, "limits.maxRequestBytes") ||
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
