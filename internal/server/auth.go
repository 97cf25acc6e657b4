package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/auth"
)

// Authorization (issue 16). Every call, unary or stream, passes one
// interceptor (authorizeUnary, authorizeStream) before admission and its
// handler: it authenticates the caller (a bearer token, a verified client
// certificate, or nobody) with the Options.Auth authorizer and checks the
// permission that Permissions names for the method. A method missing from
// the table needs admin, so a new RPC is never open by mistake (and a
// test over the service descriptors fails until it has its entry). On the
// worker stream, every Hello is also checked against the flow types the
// worker is granted. A refused call answers UNAUTHENTICATED (no valid
// credentials) or PERMISSION_DENIED (a principal without the role), the
// message naming the role needed, and is logged at WARN with the
// caller's identity, the method and the flow ID or type, at most
// deniedLogBurst lines per deniedLogWindow (the rest are counted in the
// next line).

// Permissions is the permission each method needs.
var Permissions = map[string]auth.Permission{
	dexpb.FlowService_GetFlowSummary_FullMethodName:   auth.Reader,
	dexpb.FlowService_GetFlowState_FullMethodName:     auth.Reader,
	dexpb.FlowService_GetHistoryEvents_FullMethodName: auth.Reader,
	dexpb.FlowService_GetAttributes_FullMethodName:    auth.Reader,
	dexpb.FlowService_ListFlows_FullMethodName:        auth.Reader,
	dexpb.FlowService_SearchFlows_FullMethodName:      auth.Reader,
	dexpb.FlowService_WaitForFlow_FullMethodName:      auth.Reader,

	dexpb.FlowService_WaitForStepCompletion_FullMethodName: auth.Reader,
	dexpb.FlowService_WaitForAttribute_FullMethodName:      auth.Reader,

	dexpb.FlowService_StartFlow_FullMethodName:        auth.Client,
	dexpb.FlowService_StopFlow_FullMethodName:         auth.Client,
	dexpb.FlowService_PublishToChannel_FullMethodName: auth.Client,
	dexpb.FlowService_SetAttributes_FullMethodName:    auth.Client,
	dexpb.FlowService_InvokeRPC_FullMethodName:        auth.Client,
	dexpb.FlowService_SkipTimer_FullMethodName:        auth.Client,
	// A reset (E37) is a flow write like a stop: operators call it with
	// the client role.
	dexpb.FlowService_ResetFlow_FullMethodName: auth.Client,

	dexpb.WorkerTaskService_PollWorkerTask_FullMethodName: auth.Worker,

	dexpb.AdminService_Describe_FullMethodName: auth.Admin,
	dexpb.AdminService_StepDown_FullMethodName: auth.Admin,

	// Probes and the SDK's liveness checks need no credentials; they say
	// only whether the process serves.
	grpc_health_v1.Health_Check_FullMethodName: auth.Open,
	grpc_health_v1.Health_Watch_FullMethodName: auth.Open,
	grpc_health_v1.Health_List_FullMethodName:  auth.Open,
	// Reflection lists the API's schema, no data.
	reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName:      auth.Reader,
	reflectionv1alpha.ServerReflection_ServerReflectionInfo_FullMethodName: auth.Reader,
}

// securityOptions are the grpc.Server options of TLS (Options.TLS) and
// of the authorization interceptors.
func (s *Server) securityOptions() []grpc.ServerOption {
	var opts []grpc.ServerOption
	if s.opts.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.opts.TLS.Config("h2"))))
	}
	return append(opts, grpc.ChainUnaryInterceptor(s.authorizeUnary), grpc.ChainStreamInterceptor(s.authorizeStream))
}

// permission is what method needs: admin when the table lacks it.
func permission(method string) auth.Permission {
	if p, ok := Permissions[method]; ok {
		return p
	}
	return auth.Admin
}

// credentialsOf reads what the call presented: the authorization metadata
// and the verified client certificate of its TLS connection.
func credentialsOf(ctx context.Context) auth.Credentials {
	var c auth.Credentials
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			c.Authorization = v[0]
		}
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			if ch := ti.State.VerifiedChains; len(ch) > 0 && len(ch[0]) > 0 {
				c.Certificate = ch[0][0]
			}
		}
	}
	return c
}

// check authenticates the call and checks its method's permission.
func (s *Server) check(ctx context.Context, method string, req any) (auth.Principal, error) {
	p, err := s.auth.Check(credentialsOf(ctx), method, permission(method))
	if err != nil {
		flowID := ""
		if r, ok := req.(interface{ GetFlowId() string }); ok {
			flowID = r.GetFlowId()
		}
		s.denied.log(s.log, err, p.Identity, method, "flowId", flowID)
		return p, statusOf(err)
	}
	return p, nil
}

func (s *Server) authorizeUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if _, err := s.check(ctx, info.FullMethod, req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (s *Server) authorizeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	p, err := s.check(ss.Context(), info.FullMethod, nil)
	if err != nil {
		return err
	}
	if info.FullMethod == dexpb.WorkerTaskService_PollWorkerTask_FullMethodName && !p.Grant.Allows(auth.Admin) {
		ss = &workerGrantStream{ServerStream: ss, s: s, p: p}
	}
	return handler(srv, ss)
}

// workerGrantStream refuses a Hello that names a flow type the worker is
// not granted: the stream ends with PERMISSION_DENIED before a session
// opens.
type workerGrantStream struct {
	grpc.ServerStream
	s *Server
	p auth.Principal
}

func (w *workerGrantStream) RecvMsg(m any) error {
	if err := w.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	r, ok := m.(*dexpb.PollWorkerTaskRequest)
	if !ok || r.GetHello() == nil {
		return nil
	}
	for _, ft := range r.GetHello().GetFlowTypes() {
		if t := ft.GetFlowType(); !w.p.Grant.AllowsFlowType(t) {
			err := &auth.DeniedError{Principal: w.p, Method: dexpb.WorkerTaskService_PollWorkerTask_FullMethodName, Need: auth.Worker, FlowType: t}
			w.s.denied.log(w.s.log, err, w.p.Identity, err.Method, "flowType", t)
			return statusOf(err)
		}
	}
	return nil
}

// The rate of the WARN lines of refused calls: a misconfigured client
// retrying in a loop must not flood the log.
const (
	deniedLogWindow = 10 * time.Second
	deniedLogBurst  = 10
)

// deniedLog limits the WARN lines of refused calls.
type deniedLog struct {
	now func() time.Time

	mu         sync.Mutex
	start      time.Time
	n          int
	suppressed int
}

func (d *deniedLog) log(log *slog.Logger, err error, identity, method, key, value string) {
	now := time.Now
	if d.now != nil {
		now = d.now
	}
	t := now()
	d.mu.Lock()
	if t.Sub(d.start) >= deniedLogWindow {
		d.start, d.n = t, 0
	}
	if d.n >= deniedLogBurst {
		d.suppressed++
		d.mu.Unlock()
		return
	}
	d.n++
	suppressed := d.suppressed
	d.suppressed = 0
	d.mu.Unlock()
	log.Warn("call refused", "identity", identity, "method", method, key, value, "error", err.Error(), "suppressedBefore", suppressed)
}
