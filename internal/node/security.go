package node

// The process's TLS and authentication (issue 16): api.tls, auth,
// admin.credentialFile, and the metrics listener's metrics.tls and
// metrics.tokensFile. The files are read at startup (Validate has checked
// them already) and re-read on use when they change.

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/dexzd/dexzd/internal/auth"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/server"
)

// apiSecurity fills opts' TLS and Auth from cfg and logs, once, how the
// API is protected: a WARN when it is open or sends tokens in plaintext
// (an INFO line in dev mode, which is for a developer's machine).
func apiSecurity(cfg *config.Config, mode config.Mode, log *slog.Logger, opts *server.Options) error {
	var cred string
	if cfg.Admin.CredentialFile != "" {
		raw, err := os.ReadFile(cfg.Admin.CredentialFile)
		if err != nil {
			return fmt.Errorf("admin.credentialFile: %w", err)
		}
		cred = strings.TrimSpace(string(raw))
		if cred == "" {
			// Validate refuses such a file at startup; it may have been
			// emptied since. An empty credential must never mean "none".
			return fmt.Errorf("admin.credentialFile: %s is empty or holds only whitespace", cfg.Admin.CredentialFile)
		}
	}
	ao := auth.Options{Enforce: cfg.AuthEnabled(), AdminCredential: cred}
	if ao.Enforce {
		if cfg.Auth.TokensFile != "" {
			tf, err := auth.OpenTokenFile("auth.tokensFile", cfg.Auth.TokensFile, log, 0, nil)
			if err != nil {
				return err
			}
			ao.Tokens = tf
		}
		grants, err := cfg.CertificateGrants()
		if err != nil {
			return err
		}
		ao.CertificateRoles = grants
	}
	opts.Auth = auth.NewAuthorizer(ao)
	opts.AdminCredential = cred

	if t := cfg.API.TLS; t.Enabled() {
		ts, err := auth.NewTLSServer(auth.TLSFiles{Key: "api.tls", CertFile: t.CertFile, KeyFile: t.KeyFile,
			ClientCAFile: t.ClientCAFile, ClientAuth: t.ClientAuthType(), Logger: log})
		if err != nil {
			return err
		}
		opts.TLS = ts
	}

	warn := log.Warn
	if mode == config.ModeDev {
		warn = log.Info
	}
	mtls := cfg.API.TLS.ClientCAFile != ""
	switch {
	case !ao.Enforce && !mtls:
		what := "anyone who reaches api.listen may start, stop and read every flow and serve as a worker"
		if cred == "" {
			what += ", and step the node down"
		}
		warn("API open: no auth section; "+what+" (see the README's Security section)",
			"tls", cfg.API.TLS.Enabled(), "adminCredential", cred != "")
	case !ao.Enforce:
		warn("API open to every client certificate issued by api.tls.clientCAFile: no auth section, so no roles",
			"adminCredential", cred != "")
	case !cfg.API.TLS.Enabled():
		warn("API authentication on without api.tls: bearer tokens travel in plaintext",
			"tokens", ao.Tokens != nil, "certificateRoles", len(ao.CertificateRoles))
	default:
		log.Info("API authentication on", "tls", true, "mutualTLS", mtls, "tokens", ao.Tokens != nil,
			"certificateRoles", len(ao.CertificateRoles), "adminCredential", cred != "")
	}
	return nil
}

// apiListener wraps the API listener when it serves TLS, so that a
// plaintext client is told TLS is required.
func apiListener(lis net.Listener, opts server.Options) net.Listener {
	if opts.TLS == nil {
		return lis
	}
	return server.RefusePlaintext(lis)
}

// metricsSecurity wraps the metrics handler in metrics.tokensFile's
// check and returns the listener's TLS, nil for plaintext. /livez is
// always open; /readyz unless metrics.readyzOpen is false.
func metricsSecurity(mc config.Metrics, h http.Handler, log *slog.Logger) (http.Handler, *auth.TLSServer, error) {
	var ts *auth.TLSServer
	if t := mc.TLS; t.Enabled() {
		var err error
		ts, err = auth.NewTLSServer(auth.TLSFiles{Key: "metrics.tls", CertFile: t.CertFile, KeyFile: t.KeyFile,
			ClientCAFile: t.ClientCAFile, ClientAuth: t.ClientAuthType(), Logger: log})
		if err != nil {
			return nil, nil, err
		}
	}
	if mc.TokensFile == "" {
		return h, ts, nil
	}
	tf, err := auth.OpenTokenFile("metrics.tokensFile", mc.TokensFile, log, 0, nil)
	if err != nil {
		return nil, nil, err
	}
	return &metricsAuth{next: h, tokens: tf, readyzOpen: mc.ReadyzOpen}, ts, nil
}

// metricsAuth answers 401 to a request without a token of
// metrics.tokensFile that grants reader.
type metricsAuth struct {
	next       http.Handler
	tokens     *auth.TokenFile
	readyzOpen bool
}

func (m *metricsAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/livez" || (m.readyzOpen && r.URL.Path == "/readyz") {
		m.next.ServeHTTP(w, r)
		return
	}
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if ok && tok != "" {
		if p, found := m.tokens.Lookup(tok); found && p.Grant.Allows(auth.Reader) {
			m.next.ServeHTTP(w, r)
			return
		}
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="dex-server-zd metrics"`)
	http.Error(w, "a bearer token of metrics.tokensFile with role reader is required", http.StatusUnauthorized)
}
