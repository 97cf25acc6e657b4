package auth_test

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/auth"
	"github.com/dexzd/dexzd/internal/testcerts"
)

func TestParseGrant_RolesAndTheirPermissions(t *testing.T) {
	t.Parallel()
	all := []auth.Permission{auth.Open, auth.Reader, auth.Client, auth.Worker, auth.Admin}
	cases := []struct {
		role    string
		allowed []auth.Permission
		types   map[string]bool
	}{
		{"reader", []auth.Permission{auth.Open, auth.Reader}, nil},
		{"client", []auth.Permission{auth.Open, auth.Reader, auth.Client}, nil},
		{"worker:order,approval", []auth.Permission{auth.Open, auth.Worker}, map[string]bool{"order": true, "approval": true, "refund": false}},
		{"worker:*", []auth.Permission{auth.Open, auth.Worker}, map[string]bool{"order": true, "anything": true}},
		{"client+worker:order", []auth.Permission{auth.Open, auth.Reader, auth.Client, auth.Worker}, map[string]bool{"order": true, "approval": false}},
		{"admin", all, map[string]bool{"order": true}},
	}
	for _, c := range cases {
		g, err := auth.ParseGrant(c.role)
		if err != nil {
			t.Fatalf("ParseGrant(%q): %v", c.role, err)
		}
		for _, p := range all {
			want := false
			for _, a := range c.allowed {
				want = want || a == p
			}
			if g.Allows(p) != want {
				t.Errorf("%s allows %s = %v, want %v", c.role, p, !want, want)
			}
		}
		for ft, want := range c.types {
			if g.AllowsFlowType(ft) != want {
				t.Errorf("%s serves flow type %q = %v, want %v", c.role, ft, !want, want)
			}
		}
		if again, err := auth.ParseGrant(g.String()); err != nil || again.String() != g.String() {
			t.Errorf("%s renders as %q, which parses to %v, %v", c.role, g, again, err)
		}
	}
	for _, bad := range []string{"", "worker", "worker:", "worker:a,,b", "worker:*,a", "root", "client+"} {
		if _, err := auth.ParseGrant(bad); err == nil {
			t.Errorf("ParseGrant(%q) accepted", bad)
		}
	}
}

