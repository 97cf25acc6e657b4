package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/testcerts"
)

// The security keys are validated with the files they name, and every
// error names its key; without an auth section the API is open.
func TestValidate_SecurityKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	srv := ca.Issue(t, testcerts.Spec{CommonName: "s", Server: true}).Write(t, dir, "server")
	caFile := ca.WriteCA(t, dir, "ca")
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("client-token-0123456789 client\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badTokens := filepath.Join(dir, "bad-tokens")
	if err := os.WriteFile(badTokens, []byte("short client\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsYAML := "api:\n  tls:\n    certFile: " + srv.Cert + "\n    keyFile: " + srv.Key + "\n"
	good := []string{
		"",
		tlsYAML,
		tlsYAML + "    clientCAFile: " + caFile + "\n    clientAuth: verifyIfGiven\nauth:\n  certificateRoles:\n    orders: worker:order,approval\n    ops: admin\n",
		"auth:\n  tokensFile: " + tokens + "\n",
		"metrics:\n  listen: 127.0.0.1:0\n  tokensFile: " + tokens + "\n  readyzOpen: false\n  tls:\n    certFile: " + srv.Cert + "\n    keyFile: " + srv.Key + "\n",
	}
	for _, doc := range good {
		c, err := config.Parse([]byte(doc), config.ModeDev)
		if err != nil {
			t.Errorf("Parse(%q): %v", doc, err)
			continue
		}
		if want := strings.Contains(doc, "auth:"); c.AuthEnabled() != want {
			t.Errorf("Parse(%q): AuthEnabled = %v, want %v", doc, !want, want)
		}
	}
	bad := map[string]string{
		"api:\n  tls:\n    certFile: " + srv.Cert + "\n":                              "api.tls.keyFile: must be set",
		"api:\n  tls:\n    certFile: " + srv.Key + "\n    keyFile: " + srv.Key + "\n": "api.tls.certFile",
		"api:\n  tls:\n    clientCAFile: " + caFile + "\n":                            "api.tls.clientCAFile, api.tls.clientAuth: need",
		tlsYAML + "    clientAuth: always\n":                                          "api.tls.clientAuth: must be",
		tlsYAML + "    clientCAFile: " + srv.Key + "\n":                               "api.tls.clientCAFile",
		"auth:\n  tokensFile: " + badTokens + "\n":                                    "auth.tokensFile: " + badTokens + ": line 1",
		"auth:\n  tokensFile: " + filepath.Join(dir, "missing") + "\n":                "auth.tokensFile",
		"auth: {}\n": "auth: set auth.tokensFile",
		"auth:\n  certificateRoles:\n    x: admin\n":                                              "auth.certificateRoles: needs api.tls.clientCAFile",
		tlsYAML + "    clientCAFile: " + caFile + "\nauth:\n  certificateRoles:\n    x: worker\n": "auth.certificateRoles.x: role \"worker\" needs its flow types",
		"auth:\n  tokenFile: x\n":                  "unknown configuration key \"auth.tokenFile\"",
		"metrics:\n  tokensFile: " + tokens + "\n": "metrics.tokensFile: needs metrics.listen",
	}
	for doc, want := range bad {
		_, err := config.Parse([]byte(doc), config.ModeDev)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", doc, err, want)
		}
	}
}
