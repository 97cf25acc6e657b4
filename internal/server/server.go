// Package server is the gRPC surface of a node: the handlers of
// dex.FlowService, dex.WorkerTaskService and dex.AdminService, the standard
// grpc.health.v1 service, the conversion between the protobuf contract and
// the engine's types, and the mapping of errors to status codes (errors.go).
//
// The handlers hold no state of their own. They consult the Backend of the
// serving instance (package node) on every call: while there is none, or it
// is not serving (standby, draining, lease no longer valid), public calls
// answer UNAVAILABLE and the readiness names NOT_SERVING at once (H2, L15).
package server

import (
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/auth"
	"github.com/dexzd/dexzd/internal/engine"
)

// Options configures the server.
type Options struct {
	// NodeID is the node's ID; StepDown checks it (A2).
	NodeID string
	// MaxPayloadBytes is limits.maxPayloadBytes.
	MaxPayloadBytes int
	// MaxRequestBytes is limits.maxRequestBytes and MaxFlowAttributeBytes
	// limits.maxFlowAttributeBytes; they size the largest message
	// (MaxMessageBytes). 0 means the engine's default.
	MaxRequestBytes       int
	MaxFlowAttributeBytes int
	// WaitForFlowMax caps a WaitForFlow long poll (E25).
	WaitForFlowMax time.Duration
	// AdminCredential, when set, is the token AdminService calls must send
	// as "authorization: Bearer <token>" metadata (A9). Used only when
	// Auth is nil.
	AdminCredential string
	// Auth authenticates callers and grants their roles (auth.go); nil
	// means open, but for AdminCredential.
	Auth *auth.Authorizer
	// TLS, when set, serves TLS with its (reloaded) certificate; nil
	// means plaintext. Serve on RefusePlaintext(listener) so that a
	// plaintext client is told TLS is required.
	TLS *auth.TLSServer
	// WatchInterval is how often a health Watch re-evaluates; 0 means
	// 200 ms.
	WatchInterval time.Duration
	// MaxConcurrentStreams is limits.maxConcurrentStreams: the calls (and
	// worker streams) one connection may have open at once; a client's
	// further calls wait in the client for a free stream. 0 means
	// DefaultMaxConcurrentStreams.
	MaxConcurrentStreams uint32
	// NoReflection leaves out the gRPC server reflection service
	// (api.reflection: false).
	NoReflection bool
	Logger       *slog.Logger
	// TracerProvider, when set, traces every call but the worker stream
	// and health checks (tracing.go); nil turns tracing off.
	TracerProvider trace.TracerProvider
}

// DefaultMaxConcurrentStreams is the default Options.MaxConcurrentStreams.
const DefaultMaxConcurrentStreams = 16384

// Server holds the services. Register them on a grpc.Server created with
// GRPCOptions; SetBackend when an instance starts serving.
type Server struct {
	opts    Options
	log     *slog.Logger
	auth    *auth.Authorizer
	denied  deniedLog
	backend atomic.Pointer[backendBox]
	// reason, when set, replaces ErrNotServing's text in the UNAVAILABLE
	// answers (a standby says it is one, P3).
	reason atomic.Pointer[string]
	// hot, when set, reports whether this process is a hot standby that
	// follows the log within behindLagThreshold (dex.HotStandby, H3).
	hot atomic.Pointer[func() bool]
	// stepDown is the serving instance's step down and its progress.
	stepDown stepDownState

	closeOnce sync.Once
	closed    chan struct{}
}

type backendBox struct{ b Backend }

// New returns a server without a backend: every public call answers
// UNAVAILABLE until SetBackend.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxPayloadBytes <= 0 {
		opts.MaxPayloadBytes = 4 << 20
	}
	if opts.WaitForFlowMax <= 0 {
		opts.WaitForFlowMax = 60 * time.Second
	}
	if opts.WatchInterval <= 0 {
		opts.WatchInterval = 200 * time.Millisecond
	}
	if opts.MaxConcurrentStreams == 0 {
		opts.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	a := opts.Auth
	if a == nil {
		a = auth.NewAuthorizer(auth.Options{AdminCredential: opts.AdminCredential})
	}
	return &Server{opts: opts, log: opts.Logger, auth: a, closed: make(chan struct{})}
}

// MessageOverheadBytes is what a request may carry on top of its values
// (limits.maxRequestBytes): names, types, options, tokens, the protobuf
// framing.
const MessageOverheadBytes = 1 << 20

// MaxMessageBytes is the largest message the server accepts, and the
// largest task it sends: the values of a request (limits.maxRequestBytes)
// or of a task (its input and its run's attributes, limits.maxPayloadBytes
// + limits.maxFlowAttributeBytes), whichever is larger, plus
// MessageOverheadBytes (9 MiB with the defaults). A request within it but
// over the value limits reaches the engine and is refused there naming
// the limit; nothing larger is decoded into memory. Workers and clients
// should accept messages of at least this size.
func (s *Server) MaxMessageBytes() int {
	p, r, a := s.opts.MaxPayloadBytes, s.opts.MaxRequestBytes, s.opts.MaxFlowAttributeBytes
	if r <= 0 {
		r = max(engine.DefaultMaxRequestBytes, p)
	}
	if a <= 0 {
		a = max(engine.DefaultMaxFlowAttributeBytes, p)
	}
	return min(max(r, p+a)+MessageOverheadBytes, math.MaxInt32)
}