func TestParseTokens_RefusesBadLinesNamingTheLineNotTheToken(t *testing.T) {
	t.Parallel()
	secret := "s3cret-token-0123456789"
	cases := map[string]string{
		secret + "\n":                               "line 1: want \"TOKEN ROLE [NAME]\"",
		"short client\n":                            "line 1: the token is shorter than 16",
		"# c\n\n" + secret + " root\n":              "line 3: unknown role",
		secret + " client\n" + secret + " reader\n": "line 2: the token appears on an earlier line",
		secret + " client a b\n":                    "line 1: want",
	}
	for in, want := range cases {
		_, err := auth.ParseTokens([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTokens(%q) = %v, want %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("the error %q shows the token", err)
		}
	}
}

// clock is a settable time for the check interval.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// The tokens file is re-read when it changes, at most once per check
// interval: a token added is accepted and a token removed refused from
// the next check on, without a restart; a change that does not parse
// keeps the tokens read last.
func TestTokenFile_ReloadedWhenItChanges(t *testing.T) {
	t.Parallel()
	const a, b = "token-a-0123456789abcdef", "token-b-0123456789abcdef"
	p := filepath.Join(t.TempDir(), "tokens")
	testcerts.WriteFile(t, p, []byte(a+" client alpha\n"))
	clk := &clock{t: time.Unix(1_000_000, 0)}
	f, err := auth.OpenTokenFile("auth.tokensFile", p, nil, time.Second, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	has := func(tok string) bool { _, ok := f.Lookup(tok); return ok }
	if pr, ok := f.Lookup(a); !ok || pr.Identity != "token alpha" || !pr.Grant.Allows(auth.Client) {
		t.Fatalf("Lookup(a) = %+v, %v", pr, ok)
	}
	testcerts.WriteFile(t, p, []byte(b+" reader\n"))
	if !has(a) || has(b) {
		t.Fatal("the file was re-read before the check interval passed")
	}
	clk.add(time.Second)
	if has(a) || !has(b) {
		t.Fatal("after the interval: token a still accepted or b refused")
	}
	if pr, _ := f.Lookup(b); !strings.HasPrefix(pr.Identity, "token sha256:") {
		t.Fatalf("an unnamed token's identity = %q, want its hash prefix", pr.Identity)
	}
	testcerts.WriteFile(t, p, []byte("garbage\n"))
	clk.add(time.Second)
	if !has(b) {
		t.Fatal("a change that does not parse dropped the tokens read last")
	}
	testcerts.WriteFile(t, p, []byte(a+" admin\n"))
	clk.add(time.Second)
	if pr, ok := f.Lookup(a); !ok || !pr.Grant.Allows(auth.Admin) || has(b) {
		t.Fatalf("after a good change: Lookup(a) = %+v, %v; b accepted = %v", pr, ok, has(b))
	}
}

// The TLS files are re-read on a handshake when they changed: a new
// connection gets the new certificate, one that was open keeps going.
func TestTLSServer_ReloadsTheCertificateOnAHandshake(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "ca")
	dir := t.TempDir()
	first := ca.Issue(t, testcerts.Spec{CommonName: "first", Server: true})
	files := first.Write(t, dir, "tls")
	clk := &clock{t: time.Unix(1_000_000, 0)}
	ts, err := auth.NewTLSServer(auth.TLSFiles{Key: "api.tls", CertFile: files.Cert, KeyFile: files.Key, Interval: time.Second, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", ts.Config("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); b := make([]byte, 1); _, _ = c.Read(b); _ = c.Close() }()
		}
	}()
	served := func() (string, *tls.Conn) {
		t.Helper()
		c, err := tls.Dial("tcp", lis.Addr().String(), &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"x"}, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatal(err)
		}
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName, c
	}
	cn, open := served()
	if cn != "first" {
		t.Fatalf("served %q", cn)
	}
	defer open.Close()
	second := ca.Issue(t, testcerts.Spec{CommonName: "second", Server: true})
	testcerts.WriteFile(t, files.Key, second.KeyPEM) // half a rotation: key and certificate do not match
	clk.add(time.Second)
	if cn, c := served(); cn != "first" {
		t.Fatalf("a half-written rotation served %q, want the pair read last", cn)
	} else {
		c.Close()
	}
	testcerts.WriteFile(t, files.Cert, second.CertPEM)
	clk.add(time.Second)
	if cn, c := served(); cn != "second" {
		t.Fatalf("after the rotation: served %q, want second", cn)
	} else {
		c.Close()
	}
	// The connection opened before the rotation still works.
	if err := open.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := open.Write([]byte{1}); err != nil {
		t.Fatalf("the connection opened before the rotation: %v", err)
	}
}

// BenchmarkAuthorizer_Check is the interceptor's own cost per call: open
// mode, and a bearer token looked up in a tokens file.
func BenchmarkAuthorizer_Check(b *testing.B) {
	const tok = "bench-token-0123456789abcdef"
	p := filepath.Join(b.TempDir(), "tokens")
	testcerts.WriteFile(b, p, []byte(tok+" reader\n"))
	tf, err := auth.OpenTokenFile("auth.tokensFile", p, nil, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		a    *auth.Authorizer
		cred auth.Credentials
	}{
		{"open", auth.NewAuthorizer(auth.Options{}), auth.Credentials{}},
		{"token", auth.NewAuthorizer(auth.Options{Enforce: true, Tokens: tf}), auth.Credentials{Authorization: "Bearer " + tok}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.a.Check(c.cred, "/dex.FlowService/GetFlowSummary", auth.Reader); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
