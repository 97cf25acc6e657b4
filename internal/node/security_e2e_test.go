package node_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/node"
	"github.com/dexzd/dexzd/internal/testcerts"
)

// The flows of the security tests: "order" doubles its input, "approval"
// is served by nobody here.
type (
	Double  struct{ dex.Step[int] }
	Approve struct{ dex.Step[int] }
)

func (Double) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.GracefulComplete(2 * n), nil
}
func (Approve) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.GracefulComplete(n), nil
}

var (
	orderFlow    = dex.NewFlow("order").Start(Double{})
	approvalFlow = dex.NewFlow("approval").Start(Approve{})
)

// Tokens of the security tests.
const (
	readerToken = "reader-token-0123456789abcdef"
	clientToken = "client-token-0123456789abcdef"
	orderToken  = "order-worker-0123456789abcdef"
)

// secureNode is a dev node serving api.tls with auth.tokensFile, and its
// metrics listener with metrics.tls and metrics.tokensFile.
type secureNode struct {
	addr, metricsAddr string
	ca                *testcerts.CA
	dir, caFile       string
	server            testcerts.Files
	tokens            string
	logs              *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startSecureNode(t *testing.T, extra string) *secureNode {
	t.Helper()
	n := &secureNode{ca: testcerts.NewCA(t, "dex test CA"), dir: t.TempDir(), logs: &syncBuffer{}}
	n.caFile = n.ca.WriteCA(t, n.dir, "ca")
	n.server = n.ca.Issue(t, testcerts.Spec{CommonName: "server-1", Server: true}).Write(t, n.dir, "server")
	n.tokens = filepath.Join(n.dir, "tokens")
	testcerts.WriteFile(t, n.tokens, []byte(fmt.Sprintf("%s reader dashboard\n%s client api\n%s worker:order orders\n",
		readerToken, clientToken, orderToken)))
	n.metricsAddr = freeAddr(t)
	doc := fmt.Sprintf(`api:
  tls:
    certFile: %s
    keyFile: %s
auth:
  tokensFile: %s
metrics:
  listen: %s
  tokensFile: %s
  tls:
    certFile: %s
    keyFile: %s
lifecycle:
  attemptDrainTimeout: 2s
%s`, n.server.Cert, n.server.Key, n.tokens, n.metricsAddr, n.tokens, n.server.Cert, n.server.Key, extra)
	cfg, err := config.Parse([]byte(doc), config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan net.Addr, 1)
	log := slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	go func() {
		done <- node.RunLocal(ctx, node.LocalOptions{Mode: config.ModeDev, Config: cfg, DataDir: t.TempDir(), Listener: lis,
			Metrics: metrics.New(), Logger: log, Ready: func(a net.Addr) { ready <- a }})
	}()
	select {
	case a := <-ready:
		n.addr = a.String()
	case err := <-done:
		cancel()
		t.Fatalf("node did not start: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("node did not start within 20s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("node did not stop")
		}
	})
	return n
}

func (n *secureNode) tlsConfig() *dex.TLSConfig { return &dex.TLSConfig{CAFile: n.caFile} }

func (n *secureNode) client(t *testing.T, token string) *dex.Client {
	t.Helper()
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{n.addr}, TLS: n.tlsConfig(), Token: dex.StaticToken(token),
		Logger: slog.New(slog.DiscardHandler), RetryTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// runWorker runs a worker of flows with token; the returned channel gets
// Run's result.
func (n *secureNode) runWorker(t *testing.T, ctx context.Context, token string, flows ...*dex.Flow) <-chan error {
	t.Helper()
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{n.addr}, TLS: n.tlsConfig(), Token: dex.StaticToken(token),
		Logger: slog.New(slog.DiscardHandler), DrainTimeout: time.Second}, flows...)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done, finished := make(chan error, 1), make(chan struct{})
	go func() { done <- w.Run(wctx); close(finished) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Error("worker did not stop")
		}
	})
	return done
}