// StandbyConnectionAge is how long a standby keeps a client connection:
// then it sends GOAWAY (grpc-go adds a jitter of +/-10%), so that a client
// that reached it reconnects and reaches the active process (H5).
// StandbyConnectionAgeGrace is how long calls in flight may still run
// after the GOAWAY before the connection is closed.
const (
	StandbyConnectionAge      = 3 * time.Second
	StandbyConnectionAgeGrace = time.Second
)

// KeepaliveMinTime is the shortest interval between a client's HTTP/2
// pings that the server tolerates, also on connections without a call in
// flight; a client that pings more often is sent GOAWAY
// ENHANCE_YOUR_CALM. The Go SDK pings a silent connection every
// dex.KeepaliveTime (10 s, the least gRPC allows a client), so this must
// not be longer than that.
const KeepaliveMinTime = 5 * time.Second

// GRPCOptions are the options the grpc.Server of an active process (and
// of dev and local) must be created with.
func (s *Server) GRPCOptions() []grpc.ServerOption {
	return s.grpcOptions(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second})
}

// StandbyGRPCOptions are GRPCOptions for the grpc.Server that serves the
// connections a standby accepts: each is closed after
// StandbyConnectionAge with GOAWAY (H5).
func (s *Server) StandbyGRPCOptions() []grpc.ServerOption {
	return s.grpcOptions(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second,
		MaxConnectionAge: StandbyConnectionAge, MaxConnectionAgeGrace: StandbyConnectionAgeGrace})
}

func (s *Server) grpcOptions(params keepalive.ServerParameters) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(s.MaxMessageBytes()),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(params),
		// Bounded load (issue 11): streams per connection, and new work
		// admitted by the backend (admission.go).
		grpc.MaxConcurrentStreams(s.opts.MaxConcurrentStreams),
	}
	// TLS and authorization (auth.go) come before admission.
	opts = append(opts, s.securityOptions()...)
	opts = append(opts, grpc.ChainUnaryInterceptor(s.admit))
	return append(opts, s.tracingOptions()...)
}

// Register registers every service on g.
func (s *Server) Register(g *grpc.Server) {
	dexpb.RegisterFlowServiceServer(g, &flowService{s: s})
	dexpb.RegisterWorkerTaskServiceServer(g, &workerService{s: s})
	dexpb.RegisterAdminServiceServer(g, &adminService{s: s})
	grpc_health_v1.RegisterHealthServer(g, &healthService{s: s})
	if !s.opts.NoReflection {
		// grpcurl and other tools list and call the API without the proto
		// files: FlowService, WorkerTaskService, AdminService and health.
		reflection.Register(g)
	}
}

// FlowService returns the FlowService handlers that Register registers,
// for an in-process caller without a connection (the simulator reads
// through them, so that it reads as a client does: through the read gate
// that re-checks the backend after the read, L15). The interceptors of
// GRPCOptions (authentication, admission) are not applied.
func (s *Server) FlowService() dexpb.FlowServiceServer { return &flowService{s: s} }

// SetBackend makes b the serving instance; nil removes it.
func (s *Server) SetBackend(b Backend) {
	if b == nil {
		s.backend.Store(nil)
		return
	}
	s.backend.Store(&backendBox{b})
}

// SetNotServingReason sets the message of the UNAVAILABLE answers given
// while no backend serves, for example "this process is a cold standby of
// node \"n1\"; retry on the active process" (P3, S6). It should tell the
// caller to retry on the active process. Empty restores the default
// (ErrNotServing's text).
func (s *Server) SetNotServingReason(reason string) {
	if reason == "" {
		s.reason.Store(nil)
		return
	}
	s.reason.Store(&reason)
}

// SetHotStandby makes hot the source of dex.HotStandby's status: SERVING
// while no backend serves and hot returns true (H3). Nil (the active, a
// cold standby) makes it NOT_SERVING.
func (s *Server) SetHotStandby(hot func() bool) {
	if hot == nil {
		s.hot.Store(nil)
		return
	}
	s.hot.Store(&hot)
}

// hotStandby reports whether dex.HotStandby is SERVING.
func (s *Server) hotStandby() bool {
	hot := s.hot.Load()
	return hot != nil && !s.serving() && (*hot)()
}

// Close ends the long-lived streams (health Watch, worker streams) so that
// a graceful stop of the grpc.Server does not wait for them.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

// active returns the backend if it is serving, else UNAVAILABLE.
func (s *Server) active() (Backend, error) {
	box := s.backend.Load()
	if box == nil || !box.b.Serving() {
		return nil, s.unavailable()
	}
	return box.b, nil
}

// serving reports whether a backend is serving now.
func (s *Server) serving() bool {
	_, err := s.active()
	return err == nil
}
