package cli

import (
	"github.com/spf13/pflag"

	"github.com/dexzd/dexzd/internal/cli/session"
)

// registerSecurity registers the TLS and token flags, whose defaults come
// from the environment ($DEX_TLS_CA and so on).
func registerSecurity(fs *pflag.FlagSet, env *session.Env) {
	sec := &env.Globals.Security
	fs.BoolVar(&sec.TLS, "tls", env.EnvDefault(session.TLSEnv) == "1" || env.EnvDefault(session.TLSEnv) == "true",
		"connect over TLS, trusting the system's CAs unless --tls-ca is given")
	fs.StringVar(&sec.TLSCA, "tls-ca", env.EnvDefault(session.TLSCAEnv), "connect over TLS, trusting the CAs of PEM `FILE`")
	fs.StringVar(&sec.TLSCert, "tls-cert", env.EnvDefault(session.TLSCertEnv), "client certificate PEM `FILE` (mutual TLS)")
	fs.StringVar(&sec.TLSKey, "tls-key", env.EnvDefault(session.TLSKeyEnv), "client key PEM `FILE` (mutual TLS)")
	fs.StringVar(&sec.ServerName, "tls-server-name", env.EnvDefault(session.TLSServerNameEnv), "the `NAME` the server's certificate must carry")
	fs.StringVar(&sec.TokenFile, "token-file", env.EnvDefault(session.TokenFileEnv), "read the bearer token from `PATH`")
}

// securityFlagHelp documents the flags of registerSecurity.
const securityFlagHelp = `  --tls, --tls-ca FILE, --tls-server-name NAME
        connect over TLS, trusting the system's CAs or those of FILE, and
        expecting NAME in the server's certificate (default: the host of
        --server); $DEX_TLS=1, $DEX_TLS_CA, $DEX_TLS_SERVER_NAME
  --tls-cert FILE --tls-key FILE
        the client certificate and key, for a server that verifies clients
        (mutual TLS); $DEX_TLS_CERT, $DEX_TLS_KEY
  --token-file PATH
        file holding a bearer token of the server's auth.tokensFile, sent as
        "authorization: Bearer <token>"; $DEX_TOKEN_FILE
`
