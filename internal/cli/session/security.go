package session

import (
	"os"
	"strings"

	"google.golang.org/grpc"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/cli/output"
)

// Environment variables of the security flags' defaults.
const (
	TLSEnv           = "DEX_TLS"
	TLSCAEnv         = "DEX_TLS_CA"
	TLSCertEnv       = "DEX_TLS_CERT"
	TLSKeyEnv        = "DEX_TLS_KEY"
	TLSServerNameEnv = "DEX_TLS_SERVER_NAME"
	TokenFileEnv     = "DEX_TOKEN_FILE"
)

// Security are the global flags of TLS and authentication.
type Security struct {
	// TLS connects over TLS with the system's roots when no CA is given.
	TLS                                bool
	TLSCA, TLSCert, TLSKey, ServerName string
	// TokenFile holds a bearer token of auth.tokensFile.
	TokenFile string
}

// EnvDefault is the default of a flag taken from the environment.
func (e *Env) EnvDefault(name string) string { return strings.TrimSpace(e.Getenv(name)) }

// tlsWanted reports whether any TLS flag asks for TLS.
func (s Security) tlsWanted() bool {
	return s.TLS || s.TLSCA != "" || s.TLSCert != "" || s.TLSKey != "" || s.ServerName != ""
}

// dialOptions are the dial options of the security flags and of the admin
// credential read from --credential-file (token).
func (s Security) dialOptions(token string) ([]grpc.DialOption, error) {
	if (s.TLSCert == "") != (s.TLSKey == "") {
		return nil, Usagef("--tls-cert and --tls-key (or $%s and $%s) must be given together", TLSCertEnv, TLSKeyEnv)
	}
	var tlsCfg *dex.TLSConfig
	if s.tlsWanted() {
		tlsCfg = &dex.TLSConfig{CAFile: s.TLSCA, CertFile: s.TLSCert, KeyFile: s.TLSKey, ServerName: s.ServerName}
	}
	var src dex.TokenSource
	switch {
	case token != "" && s.TokenFile != "":
		return nil, Usagef("--credential-file and --token-file both give a token; pass one")
	case token != "":
		src = dex.StaticToken(token)
	case s.TokenFile != "":
		b, err := os.ReadFile(s.TokenFile)
		if err != nil {
			return nil, Usagef("read --token-file: %v", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return nil, Usagef("--token-file %s is empty", s.TokenFile)
		}
		src = dex.StaticToken(tok)
	}
	opts, err := dex.DialOptions(tlsCfg, src)
	if err != nil {
		return nil, Usagef("%s", strings.TrimPrefix(err.Error(), "dex: "))
	}
	return opts, nil
}

// Args are the security flags as a command line, for retry lines.
func (s Security) Args() []string {
	var out []string
	add := func(flag, v string) {
		if v != "" {
			out = append(out, flag, output.ShellQuote(v))
		}
	}
	if s.TLS && s.TLSCA == "" {
		out = append(out, "--tls")
	}
	add("--tls-ca", s.TLSCA)
	add("--tls-cert", s.TLSCert)
	add("--tls-key", s.TLSKey)
	add("--tls-server-name", s.ServerName)
	add("--token-file", s.TokenFile)
	return out
}
