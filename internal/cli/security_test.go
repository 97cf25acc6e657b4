package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/node"
	"github.com/dexzd/dexzd/internal/testcerts"
)

// dexcli speaks TLS and sends a token from flags or from the DEX_*
// environment variables; the server's refusals come back with a hint.
func TestSecurity_TLSAndTokenFlagsAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca")
	srv := ca.Issue(t, testcerts.Spec{CommonName: "dex", Server: true}).Write(t, dir, "server")
	const reader, client = "reader-token-0123456789abcdef", "client-token-0123456789abcdef"
	tokens := filepath.Join(dir, "tokens")
	testcerts.WriteFile(t, tokens, []byte(reader+" reader\n"+client+" client\n"))
	readerFile, clientFile := filepath.Join(dir, "reader"), filepath.Join(dir, "client")
	testcerts.WriteFile(t, readerFile, []byte(reader+"\n"))
	testcerts.WriteFile(t, clientFile, []byte(client+"\n"))
	cfg, err := config.Parse([]byte(fmt.Sprintf("api:\n  listen: 127.0.0.1:0\n  tls:\n    certFile: %s\n    keyFile: %s\nauth:\n  tokensFile: %s\n",
		srv.Cert, srv.Key, tokens)), config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.StartDev(ctx, node.DevOptions{DataDir: t.TempDir(), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()

	env := map[string]string{"DEX_SERVER": n.Addr(), "DEX_TLS_CA": caFile, "DEX_TOKEN_FILE": clientFile}
	runCLIEnv(t, env, "flow", "start", "order", "o-1").wantCode(t, 0)
	runCLIEnv(t, env, "flow", "list").wantCode(t, 0)

	r := runCLI(t, "--server", n.Addr(), "--tls-ca", caFile, "--token-file", readerFile, "flow", "start", "order", "o-2")
	r.wantCode(t, 1)
	r.wantStderr(t, "PERMISSION_DENIED", "needs role client", "role")

	r = runCLI(t, "--server", n.Addr(), "--tls-ca", caFile, "flow", "list")
	r.wantCode(t, 1)
	r.wantStderr(t, "UNAUTHENTICATED", "--token-file")

	r = runCLI(t, "--server", n.Addr(), "--token-file", readerFile, "flow", "list")
	r.wantCode(t, 1)
	r.wantStderr(t, "requires TLS", "--tls-ca")

	r = runCLI(t, "--server", n.Addr(), "--tls-ca", caFile, "--tls-cert", srv.Cert, "flow", "list")
	r.wantCode(t, 2)
	r.wantStderr(t, "--tls-cert and --tls-key")

	r = runCLI(t, "--server", n.Addr(), "--tls-ca", caFile, "--token-file", readerFile, "--credential-file", clientFile, "flow", "list")
	r.wantCode(t, 2)
	r.wantStderr(t, "--credential-file and --token-file")
}
