package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Admission of new work (issue 11, item 3). A FlowService call that asks
// for new work (start a flow, publish, set attributes, stop, skip a timer,
// invoke an RPC) passes the backend's Admit before its handler runs; a
// backend beyond capacity refuses it with an *OverloadError, which becomes
// RESOURCE_EXHAUSTED with a RetryInfo detail (errors.go). The refusal
// comes before the handler decodes or decides anything, so a refused call
// changed nothing, and the SDK may send even a once call again after the
// hint. Reads, long polls (WaitForFlow) and everything on a worker stream
// (results, which free capacity) are never refused here.

// Work describes one call asking for new work.
type Work struct {
	// Op is the call ("StartFlow", "PublishToChannel", ...).
	Op string
	// FlowType is a StartFlow's flow type; empty for the other calls.
	FlowType string
	// Bytes is the encoded size of the request.
	Bytes int
}

// Admitter is implemented by a Backend that bounds the work it accepts.
type Admitter interface {
	// Admit reserves capacity for w, or refuses it with an *OverloadError
	// without side effects. release gives the capacity back; the caller
	// calls it once the call has been answered.
	Admit(w Work) (release func(), err error)
}

// OverloadError is a refusal of new work beyond capacity: nothing was
// done, and the same call may be sent again after RetryAfter.
type OverloadError struct {
	// Limit is the configuration key of the limit that was reached.
	Limit string
	// RetryAfter is the suggested wait before sending the call again.
	RetryAfter time.Duration
	// Message says what is full, for people.
	Message string
}

func (e *OverloadError) Error() string {
	return fmt.Sprintf("server overloaded: %s (%s); nothing was done, retry after %v", e.Message, e.Limit, e.RetryAfter)
}

// newWork maps the FlowService methods that ask for new work to their
// names; every other method is not subject to admission.
var newWork = map[string]string{
	dexpb.FlowService_StartFlow_FullMethodName:        "StartFlow",
	dexpb.FlowService_StopFlow_FullMethodName:         "StopFlow",
	dexpb.FlowService_PublishToChannel_FullMethodName: "PublishToChannel",
	dexpb.FlowService_SetAttributes_FullMethodName:    "SetAttributes",
	dexpb.FlowService_InvokeRPC_FullMethodName:        "InvokeRPC",
	dexpb.FlowService_SkipTimer_FullMethodName:        "SkipTimer",
	dexpb.FlowService_ResetFlow_FullMethodName:        "ResetFlow",
}

// admit is the unary interceptor that asks the serving backend to admit
// new work. Without a serving backend the handler runs and answers
// UNAVAILABLE itself.
func (s *Server) admit(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	op, ok := newWork[info.FullMethod]
	if !ok {
		return handler(ctx, req)
	}
	box := s.backend.Load()
	if box == nil {
		return handler(ctx, req)
	}
	a, ok := box.b.(Admitter)
	if !ok {
		return handler(ctx, req)
	}
	w := Work{Op: op}
	if m, ok := req.(proto.Message); ok {
		w.Bytes = proto.Size(m)
	}
	if r, ok := req.(*dexpb.StartFlowRequest); ok {
		w.FlowType = r.GetFlowType()
	}
	release, err := a.Admit(w)
	if err != nil {
		return nil, statusOf(err)
	}
	once := &releaseOnce{release: release}
	defer once.do()
	return handler(context.WithValue(ctx, releaseKey{}, once), req)
}

// releaseKey is the context key of a call's admission release.
type releaseKey struct{}

type releaseOnce struct {
	sync.Once
	release func()
}

func (r *releaseOnce) do() { r.Do(r.release) }

// ReleaseAdmission gives the capacity the call of ctx holds back before
// the call ends, once the call stops loading the sequencer and the log: an
// InvokeRPC waiting for a worker's answer must not count as work in
// progress, else a few slow RPCs would make the server refuse all new
// work. Its result is then committed like a worker's (never refused). It
// does nothing for a call that holds no capacity, and more than once.
func ReleaseAdmission(ctx context.Context) {
	if r, ok := ctx.Value(releaseKey{}).(*releaseOnce); ok {
		r.do()
	}
}
