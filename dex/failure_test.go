package dex

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
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

// NonRetryable marks a failure so (the step's failure policy applies at
// once), keeps the error's type and message, and reports the stack of the
// call; an ordinary error or a RetryAfter is retryable.
//
// Covers: E9, E14
func TestFailure_NonRetryable(t *testing.T) {
	t.Parallel()
	f := failure([]byte("tok"), NonRetryable(fmt.Errorf("unknown currency %q", "XXX")), "stack of the handler").GetTaskFailure()
	if !f.GetNonRetryable() || f.GetMessage() != `unknown currency "XXX"` || f.GetErrorType() != "*errors.errorString" ||
		!strings.Contains(f.GetStack(), "TestFailure_NonRetryable") {
		t.Fatalf("failure = %v", f)
	}
	for _, err := range []error{errors.New("timeout"), RetryAfter(time.Second, errors.New("busy"))} {
		if failure(nil, err, "").GetTaskFailure().GetNonRetryable() {
			t.Errorf("%v marked non-retryable", err)
		}
	}
}
