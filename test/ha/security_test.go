package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testcerts"
)

// A serve pair with api.tls and auth.tokensFile goes through a failover:
// the SDK's client and worker, over TLS with their tokens, move to the
// standby when the active is SIGKILLed and every acknowledged flow
// completes; dexcli reaches the new active over TLS with the admin token,
// and is refused without a token or without TLS, saying why.
//
// Covers: S1, P5, A9
func TestSecurity_TLSAndTokensThroughAFailover(t *testing.T) {
	const (
		clientTok = "client-token-0123456789abcdef"
		workerTok = "worker-token-0123456789abcdef"
		adminTok  = "admin-token-0123456789abcdef"
	)
	ca := testcerts.NewCA(t, "dex ha CA")
	dir := t.TempDir()
	caFile := ca.WriteCA(t, dir, "ca")
	srv := ca.Issue(t, testcerts.Spec{CommonName: "dex", Server: true}).Write(t, dir, "server")
	tokens := filepath.Join(dir, "tokens")
	testcerts.WriteFile(t, tokens, []byte(fmt.Sprintf("%s client app\n%s worker:chain3 chain-worker\n%s admin ops\n",
		clientTok, workerTok, adminTok)))
	adminFile := filepath.Join(dir, "admin-token")
	testcerts.WriteFile(t, adminFile, []byte(adminTok+"\n"))
	security := fmt.Sprintf("api:\n  tls:\n    certFile: %q\n    keyFile: %q\nauth:\n  tokensFile: %q\n", srv.Cert, srv.Key, tokens)

	st, _ := storageWithStore(t, "fs")
	a, b := newServerWith(t, st, "", "", leaseDuration), newServerWith(t, st, "", "", leaseDuration)
	// api.listen is written by newServerWith; the security keys go into
	// the api mapping, so rewrite the files with them.
	a, b = withSecurity(t, a, security), withSecurity(t, b, security)
	pa := a.start(t)
	pa.Serving(t, 30*time.Second)
	pb := b.start(t)
	waitLog(t, pb, waitingLine, 30*time.Second)
	for _, p := range []string{pa.Log(), pb.Log()} {
		if !strings.Contains(p, "API authentication on") {
			t.Fatalf("no startup line saying authentication is on:\n%s", p)
		}
	}
	addrs := []string{a.addr, b.addr}
	tlsCfg := &dex.TLSConfig{CAFile: caFile}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: addrs, TLS: tlsCfg, Token: dex.StaticToken(workerTok), MaxConcurrentTasks: 16,
		Logger: quietLogger(), ReconnectBackoff: fastBackoff, DrainTimeout: time.Second}, chainFlow)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	defer func() { stopWorker(); <-wdone }()
	c, err := dex.NewClient(dex.ClientOptions{Addresses: addrs, TLS: tlsCfg, Token: dex.StaticToken(clientTok),
		Logger: quietLogger(), RetryBackoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const chains = 60
	var (
		mu    sync.Mutex
		acked = map[string]int{}
		wg    sync.WaitGroup
	)
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < chains; i += 4 {
				id := fmt.Sprintf("sec-chain-%03d", i)
				if _, err := c.StartFlow(ctx, chainFlow, id, i); err != nil {
					t.Logf("start %s not acknowledged: %v", id, err)
					continue
				}
				mu.Lock()
				acked[id] = i
				mu.Unlock()
				if i == chains/3 {
					pa.Signal(t, syscall.SIGKILL)
				}
			}
		})
	}
	wg.Wait()
	pa.Wait(t, 10*time.Second)
	pb.Serving(t, 30*time.Second)
	if len(acked) < chains/2 {
		t.Fatalf("only %d of %d starts acknowledged", len(acked), chains)
	}
	for id, in := range acked {
		r, err := c.WaitForFlow(ctx, id)
		if err != nil {
			t.Fatalf("WaitForFlow %s: %v", id, err)
		}
		var out int
		if r.Status != dex.StatusCompleted || len(r.Outputs) != 1 || r.Outputs[0].Value.Decode(&out) != nil || out != in+3 {
			t.Fatalf("flow %s: %+v, want completed with %d", id, r, in+3)
		}
	}
	t.Logf("%d flows completed over TLS with tokens across the failover", len(acked))

	// dexcli: TLS and the admin token reach the new active.
	out, errOut, code := runCLI(t, "--server", strings.Join(addrs, ","), "--tls-ca", caFile, "--token-file", adminFile,
		"-o", "json", "admin", "describe")
	var d describeOut
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || d.NodeEpoch != "2" {
		t.Fatalf("dexcli admin describe over TLS = %d\n%s%s", code, out, errOut)
	}
	// Without a token, and in plaintext: refused, saying what to pass.
	_, errOut, code = runCLI(t, "--server", b.addr, "--tls-ca", caFile, "admin", "describe")
	if code != 1 || !strings.Contains(errOut, "UNAUTHENTICATED") || !strings.Contains(errOut, "--token-file") {
		t.Fatalf("dexcli without a token = %d %s, want UNAUTHENTICATED and the --token-file hint", code, errOut)
	}
	_, errOut, code = runCLI(t, "--server", b.addr, "--token-file", adminFile, "flow", "describe", "sec-chain-000")
	if code != 1 || !strings.Contains(errOut, "requires TLS") || !strings.Contains(errOut, "--tls-ca") {
		t.Fatalf("dexcli in plaintext = %d %s, want the TLS hint", code, errOut)
	}
}

// withSecurity rewrites s's configuration with the api.tls keys merged
// into its api mapping and the auth section appended.
func withSecurity(t *testing.T, s server, security string) server {
	t.Helper()
	raw, err := os.ReadFile(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	data := string(raw)
	api, rest, _ := strings.Cut(security, "auth:")
	tlsPart := strings.TrimPrefix(api, "api:\n")
	data = strings.Replace(data, "api:\n", "api:\n"+tlsPart, 1) + "auth:" + rest
	testcerts.WriteFile(t, s.cfg, []byte(data))
	return s
}
