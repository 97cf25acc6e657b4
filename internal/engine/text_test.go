package engine

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestFailureText_ReplayEqualsLive fails an attempt twice (retries
// exhausted: the flow fails) with type, message and stack longer than the
// payload limit, made of multi-byte characters or invalid UTF-8, as a
// worker could send them. Cutting at the byte limit once split a
// character: the live state kept the invalid bytes while the log (JSON)
// stored U+FFFD, so the replayed state differed from the live one and the
// live state could not be served (protobuf refuses invalid UTF-8 in a
// string). Every recorded text must be valid UTF-8, within the limit, cut
// on a character boundary, and the replay must equal the live state.
// Covers: E9, E14, E28
func TestFailureText_ReplayEqualsLive(t *testing.T) {
	const limit = 17
	tests := []struct{ name, text string }{
		{"2-byte", strings.Repeat("é", 20)},
		{"3-byte", strings.Repeat("€", 20)},
		{"4-byte", strings.Repeat("😀", 20)},
		{"mixed", "ab" + strings.Repeat("é€😀", 10)},
		{"invalid bytes", "ok \xff\xfe bad \xc3"},
		{"invalid and long", strings.Repeat("x\xe2\x82", 20)},
		{"cut at a truncated sequence", "0123456789abcdef\xf0\x9f\x98"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &node{t: t, e: New(Config{MaxPayloadBytes: limit})}
			def := &FlowDefinition{Type: "order", Steps: map[string]StepDef{"A": {}}}
			two := 2
			n.must(StartFlow{FlowID: "o-1", FlowType: "order", RunID: "r1", StartStep: "A", Definition: def,
				Config: &StepOptions{Execute: &MethodOptions{Retry: &RetryOptions{MaxAttempts: &two}}}}, base)
			for i := range 2 {
				now := base.Add(time.Duration(i) * time.Minute)
				n.must(TaskStarted{Token: tok(n.st, "A-1", 1)}, now)
				n.must(TaskFailed{Token: tok(n.st, "A-1", 1), Failure: Failure{Type: tt.text, Message: tt.text, Stack: tt.text}}, now)
				if i == 0 {
					lf := n.st.Step("A-1").LastFailure
					checkText(t, "message", lf.Message, tt.text, limit)
					checkText(t, "stack", lf.Stack, tt.text, limit)
					checkText(t, "type", lf.Type, tt.text, limit)
				}
			}
			if n.st.Status != StatusFailed {
				t.Fatalf("status %s, want FAILED", n.st.Status)
			}
			if !utf8.ValidString(n.st.Close.Message) {
				t.Errorf("flow message is not valid UTF-8: %q", n.st.Close.Message)
			}
			for _, ev := range n.st.History {
				if f := ev.Failure; f != nil && (!utf8.ValidString(f.Type) || !utf8.ValidString(f.Message) || !utf8.ValidString(f.Stack)) {
					t.Errorf("history event %d keeps invalid UTF-8: %+v", ev.ID, f)
				}
			}
			replayed := n.replay()
			if !reflect.DeepEqual(replayed, n.st) {
				t.Fatalf("replayed state differs from live state:\nlive:     %+v\nreplayed: %+v", n.st, replayed)
			}
		})
	}
}

// checkText checks a recorded text: valid UTF-8, at most limit bytes, and
// the longest such prefix of the text as sanitized.
func checkText(t *testing.T, field, got, sent string, limit int) {
	t.Helper()
	if !utf8.ValidString(got) || len(got) > limit {
		t.Fatalf("%s %q (%d bytes): want valid UTF-8 of at most %d bytes", field, got, len(got), limit)
	}
	want := strings.ToValidUTF8(sent, "\uFFFD")
	if !strings.HasPrefix(want, got) || (len(got) < len(want) && len(got)+utf8.RuneLen([]rune(want[len(got):])[0]) <= limit) {
		t.Fatalf("%s %q: want the longest prefix of %q within %d bytes", field, got, want, limit)
	}
}
