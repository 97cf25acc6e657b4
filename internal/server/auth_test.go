package server_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/auth"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/testcerts"
)

// apiMethods are the full method names of every RPC of every service of
// the dex API, from the generated descriptors, with whether each streams.
func apiMethods(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	protoregistry.GlobalFiles.RangeFilesByPackage("dex", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				m := sd.Methods().Get(j)
				out["/"+string(sd.FullName())+"/"+string(m.Name())] = m.IsStreamingClient() || m.IsStreamingServer()
			}
		}
		return true
	})
	for _, svc := range []string{"dex.FlowService", "dex.WorkerTaskService", "dex.AdminService"} {
		found := false
		for m := range out {
			found = found || strings.HasPrefix(m, "/"+svc+"/")
		}
		if !found {
			t.Fatalf("no methods of %s in the descriptors", svc)
		}
	}
	return out
}

// The roles of issue 16, written out here independently of the server's
// table: reader reads, client also writes, worker polls, admin the rest.
var wantPermission = map[string]auth.Permission{
	"/dex.FlowService/GetFlowSummary":        auth.Reader,
	"/dex.FlowService/GetFlowState":          auth.Reader,
	"/dex.FlowService/GetHistoryEvents":      auth.Reader,
	"/dex.FlowService/GetAttributes":         auth.Reader,
	"/dex.FlowService/ListFlows":             auth.Reader,
	"/dex.FlowService/SearchFlows":           auth.Reader,
	"/dex.FlowService/WaitForFlow":           auth.Reader,
	"/dex.FlowService/WaitForStepCompletion": auth.Reader,
	"/dex.FlowService/WaitForAttribute":      auth.Reader,
	"/dex.FlowService/StartFlow":             auth.Client,
	"/dex.FlowService/StopFlow":              auth.Client,
	"/dex.FlowService/PublishToChannel":      auth.Client,
	"/dex.FlowService/SetAttributes":         auth.Client,
	"/dex.FlowService/InvokeRPC":             auth.Client,
	"/dex.FlowService/SkipTimer":             auth.Client,
	"/dex.FlowService/ResetFlow":             auth.Client,
	"/dex.WorkerTaskService/PollWorkerTask":  auth.Worker,
	"/dex.AdminService/Describe":             auth.Admin,
	"/dex.AdminService/StepDown":             auth.Admin,
}

// Every RPC of FlowService, WorkerTaskService and AdminService has an
// entry in the server's permission table, the one the issue gives it: a
// new RPC fails this test until it is given a role here and there.
func TestPermissions_EveryMethodHasItsRole(t *testing.T) {
	t.Parallel()
	for m := range apiMethods(t) {
		got, ok := server.Permissions[m]
		if !ok {
			t.Errorf("%s has no role in server.Permissions (a method without one needs admin)", m)
			continue
		}
		want, ok := wantPermission[m]
		if !ok {
			t.Errorf("%s is not in this test's table of the issue's roles; add it", m)
			continue
		}
		if got != want {
			t.Errorf("%s needs %s, want %s", m, got, want)
		}
	}
	for m := range wantPermission {
		if _, ok := apiMethods(t)[m]; !ok {
			t.Errorf("%s is in the table but not in the API", m)
		}
	}
}

