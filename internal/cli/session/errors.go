package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/cli/output"
)

// Failure is a command that failed: a request the server refused or that
// got no answer, or a request the CLI refused to send. Exit 1.
type Failure struct {
	// Msg is the first line: what failed, with the gRPC code.
	Msg string
	// Code is the gRPC code; codes.OK when no call failed.
	Code codes.Code
	// ServerMsg is the server's message, for the JSON error document.
	ServerMsg string
	// Hint says what to do.
	Hint string
	// Detail is further text for people (a worker's stack, a retry
	// command line).
	Detail string
	// Fields are more fields of the JSON error document.
	Fields output.Object
}

func (f *Failure) Error() string { return f.Msg }

// CallInfo says what a failed call was about, for its message and hint.
type CallInfo struct {
	FlowID, RunID string
	// Hints replace the generic hint of a code.
	Hints map[codes.Code]string
	// Detail is added below the hint.
	Detail string
	// Fields are more fields of the JSON error document.
	Fields output.Object
}

// Fail turns the error of a call into a *Failure with a hint.
func (s *Session) Fail(ctx context.Context, err error, info CallInfo) error {
	return s.Failure(ctx, err, info)
}

// Failure is Fail with the concrete type, for callers that adjust it.
func (s *Session) Failure(ctx context.Context, err error, info CallInfo) *Failure {
	if f := s.codecFailure(err, info); f != nil {
		return f
	}
	var st *status.Status
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		st = status.FromContextError(err)
	default:
		st = status.Convert(err)
	}
	code := st.Code()
	f := &Failure{
		Msg:       fmt.Sprintf("%s: %s: %s", strings.Join(s.Words, " "), output.CodeName(code), st.Message()),
		Code:      code,
		ServerMsg: st.Message(),
		Detail:    info.Detail,
		Fields:    info.Fields,
	}
	f.Hint = s.hint(ctx, code, info)
	if code == codes.Unauthenticated && strings.Contains(st.Message(), "requires TLS") {
		f.Hint = fmt.Sprintf("the server at %s serves TLS; pass --tls-ca FILE (or --tls, or $%s)", s.ServerList(), TLSCAEnv)
	}
	return f
}

// hint says what to do about a failed call.
func (s *Session) hint(ctx context.Context, code codes.Code, info CallInfo) string {
	flow := output.ShellQuote(info.FlowID)
	if code == codes.FailedPrecondition && info.FlowID != "" {
		if h := s.closedFlowHint(ctx, info); h != "" {
			return h
		}
	}
	if h, ok := info.Hints[code]; ok {
		return h
	}
	switch code {
	case codes.NotFound:
		if info.RunID != "" {
			return fmt.Sprintf("run %q of flow %q not found; list its runs with \"dexcli flow list\"", info.RunID, info.FlowID)
		}
		if info.FlowID != "" {
			return fmt.Sprintf("flow %q not found; list flows with \"dexcli flow list\"", info.FlowID)
		}
		return "not found"
	case codes.FailedPrecondition:
		if info.FlowID != "" {
			return fmt.Sprintf("the flow's state does not allow this; see \"dexcli flow state %s\"", flow)
		}
		return "the server refused the call in its current state; nothing changed"
	case codes.AlreadyExists:
		return fmt.Sprintf("flow %q already has a run that the ID reuse policy keeps; see \"dexcli flow describe %s\", or choose another --id-reuse", info.FlowID, flow)
	case codes.Unavailable:
		return fmt.Sprintf("no active server answered at %s; check --server (or $%s) and that the server is running", s.ServerList(), ServerEnv)
	case codes.DeadlineExceeded:
		return fmt.Sprintf("no answer within %s; retry, or raise --timeout", s.Timeout)
	case codes.Canceled:
		return "the call was cancelled"
	case codes.Unauthenticated:
		return fmt.Sprintf("the server requires credentials; pass --token-file PATH (or $%s), --credential-file PATH for the admin token, or a client certificate (--tls-cert, --tls-key)", TokenFileEnv)
	case codes.PermissionDenied:
		return "the server refused the call for the caller's role (see the message); use a token or certificate with that role"
	case codes.InvalidArgument:
		return fmt.Sprintf("the server refused the request; check the arguments (\"dexcli %s --help\")", strings.Join(s.Words, " "))
	case codes.ResourceExhausted:
		return "a value is larger than the server's payload limit (4 MiB per value by default)"
	case codes.Unimplemented:
		return fmt.Sprintf("the server at %s does not serve this call; check that --server names a Dex-ZD API address", s.ServerList())
	default:
		return "the server failed; see its logs"
	}
}

// closedFlowHint describes a closed flow after a FAILED_PRECONDITION, or
// returns "" when the flow is still running or its summary is unknown.
func (s *Session) closedFlowHint(ctx context.Context, info CallInfo) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var sum *dexpb.FlowSummary
	err := s.Flow(ctx, OnUnavailable, func(ctx context.Context, c dexpb.FlowServiceClient) error {
		r, err := c.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: info.FlowID, RunId: info.RunID})
		sum = r.GetSummary()
		return err
	})
	if err != nil || sum == nil || sum.GetStatus() == dexpb.FlowStatus_FLOW_STATUS_RUNNING {
		return ""
	}
	when := ""
	if sum.GetCloseTime() != nil {
		when = " at " + output.TextTime(sum.GetCloseTime())
	}
	return fmt.Sprintf("flow %q is not running (%s%s); use \"dexcli flow describe %s\"",
		info.FlowID, output.EnumText(sum.GetStatus()), when, output.ShellQuote(info.FlowID))
}

// Finish prints the outcome of a command's error and returns what ends
// the run: nil on success, the *UsageError itself (the caller prints it
// with the command's usage line), else an ExitError. parent is the context
// of the whole run: when it was cancelled (Ctrl-C), the exit code is 130.
func (s *Session) Finish(parent context.Context, err error) error {
	if err == nil {
		return nil
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return ue
	}
	var f *Failure
	if !errors.As(err, &f) {
		f = &Failure{Msg: fmt.Sprintf("%s: %v", strings.Join(s.Words, " "), err)}
	}
	w := s.Stderr()
	fmt.Fprintf(w, "dexcli: %s\n", f.Msg)
	if f.Hint != "" {
		fmt.Fprintln(w, f.Hint)
	}
	if f.Detail != "" {
		fmt.Fprintln(w, strings.TrimRight(f.Detail, "\n"))
	}
	if s.Out.JSON {
		e := output.Object{}
		if f.Code != codes.OK {
			e = e.Add("code", output.CodeName(f.Code)).Add("message", f.ServerMsg)
		} else {
			e = e.Add("message", f.Msg)
		}
		if f.Hint != "" {
			e = e.Add("hint", f.Hint)
		}
		doc := append(output.Object{{"error", e}}, f.Fields...)
		_ = s.Out.Document(doc)
	}
	if parent.Err() != nil {
		return ExitError{Code: ExitInterrupted}
	}
	return ExitError{Code: ExitFailure}
}
