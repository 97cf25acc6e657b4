package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/examples/flows"
	"github.com/dexzd/dexzd/internal/testproc"
)

// uiClient is a browser's view of the UI over plain HTTP: a cookie jar
// and the X-Dex-UI header on writes (as the UI's pages send them).
type uiClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newUIClient(t *testing.T, base string) *uiClient {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &uiClient{t: t, base: base, hc: &http.Client{Jar: jar, Timeout: 20 * time.Second}}
}

// call sends method path with body (JSON) and header extra; it returns
// the status, the body and the cookies set.
func (c *uiClient) call(method, path string, body any, hdr map[string]string) (int, string, []*http.Cookie) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Cookies()
}

var ui = map[string]string{"X-Dex-UI": "1"}

// authServer starts dev with auth on (tokens for alice, reader; bob,
// client; a worker) and an open approval flow (no worker runs it); it
// returns the UI's base URL, the process and a function that rewrites the
// tokens file.
func authServer(t *testing.T) (string, *testproc.Proc, func(string)) {
	t.Helper()
	if testing.Short() {
		t.Skip("process test")
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	write := func(content string) {
		if err := os.WriteFile(tokens, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(readerTok + " reader alice\n" + clientTok + " client bob\n" + workerTok + " worker:* orders-worker\n")
	cfg := filepath.Join(dir, "dex.yaml")
	if err := os.WriteFile(cfg, []byte("auth:\n  tokensFile: "+tokens+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	webAddr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", t.TempDir(), "--config", cfg, "--listen", testproc.FreeAddr(t), "--web-listen", webAddr)
	api := p.Serving(t, 30*time.Second)
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{api}, Logger: quiet(), Token: dex.StaticToken(clientTok)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.StartFlow(context.Background(), flows.ApprovalFlow, "approval-1", flows.Request{ID: "1", Amount: 10}); err != nil {
		t.Fatal(err)
	}
	return "http://" + webAddr, p, write
}

const readerTok, clientTok, workerTok = "reader-token-0123456789abcdef", "client-token-0123456789abcdef", "worker-token-0123456789abcdef"

// With auth configured, a browser session has its token's roles: nothing
// before signing in, reads with a reader token, actions with a client
// token; the cookie holds a session ID, never the token; writes need the
// UI's header and origin; a token removed from the tokens file stops
// working at once.
func TestUI_AuthRoles(t *testing.T) {
	base, p, write := authServer(t)
	anon := newUIClient(t, base)
	if code, body, _ := anon.call("GET", "/api/flows", nil, nil); code != http.StatusUnauthorized || !strings.Contains(body, "reader") {
		t.Fatalf("anonymous /api/flows: %d %s, want 401 naming role reader", code, body)
	}
	if code, _, _ := anon.call("GET", "/api/node", nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("anonymous /api/node: %d, want 401", code)
	}
	if code, _, _ := anon.call("POST", "/api/session", map[string]string{"token": "not-a-token-0123456789"}, ui); code != http.StatusUnauthorized {
		t.Fatalf("sign in with an unknown token: %d, want 401", code)
	}
	if code, _, _ := anon.call("POST", "/api/session", map[string]string{"token": workerTok}, ui); code != http.StatusUnauthorized {
		t.Fatalf("sign in with a worker token: %d, want 401 (a worker may not read flows)", code)
	}

	reader := newUIClient(t, base)
	code, body, cookies := reader.call("POST", "/api/session", map[string]string{"token": readerTok}, ui)
	if code != http.StatusOK {
		t.Fatalf("reader sign in: %d %s", code, body)
	}
	if len(cookies) == 0 {
		t.Fatal("sign in sets no cookie")
	}
	for _, ck := range cookies {
		if strings.Contains(ck.Value, readerTok) || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
			t.Fatalf("session cookie %+v: must be HttpOnly, SameSite=Strict and hold no token", ck)
		}
	}
	if code, body, _ := reader.call("GET", "/api/flows", nil, nil); code != http.StatusOK || !strings.Contains(body, "approval-1") {
		t.Fatalf("reader /api/flows: %d %s", code, body)
	}
	stop := map[string]string{"type": "cancel", "reason": "r"}
	if code, body, _ := reader.call("POST", "/api/flows/approval-1/stop", stop, ui); code != http.StatusForbidden || !strings.Contains(body, "client") {
		t.Fatalf("reader stop: %d %s, want 403 naming role client", code, body)
	}

	client := newUIClient(t, base)
	if code, body, _ := client.call("POST", "/api/session", map[string]string{"token": clientTok}, ui); code != http.StatusOK {
		t.Fatalf("client sign in: %d %s", code, body)
	}
	if code, _, _ := client.call("POST", "/api/flows/approval-1/stop", stop, nil); code != http.StatusForbidden {
		t.Fatalf("a write without X-Dex-UI: %d, want 403", code)
	}
	cross := map[string]string{"X-Dex-UI": "1", "Origin": "http://evil.example"}
	if code, _, _ := client.call("POST", "/api/flows/approval-1/stop", stop, cross); code != http.StatusForbidden {
		t.Fatalf("a write from another origin: %d, want 403", code)
	}
	// Bad input is refused naming the field.
	if code, body, _ := client.call("POST", "/api/flows/approval-1/attributes", map[string]string{"name": "x", "value": "not json"}, ui); code != http.StatusBadRequest || !strings.Contains(body, "value") {
		t.Fatalf("an attribute value that is not JSON: %d %s, want 400 naming value", code, body)
	}
	if code, body, _ := client.call("POST", "/api/flows/approval-1/stop", map[string]string{"type": "pause"}, ui); code != http.StatusBadRequest || !strings.Contains(body, "type") {
		t.Fatalf("stop type pause: %d %s, want 400 naming type", code, body)
	}
	if code, body, _ := client.call("GET", "/api/flows?status=sleeping", nil, nil); code != http.StatusBadRequest || !strings.Contains(body, "status") {
		t.Fatalf("status sleeping: %d %s, want 400 naming status", code, body)
	}
	if code, body, _ := client.call("GET", "/api/flows/nope", nil, nil); code != http.StatusNotFound {
		t.Fatalf("an unknown flow: %d %s, want 404", code, body)
	}
	if code, body, _ := client.call("POST", "/api/flows/approval-1/stop", stop, ui); code != http.StatusOK || !strings.Contains(body, "CANCELED") {
		t.Fatalf("client stop: %d %s", code, body)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(p.Log(), `msg="web UI action" mode=dev nodeId=node-1 action=stop identity="token bob"`); {
		if time.Now().After(deadline) {
			t.Fatalf("the stop is not logged with who did it:\n%s", p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The tokens file loses alice: her session stops working.
	write(clientTok + " client bob\n")
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, _, _ := reader.call("GET", "/api/flows", nil, nil)
		if code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a removed token still reads: %d", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Signing out ends the session.
	if code, _, _ := client.call("DELETE", "/api/session", nil, ui); code != http.StatusOK {
		t.Fatalf("sign out: %d", code)
	}
	if code, _, _ := client.call("GET", "/api/flows", nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("after sign out /api/flows: %d, want 401", code)
	}
}

// With auth on, the UI asks for a token, and after signing in shows the
// flows and the identity; signing out asks again. No console errors but
// the 401 that made it ask.
func TestUI_SignInPage(t *testing.T) {
	chrome := chromium(t)
	base, _, _ := authServer(t)
	b := newBrowser(t, chrome)
	b.do(chromedp.Navigate(base + "/"))
	b.do(chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SetValue(chromedp.CSS("#token"), clientTok),
		chromedp.Click(chromedp.CSS(`main button[type="submit"]`)))
	b.waitText("#flows tbody", "approval-1")
	b.waitText("#who", "bob (client)")
	b.do(chromedp.Click(chromedp.CSS("#who button")), chromedp.WaitVisible(chromedp.CSS("#token")))
	var unexpected []string
	for _, e := range b.consoleErrors() {
		if !strings.Contains(e, "401") {
			unexpected = append(unexpected, e)
		}
	}
	if len(unexpected) > 0 {
		t.Fatalf("console errors:\n%s", strings.Join(unexpected, "\n"))
	}
}
