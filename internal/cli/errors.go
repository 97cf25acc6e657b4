package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
)

// usageError is a wrong command line: exit 2 with a usage line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error {
	return usageError{msg: fmt.Sprintf(format, a...)}
}

// failure is a command that failed: a request the server refused or that
// got no answer, or a request the CLI refused to send. Exit 1.
type failure struct {
	// msg is the first line: what failed, with the gRPC code.
	msg string
	// code is the gRPC code; codes.OK when no call failed.
	code codes.Code
	// serverMsg is the server's message, for the JSON error document.
	serverMsg string
	// hint says what to do.
	hint string
	// detail is further text for people (a worker's stack, a retry
	// command line).
	detail string
	// fields are more fields of the JSON error document.
	fields jsonObject
}

func (f *failure) Error() string { return f.msg }

// callInfo says what a failed call was about, for its message and hint.
type callInfo struct {
	flowID, runID string
	// hints replace the generic hint of a code.
	hints map[codes.Code]string
	// detail is added below the hint.
	detail string
	// fields are more fields of the JSON error document.
	fields jsonObject
}

// fail turns the error of a call into a failure with a hint.
func (s *session) fail(ctx context.Context, err error, info callInfo) error {
	return s.failure(ctx, err, info)
}

// failure is fail with the concrete type, for callers that adjust it.
func (s *session) failure(ctx context.Context, err error, info callInfo) *failure {
	var st *status.Status
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		st = status.FromContextError(err)
	default:
		st = status.Convert(err)
	}
	code := st.Code()
	f := &failure{
		msg:       fmt.Sprintf("%s: %s: %s", strings.Join(s.words, " "), codeName(code), st.Message()),
		code:      code,
		serverMsg: st.Message(),
		detail:    info.detail,
		fields:    info.fields,
	}
	f.hint = s.hint(ctx, code, info)
	return f
}

// hint says what to do about a failed call.
func (s *session) hint(ctx context.Context, code codes.Code, info callInfo) string {
	flow := shellQuote(info.flowID)
	if code == codes.FailedPrecondition && info.flowID != "" {
		if h := s.closedFlowHint(ctx, info); h != "" {
			return h
		}
	}
	if h, ok := info.hints[code]; ok {
		return h
	}
	switch code {
	case codes.NotFound:
		if info.runID != "" {
			return fmt.Sprintf("run %q of flow %q not found; list its runs with \"dexcli flow list\"", info.runID, info.flowID)
		}
		if info.flowID != "" {
			return fmt.Sprintf("flow %q not found; list flows with \"dexcli flow list\"", info.flowID)
		}
		return "not found"
	case codes.FailedPrecondition:
		if info.flowID != "" {
			return fmt.Sprintf("the flow's state does not allow this; see \"dexcli flow state %s\"", flow)
		}
		return "the server refused the call in its current state; nothing changed"
	case codes.AlreadyExists:
		return fmt.Sprintf("flow %q already has a run that the ID reuse policy keeps; see \"dexcli flow describe %s\", or choose another --id-reuse", info.flowID, flow)
	case codes.Unavailable:
		return fmt.Sprintf("no active server answered at %s; check --server (or $%s) and that the server is running", s.serverList(), serverEnv)
	case codes.DeadlineExceeded:
		return fmt.Sprintf("no answer within %s; retry, or raise --timeout", s.timeout)
	case codes.Canceled:
		return "the call was cancelled"
	case codes.Unauthenticated:
		return "the server requires an admin credential; pass --credential-file PATH"
	case codes.PermissionDenied:
		return "the server refused the credential; check the token in --credential-file"
	case codes.InvalidArgument:
		return fmt.Sprintf("the server refused the request; check the arguments (\"dexcli %s --help\")", strings.Join(s.words, " "))
	case codes.ResourceExhausted:
		return "a value is larger than the server's payload limit (4 MiB per value by default)"
	case codes.Unimplemented:
		return fmt.Sprintf("the server at %s does not serve this call; check that --server names a Dex-ZD API address", s.serverList())
	default:
		return "the server failed; see its logs"
	}
}

// closedFlowHint describes a closed flow after a FAILED_PRECONDITION, or
// returns "" when the flow is still running or its summary is unknown.
func (s *session) closedFlowHint(ctx context.Context, info callInfo) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var sum *dexpb.FlowSummary
	err := s.flow(ctx, onUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
		r, err := c.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: info.flowID, RunId: info.runID})
		sum = r.GetSummary()
		return err
	})
	if err != nil || sum == nil || sum.GetStatus() == dexpb.FlowStatus_FLOW_STATUS_RUNNING {
		return ""
	}
	when := ""
	if sum.GetCloseTime() != nil {
		when = " at " + textTime(sum.GetCloseTime())
	}
	return fmt.Sprintf("flow %q is not running (%s%s); use \"dexcli flow describe %s\"",
		info.flowID, enumText(sum.GetStatus()), when, shellQuote(info.flowID))
}

// finish prints the outcome of a command's error and returns the exit
// code. parent is the context of the whole run: when it was cancelled
// (Ctrl-C), the exit code is 130.
func (s *session) finish(parent context.Context, err error) int {
	if err == nil {
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		g := s.app.findGroup(s.words[0])
		return s.app.usageFailure(ue, g, g.find(s.words[1]))
	}
	var f *failure
	if !errors.As(err, &f) {
		f = &failure{msg: fmt.Sprintf("%s: %v", strings.Join(s.words, " "), err)}
	}
	w := s.stderr()
	fmt.Fprintf(w, "dexcli: %s\n", f.msg)
	if f.hint != "" {
		fmt.Fprintln(w, f.hint)
	}
	if f.detail != "" {
		fmt.Fprintln(w, strings.TrimRight(f.detail, "\n"))
	}
	if s.out.json {
		e := jsonObject{}
		if f.code != codes.OK {
			e = e.add("code", codeName(f.code)).add("message", f.serverMsg)
		} else {
			e = e.add("message", f.msg)
		}
		if f.hint != "" {
			e = e.add("hint", f.hint)
		}
		doc := append(jsonObject{{"error", e}}, f.fields...)
		_ = s.out.document(doc)
	}
	if parent.Err() != nil {
		return exitInterrupted
	}
	return exitFailure
}

// codeNames are the canonical names of the gRPC codes.
var codeNames = map[codes.Code]string{
	codes.OK:                 "OK",
	codes.Canceled:           "CANCELLED",
	codes.Unknown:            "UNKNOWN",
	codes.InvalidArgument:    "INVALID_ARGUMENT",
	codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
	codes.NotFound:           "NOT_FOUND",
	codes.AlreadyExists:      "ALREADY_EXISTS",
	codes.PermissionDenied:   "PERMISSION_DENIED",
	codes.ResourceExhausted:  "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION",
	codes.Aborted:            "ABORTED",
	codes.OutOfRange:         "OUT_OF_RANGE",
	codes.Unimplemented:      "UNIMPLEMENTED",
	codes.Internal:           "INTERNAL",
	codes.Unavailable:        "UNAVAILABLE",
	codes.DataLoss:           "DATA_LOSS",
	codes.Unauthenticated:    "UNAUTHENTICATED",
}

// codeName is the canonical name of a gRPC code ("NOT_FOUND").
func codeName(c codes.Code) string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("CODE_%d", c)
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@%+", r)
	}
	if !strings.ContainsFunc(s, func(r rune) bool { return !safe(r) }) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
