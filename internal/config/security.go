package config

import (
	"crypto/tls"
	"fmt"
	"slices"

	"github.com/dexzd/dexzd/internal/auth"
)

// TLS configures a listener's TLS (api.tls, metrics.tls): TLS 1.2 or
// later with Go's default cipher suites. The files are re-read when they
// change (at most once a second, on a new connection), so a rotated
// Kubernetes Secret takes effect without a restart and without dropping
// open connections. Empty CertFile and KeyFile mean plaintext.
type TLS struct {
	// CertFile is the PEM certificate, followed by its intermediates.
	CertFile string `yaml:"certFile"`
	// KeyFile is the PEM private key of CertFile.
	KeyFile string `yaml:"keyFile"`
	// ClientCAFile, when set, is the PEM bundle that client certificates
	// are verified against (mutual TLS); auth.certificateRoles maps a
	// verified certificate to its role.
	ClientCAFile string `yaml:"clientCAFile"`
	// ClientAuth is "require" (the default: a connection without a client
	// certificate issued by ClientCAFile is refused in the handshake) or
	// "verifyIfGiven" (a certificate is verified when sent; callers
	// without one authenticate by token). Only with ClientCAFile.
	ClientAuth string `yaml:"clientAuth"`
}

// Client authentication modes of TLS.ClientAuth.
const (
	ClientAuthRequire       = "require"
	ClientAuthVerifyIfGiven = "verifyIfGiven"
)

// Enabled reports whether the listener serves TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// ClientAuthType is ClientAuth for crypto/tls.
func (t TLS) ClientAuthType() tls.ClientAuthType {
	if t.ClientAuth == ClientAuthVerifyIfGiven {
		return tls.VerifyClientCertIfGiven
	}
	return tls.RequireAndVerifyClientCert
}

// Auth turns authentication and roles on for the API. Without an auth
// section the API is open: anyone who reaches api.listen may call
// everything (AdminService only with admin.credentialFile's token when
// that is set), and the server says so at startup. With it, every call
// needs a principal with the role its method needs (package auth):
//
//	reader  summaries, state, history, attributes, list, wait
//	client  reader + start, stop, publish, set attributes, RPC, skip timer
//	worker:TYPE[,TYPE...]  the worker stream, for those flow types only
//	                       (worker:* for every flow type)
//	admin   everything, AdminService (describe, step down) included
//
// admin.credentialFile's token is one more admin token.
type Auth struct {
	// TokensFile is a file of bearer tokens and their roles, one per line
	// ("TOKEN ROLE [NAME]"; package auth), re-read when it changes.
	TokensFile string `yaml:"tokensFile"`
	// CertificateRoles maps a client certificate's subject common name,
	// or one of its DNS, URI or email SANs, to a role (api.tls.clientCAFile
	// verifies the certificate): {"orders-worker": "worker:order"}.
	CertificateRoles map[string]string `yaml:"certificateRoles"`
}

// AuthEnabled reports whether authentication is on: the file has an auth
// section (or a program set its keys).
func (c *Config) AuthEnabled() bool {
	return c.IsSet("auth") || c.Auth.TokensFile != "" || len(c.Auth.CertificateRoles) > 0
}

// CertificateGrants parses auth.certificateRoles (Validate has checked it).
func (c *Config) CertificateGrants() (map[string]auth.Grant, error) {
	out := make(map[string]auth.Grant, len(c.Auth.CertificateRoles))
	for name, role := range c.Auth.CertificateRoles {
		g, err := auth.ParseGrant(role)
		if err != nil {
			return nil, fmt.Errorf("auth.certificateRoles.%s: %w", name, err)
		}
		out[name] = g
	}
	return out, nil
}

// validateSecurity checks api.tls, metrics.tls, metrics.tokensFile and
// auth, loading the files so that a missing or unreadable secret fails at
// startup naming its key.
func (c *Config) validateSecurity() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	checkTLS := func(key string, t TLS) {
		switch {
		case !t.Enabled():
			if t.ClientCAFile != "" || t.ClientAuth != "" {
				bad("%s.clientCAFile, %s.clientAuth: need %s.certFile and %s.keyFile", key, key, key, key)
			}
			return
		case t.CertFile == "":
			bad("%s.certFile: must be set with %s.keyFile", key, key)
			return
		case t.KeyFile == "":
			bad("%s.keyFile: must be set with %s.certFile", key, key)
			return
		}
		switch t.ClientAuth {
		case "":
		case ClientAuthRequire, ClientAuthVerifyIfGiven:
			if t.ClientCAFile == "" {
				bad("%s.clientAuth: needs %s.clientCAFile", key, key)
			}
		default:
			bad("%s.clientAuth: must be %q or %q, got %q", key, ClientAuthRequire, ClientAuthVerifyIfGiven, t.ClientAuth)
		}
		if _, err := auth.NewTLSServer(auth.TLSFiles{Key: key, CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFile: t.ClientCAFile}); err != nil {
			errs = append(errs, err)
		}
	}
	checkTLS("api.tls", c.API.TLS)
	checkTLS("metrics.tls", c.Metrics.TLS)

	checkTokens := func(key, path string) {
		if path == "" {
			return
		}
		if _, err := auth.OpenTokenFile(key, path, nil, 0, nil); err != nil {
			errs = append(errs, err)
		}
	}
	checkTokens("metrics.tokensFile", c.Metrics.TokensFile)
	if c.Metrics.TokensFile != "" && c.Metrics.Listen == "" {
		bad("metrics.tokensFile: needs metrics.listen")
	}
	if c.Metrics.TLS.Enabled() && c.Metrics.Listen == "" {
		bad("metrics.tls: needs metrics.listen")
	}

	if !c.AuthEnabled() {
		return errs
	}
	checkTokens("auth.tokensFile", c.Auth.TokensFile)
	names := make([]string, 0, len(c.Auth.CertificateRoles))
	for name := range c.Auth.CertificateRoles {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == "" {
			bad("auth.certificateRoles: a key must not be empty")
			continue
		}
		if _, err := auth.ParseGrant(c.Auth.CertificateRoles[name]); err != nil {
			bad("auth.certificateRoles.%s: %v", name, err)
		}
	}
	if len(c.Auth.CertificateRoles) > 0 && c.API.TLS.ClientCAFile == "" {
		bad("auth.certificateRoles: needs api.tls.clientCAFile to verify client certificates")
	}
	if c.Auth.TokensFile == "" && len(c.Auth.CertificateRoles) == 0 && c.Admin.CredentialFile == "" {
		bad("auth: set auth.tokensFile or auth.certificateRoles (or admin.credentialFile); an auth section that grants nothing would refuse every call (remove the section to run open)")
	}
	return errs
}