// Over TLS with tokens, a client and a worker run a flow; each token's
// role bounds what it may do: a reader cannot start a flow, a worker
// granted "order" cannot poll "approval", a plaintext client is told TLS
// is required. The server says at startup that authentication is on.
func TestSecurity_TLSAndTokensEndToEnd(t *testing.T) {
	n := startSecureNode(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	c := n.client(t, clientToken)
	n.runWorker(t, ctx, orderToken, orderFlow)
	if _, err := c.StartFlow(ctx, orderFlow, "o-1", 21); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, "o-1")
	if err != nil || res.Status != dex.StatusCompleted || len(res.Outputs) != 1 || string(res.Outputs[0].Value.Data()) != "42" {
		t.Fatalf("WaitForFlow = %+v, %v", res, err)
	}

	reader := n.client(t, readerToken)
	if _, err := reader.GetFlowSummary(ctx, "o-1"); err != nil {
		t.Fatalf("reader GetFlowSummary: %v", err)
	}
	_, err = reader.StartFlow(ctx, orderFlow, "o-2", 1)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "token dashboard (role reader)") ||
		!strings.Contains(err.Error(), "needs role client") {
		t.Fatalf("reader StartFlow = %v, want PERMISSION_DENIED naming the token and role client", err)
	}

	// The worker granted "order" asks for "approval" too: refused before
	// a session opens, and the worker stops (a permanent refusal).
	select {
	case err := <-n.runWorker(t, ctx, orderToken, orderFlow, approvalFlow):
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `flow type "approval"`) {
			t.Fatalf("worker of approval with an order token: %v, want PERMISSION_DENIED naming approval", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a worker of approval with an order token was not refused")
	}

	plain, err := dex.NewClient(dex.ClientOptions{Addresses: []string{n.addr}, Token: dex.StaticToken(clientToken),
		Logger: slog.New(slog.DiscardHandler), RetryTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.GetFlowSummary(ctx, "o-1"); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "requires TLS") {
		t.Fatalf("plaintext client = %v, want UNAUTHENTICATED saying TLS is required", err)
	}

	logs := n.logs.String()
	if !strings.Contains(logs, "API authentication on") || !strings.Contains(logs, "call refused") ||
		!strings.Contains(logs, "identity=\"token dashboard\"") || !strings.Contains(logs, "flowId=o-2") {
		t.Fatalf("logs lack the startup line or the refused call with identity and flow ID:\n%s", logs)
	}
	for _, tok := range []string{readerToken, clientToken, orderToken} {
		if strings.Contains(logs, tok) {
			t.Fatalf("the logs show a token")
		}
	}
}

// Tokens added to auth.tokensFile are accepted, and tokens removed are
// refused, without a restart and without reconnecting.
func TestSecurity_TokensFileReloaded(t *testing.T) {
	n := startSecureNode(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const added = "added-token-0123456789abcdef"
	c := n.client(t, added)
	if _, err := c.ListFlows(ctx, dex.FlowQuery{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a token not in the file yet = %v, want UNAUTHENTICATED", err)
	}
	testcerts.WriteFile(t, n.tokens, []byte(added+" reader\n"+clientToken+" client api\n"))
	waitFor(t, 5*time.Second, "the added token is accepted", func() bool {
		_, err := c.ListFlows(ctx, dex.FlowQuery{})
		return err == nil
	})
	testcerts.WriteFile(t, n.tokens, []byte(clientToken+" client api\n"))
	waitFor(t, 5*time.Second, "the removed token is refused", func() bool {
		_, err := c.ListFlows(ctx, dex.FlowQuery{})
		return status.Code(err) == codes.Unauthenticated
	})
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The server's certificate is rotated in place three times while clients
// call without pause, some on their open connections and some on a new
// connection per call: no call fails, and new connections get the new
// certificate.
func TestSecurity_CertificateRotationUnderLoad(t *testing.T) {
	n := startSecureNode(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.runWorker(t, ctx, orderToken, orderFlow)
	open := n.client(t, clientToken)

	var calls, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	fail := func(err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, &err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("rot-%d-%d", g, i)
				if _, err := open.StartFlow(ctx, orderFlow, id, i); err != nil {
					fail(err)
					continue
				}
				calls.Add(1)
			}
		})
	}
	// New connections: a client per call, so each call is a handshake.
	seen := make(chan string, 1024)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			cn, err := handshakeCN(n.addr, n.ca)
			if err != nil {
				fail(err)
				continue
			}
			c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{n.addr}, TLS: n.tlsConfig(),
				Token: dex.StaticToken(readerToken), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				fail(err)
				continue
			}
			if _, err := c.ListFlows(ctx, dex.FlowQuery{}); err != nil {
				fail(err)
			} else {
				calls.Add(1)
			}
			_ = c.Close()
			select {
			case seen <- cn:
			default:
			}
		}
	})
	want := []string{"server-1"}
	for r := 2; r <= 4; r++ {
		time.Sleep(300 * time.Millisecond) // let calls run between rotations
		leaf := n.ca.Issue(t, testcerts.Spec{CommonName: fmt.Sprintf("server-%d", r), Server: true})
		// The certificate first, then the key: handshakes between the two
		// writes keep the pair read last.
		testcerts.WriteFile(t, n.server.Cert, leaf.CertPEM)
		testcerts.WriteFile(t, n.server.Key, leaf.KeyPEM)
		cn := fmt.Sprintf("server-%d", r)
		want = append(want, cn)
		waitFor(t, 10*time.Second, "new connections get "+cn, func() bool {
			got, err := handshakeCN(n.addr, n.ca)
			return err == nil && got == cn
		})
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d of %d calls failed during the rotations; first: %v", f, calls.Load()+f, *firstErr.Load())
	}
	if calls.Load() < 50 {
		t.Fatalf("only %d calls ran during the rotations", calls.Load())
	}
	t.Logf("%d calls, none failed, across certificates %v", calls.Load(), want)
}

// handshakeCN opens a TLS connection and returns the server
// certificate's common name.
func handshakeCN(addr string, ca *testcerts.CA) (string, error) {
	d := &tls.Dialer{Config: &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// The metrics listener serves TLS; /metrics needs a reader token of
// metrics.tokensFile, /livez and (by default) /readyz do not.
func TestSecurity_MetricsListenerTLSAndTokens(t *testing.T) {
	n := startSecureNode(t, "")
	pool := n.ca.Pool()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	get := func(path, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "https://"+n.metricsAddr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/livez", ""); code != http.StatusOK {
		t.Fatalf("/livez without a token = %d", code)
	}
	if code, _ := get("/readyz", ""); code != http.StatusOK {
		t.Fatalf("/readyz without a token = %d", code)
	}
	if code, body := get("/metrics", ""); code != http.StatusUnauthorized || !strings.Contains(body, "metrics.tokensFile") {
		t.Fatalf("/metrics without a token = %d %q, want 401", code, body)
	}
	if code, _ := get("/metrics", "wrong-token-0123456789abcdef"); code != http.StatusUnauthorized {
		t.Fatalf("/metrics with a wrong token = %d, want 401", code)
	}
	if code, body := get("/metrics", readerToken); code != http.StatusOK || !strings.Contains(body, "dexzd_") {
		t.Fatalf("/metrics with a reader token = %d", code)
	}
	// A plaintext request is refused by the TLS listener.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + n.metricsAddr + "/livez")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the TLS metrics listener answered plaintext HTTP")
		}
	}
}
