package dex

import (
	"errors"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
)

// TestFailure_InvalidUTF8IsSent: an error whose text holds invalid UTF-8
// (bytes formatted with %s, a truncated message) must still reach the
// server. Protobuf refuses to marshal such a string, so sending it unchanged
// failed the stream instead of the attempt; the SDK replaces invalid bytes
// with U+FFFD, deterministically, in type, message and stack.
// Covers: E14
func TestFailure_InvalidUTF8IsSent(t *testing.T) {
	t.Parallel()
	req := failure([]byte("tok"), errors.New("upstream said \xff\xfe"), "goroutine 1 \xc3")
	if _, err := proto.Marshal(req); err != nil {
		t.Fatalf("marshal the failure: %v", err)
	}
	f := req.GetTaskFailure()
	if f.GetMessage() != "upstream said \uFFFD" || f.GetStack() != "goroutine 1 \uFFFD" || !utf8.ValidString(f.GetErrorType()) {
		t.Fatalf("failure = %q / %q / %q", f.GetErrorType(), f.GetMessage(), f.GetStack())
	}
	var ra *retryAfterError
	if !errors.As(RetryAfter(0, errors.New("x")), &ra) {
		t.Fatal("RetryAfter returned no *retryAfterError")
	}
	ra.stack = "at \xe2\x82"
	if _, err := proto.Marshal(failure(nil, ra, "")); err != nil {
		t.Fatalf("marshal a retry-after failure: %v", err)
	}
}