// writeTokens writes a tokens file and returns its path.
func writeTokens(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// serveOn serves a server with opts on a loopback listener (TLS when
// opts.TLS is set) and returns it and its address.
func serveOn(t *testing.T, opts server.Options) (*server.Server, string) {
	t.Helper()
	s := server.New(opts)
	g := grpc.NewServer(s.GRPCOptions()...)
	s.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.TLS != nil {
		lis = server.RefusePlaintext(lis)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(func() { s.Close(); g.Stop() })
	return s, lis.Addr().String()
}

func serveAuth(t *testing.T, opts server.Options) string {
	t.Helper()
	_, addr := serveOn(t, opts)
	return addr
}

// call sends an empty request to method (any message decodes from an
// empty one) and returns the status.
func call(ctx context.Context, cc *grpc.ClientConn, method string, stream bool) error {
	if !stream {
		return cc.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{})
	}
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
	if err := st.SendMsg(&emptypb.Empty{}); err != nil {
		return err
	}
	_ = st.CloseSend()
	return st.RecvMsg(&emptypb.Empty{})
}

func dialPlain(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func bearer(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// Each role may call exactly the methods of its permission, on every RPC
// of the API: a call it may make reaches its handler (which answers
// UNAVAILABLE here: no backend), any other is PERMISSION_DENIED naming
// the role needed, and a call without credentials or with an unknown
// token is UNAUTHENTICATED. Health checks need nothing.
func TestAuth_EachRoleCallsExactlyItsMethods(t *testing.T) {
	t.Parallel()
	const (
		readerTok = "reader-token-0123456789"
		clientTok = "client-token-0123456789"
		workerTok = "worker-token-0123456789"
		adminTok  = "admin-token-0123456789"
	)
	path := writeTokens(t, "# test tokens", readerTok+" reader r", clientTok+" client c", workerTok+" worker:order w", adminTok+" admin")
	tf, err := auth.OpenTokenFile("auth.tokensFile", path, nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveAuth(t, server.Options{Auth: auth.NewAuthorizer(auth.Options{Enforce: true, Tokens: tf})})
	cc := dialPlain(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	principals := []struct {
		name, token string
		allows      func(auth.Permission) bool
	}{
		{"none", "", func(p auth.Permission) bool { return p == auth.Open }},
		{"unknown token", "not-a-token-0123456789", func(p auth.Permission) bool { return p == auth.Open }},
		{"reader", readerTok, func(p auth.Permission) bool { return p <= auth.Reader }},
		{"client", clientTok, func(p auth.Permission) bool { return p <= auth.Client }},
		{"worker", workerTok, func(p auth.Permission) bool { return p == auth.Open || p == auth.Worker }},
		{"admin", adminTok, func(auth.Permission) bool { return true }},
	}
	methods := apiMethods(t)
	methods[grpc_health_v1.Health_Check_FullMethodName] = false
	for _, pr := range principals {
		for m, stream := range methods {
			need, ok := wantPermission[m]
			if !ok {
				need = auth.Open // health
			}
			cctx, ccancel := context.WithTimeout(bearer(ctx, pr.token), 5*time.Second)
			err := call(cctx, cc, m, stream)
			ccancel()
			code := status.Code(err)
			switch {
			case pr.allows(need):
				if code == codes.PermissionDenied || code == codes.Unauthenticated {
					t.Errorf("%s calling %s (needs %s): %v, want it to reach the handler", pr.name, m, need, err)
				}
			case pr.token == "" || pr.name == "unknown token":
				if code != codes.Unauthenticated || !strings.Contains(err.Error(), "needs role "+need.String()) {
					t.Errorf("%s calling %s: %v, want UNAUTHENTICATED naming role %s", pr.name, m, err, need)
				}
			default:
				if code != codes.PermissionDenied || !strings.Contains(err.Error(), "needs role "+need.String()) {
					t.Errorf("%s calling %s: %v, want PERMISSION_DENIED naming role %s", pr.name, m, err, need)
				}
			}
		}
	}
}

// tlsFiles writes a CA, a server certificate and a client CA bundle.
type tlsSetup struct {
	ca, otherCA *testcerts.CA
	dir, caFile string
	server      testcerts.Files
}

func newTLSSetup(t *testing.T) *tlsSetup {
	t.Helper()
	s := &tlsSetup{ca: testcerts.NewCA(t, "dex test CA"), otherCA: testcerts.NewCA(t, "another CA"), dir: t.TempDir()}
	s.caFile = s.ca.WriteCA(t, s.dir, "ca")
	s.server = s.ca.Issue(t, testcerts.Spec{CommonName: "dex-server", Server: true}).Write(t, s.dir, "server")
	return s
}

func (s *tlsSetup) tlsServer(t *testing.T, clientCA bool) *auth.TLSServer {
	t.Helper()
	f := auth.TLSFiles{Key: "api.tls", CertFile: s.server.Cert, KeyFile: s.server.Key}
	if clientCA {
		f.ClientCAFile = s.caFile
	}
	ts, err := auth.NewTLSServer(f)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func dialTLS(t *testing.T, addr string, roots *testcerts.CA, cert *testcerts.Leaf) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: roots.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		c := cert.TLS(t)
		cfg.Certificates = []tls.Certificate{c}
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Mutual TLS: a client certificate issued by api.tls.clientCAFile is
// accepted and its common name or SAN maps to its role; a connection
// without a certificate, with one of another CA or with an expired one is
// refused in the handshake, before any call.
func TestTLS_MutualTLSAcceptsTheCAsCertificatesOnly(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	grants := map[string]auth.Grant{}
	for name, role := range map[string]string{"dashboard": "reader", "spiffe://dex/orders": "worker:order"} {
		g, err := auth.ParseGrant(role)
		if err != nil {
			t.Fatal(err)
		}
		grants[name] = g
	}
	addr := serveAuth(t, server.Options{TLS: s.tlsServer(t, true),
		Auth: auth.NewAuthorizer(auth.Options{Enforce: true, CertificateRoles: grants})})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	summary := dexpb.FlowService_GetFlowSummary_FullMethodName

	reader := s.ca.Issue(t, testcerts.Spec{CommonName: "dashboard"})
	if err := call(ctx, dialTLS(t, addr, s.ca, reader), summary, false); status.Code(err) != codes.Unavailable {
		t.Fatalf("reader certificate calling GetFlowSummary = %v, want the handler's UNAVAILABLE (no backend)", err)
	}
	err := call(ctx, dialTLS(t, addr, s.ca, reader), dexpb.FlowService_StartFlow_FullMethodName, false)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "certificate CN=dashboard") {
		t.Fatalf("reader certificate calling StartFlow = %v, want PERMISSION_DENIED naming it", err)
	}
	byURI := s.ca.Issue(t, testcerts.Spec{CommonName: "orders-1", URIs: []string{"spiffe://dex/orders"}})
	if err := call(ctx, dialTLS(t, addr, s.ca, byURI), dexpb.WorkerTaskService_PollWorkerTask_FullMethodName, true); status.Code(err) == codes.PermissionDenied {
		t.Fatalf("a certificate whose URI SAN has role worker:order was refused the worker stream: %v", err)
	}
	unmapped := s.ca.Issue(t, testcerts.Spec{CommonName: "stranger"})
	if err := call(ctx, dialTLS(t, addr, s.ca, unmapped), summary, false); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a certificate no role names = %v, want PERMISSION_DENIED", err)
	}

	refused := []struct {
		name string
		cert *testcerts.Leaf
	}{
		{"no certificate", nil},
		{"another CA", s.otherCA.Issue(t, testcerts.Spec{CommonName: "dashboard"})},
		{"expired", s.ca.Issue(t, testcerts.Spec{CommonName: "dashboard", Expired: true})},
	}
	for _, r := range refused {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		// The health check needs no role: only the handshake can refuse it.
		err := call(cctx, dialTLS(t, addr, s.ca, r.cert), grpc_health_v1.Health_Check_FullMethodName, false)
		ccancel()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want the connection refused in the TLS handshake", r.name, err)
		}
	}
	if err := call(ctx, dialTLS(t, addr, s.ca, reader), grpc_health_v1.Health_Check_FullMethodName, false); err != nil {
		t.Fatalf("health check with a good certificate: %v", err)
	}
	// A client that does not trust the server's CA refuses it too.
	if err := call(ctx, dialTLS(t, addr, s.otherCA, reader), summary, false); status.Code(err) != codes.Unavailable ||
		!strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client trusting another CA: %v, want a certificate error", err)
	}
}

// A plaintext client of a TLS server is told that TLS is required, on
// every call, instead of seeing its connection reset.
func TestTLS_PlaintextClientIsToldTLSIsRequired(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	addr := serveAuth(t, server.Options{TLS: s.tlsServer(t, false)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc := dialPlain(t, addr)
	for _, m := range []string{dexpb.FlowService_StartFlow_FullMethodName, grpc_health_v1.Health_Check_FullMethodName} {
		err := call(ctx, cc, m, false)
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "requires TLS") {
			t.Fatalf("plaintext %s = %v, want UNAUTHENTICATED saying TLS is required", m, err)
		}
	}
	// The same address serves TLS clients.
	if err := call(ctx, dialTLS(t, addr, s.ca, nil), grpc_health_v1.Health_Check_FullMethodName, false); err != nil {
		t.Fatalf("TLS health check = %v", err)
	}
}

// BenchmarkAuth_UnaryCall measures a unary call through the interceptor
// over loopback: open (no auth section) and with a bearer token checked
// against a tokens file.
func BenchmarkAuth_UnaryCall(b *testing.B) {
	const tok = "bench-token-0123456789abcdef"
	p := filepath.Join(b.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(tok+" reader\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	tf, err := auth.OpenTokenFile("auth.tokensFile", p, nil, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		opts  server.Options
		token string
	}{
		{"open", server.Options{}, ""},
		{"token", server.Options{Auth: auth.NewAuthorizer(auth.Options{Enforce: true, Tokens: tf})}, tok},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := server.New(c.opts)
			g := grpc.NewServer(s.GRPCOptions()...)
			s.Register(g)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go func() { _ = g.Serve(lis) }()
			defer func() { s.Close(); g.Stop() }()
			cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			ctx := bearer(context.Background(), c.token)
			for b.Loop() {
				if err := call(ctx, cc, dexpb.FlowService_GetFlowSummary_FullMethodName, false); status.Code(err) != codes.Unavailable {
					b.Fatal(err)
				}
			}
		})
	}
}
