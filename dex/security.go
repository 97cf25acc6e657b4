package dex

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TLSConfig connects a Client or a Worker to a server that serves TLS
// (api.tls). Set it in ClientOptions.TLS or WorkerOptions.TLS; it applies
// to the default Dialer. A server that requires TLS answers a plaintext
// client with UNAUTHENTICATED saying so.
type TLSConfig struct {
	// CAFile is a PEM bundle of the CAs that issue the server's
	// certificate. RootCAs, when set, is used instead. With neither, the
	// system's roots.
	CAFile  string
	RootCAs *x509.CertPool
	// CertFile and KeyFile are the client certificate and its key, for a
	// server that verifies clients (api.tls.clientCAFile). They are read
	// again on a new connection when they changed (at most once a
	// second), so a rotated certificate is picked up without a restart.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must carry. Default:
	// the host of the address dialled.
	ServerName string
}

// credentials builds the TLS transport credentials.
func (c *TLSConfig) credentials() (credentials.TransportCredentials, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, RootCAs: c.RootCAs}
	if cfg.RootCAs == nil && c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("dex: TLS CAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("dex: TLS CAFile %s holds no PEM certificate", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case c.CertFile == "" && c.KeyFile == "":
	case c.CertFile == "" || c.KeyFile == "":
		return nil, errors.New("dex: TLS CertFile and KeyFile must be set together")
	default:
		kp := &keyPairFile{certFile: c.CertFile, keyFile: c.KeyFile}
		if _, err := kp.get(time.Now()); err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get(time.Now()) }
	}
	return credentials.NewTLS(cfg), nil
}

// keyPairFile is a certificate and key read again when their files
// change, checked at most once a second.
type keyPairFile struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	checked time.Time
	stamp   [2]time.Time
	sizes   [2]int64
}

func (k *keyPairFile) get(now time.Time) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cert != nil && now.Sub(k.checked) < time.Second {
		return k.cert, nil
	}
	k.checked = now
	var stamp [2]time.Time
	var sizes [2]int64
	for i, p := range []string{k.certFile, k.keyFile} {
		if fi, err := os.Stat(p); err == nil {
			stamp[i], sizes[i] = fi.ModTime(), fi.Size()
		}
	}
	if k.cert != nil && stamp == k.stamp && sizes == k.sizes {
		return k.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if k.cert != nil {
			// A rotation half written: keep the pair read last.
			return k.cert, nil
		}
		return nil, fmt.Errorf("dex: TLS client certificate: %w", err)
	}
	k.cert, k.stamp, k.sizes = &cert, stamp, sizes
	return k.cert, nil
}

// TokenSource gives the bearer token a Client or Worker sends as
// "authorization: Bearer <token>" on every call (auth.tokensFile,
// admin.credentialFile). StaticToken and TokenFile make one.
type TokenSource interface {
	// Token returns the token to send; an error fails the call.
	Token(ctx context.Context) (string, error)
}

// StaticToken is a fixed token.
func StaticToken(token string) TokenSource { return staticToken(token) }

type staticToken string

func (t staticToken) Token(context.Context) (string, error) { return string(t), nil }

// TokenFile reads the token from a file (surrounding white space
// trimmed), again when the file changes (at most once a second): a token
// rotated in a mounted Kubernetes Secret is sent from the next call on.
func TokenFile(path string) TokenSource { return &tokenFile{path: path} }

type tokenFile struct {
	path string

	mu      sync.Mutex
	token   string
	checked time.Time
	stamp   time.Time
	size    int64
}

func (f *tokenFile) Token(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if f.token != "" && now.Sub(f.checked) < time.Second {
		return f.token, nil
	}
	f.checked = now
	fi, err := os.Stat(f.path)
	if err == nil && f.token != "" && fi.ModTime().Equal(f.stamp) && fi.Size() == f.size {
		return f.token, nil
	}
	raw, err := os.ReadFile(f.path)
	if err != nil {
		if f.token != "" {
			return f.token, nil
		}
		return "", fmt.Errorf("dex: token file: %w", err)
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		if f.token != "" {
			return f.token, nil
		}
		return "", fmt.Errorf("dex: token file %s is empty", f.path)
	}
	f.token = tok
	if fi != nil {
		f.stamp, f.size = fi.ModTime(), fi.Size()
	}
	return tok, nil
}

// bearer sends a TokenSource's token on every call. It does not require
// transport security, so that a development server without TLS can
// check tokens; over plaintext the token can be read on the network.
type bearer struct{ src TokenSource }

func (b bearer) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	tok, err := b.src.Token(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// DialOptions returns the gRPC dial options that connect with tlsCfg
// (nil: plaintext) and send token (nil: none): what the default Dialer
// adds for ClientOptions.TLS and Token, for programs that dial the API
// themselves (dexcli does).
func DialOptions(tlsCfg *TLSConfig, token TokenSource) ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	if tlsCfg != nil {
		creds, err := tlsCfg.credentials()
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(creds))
	}
	if token != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{src: token}))
	}
	return opts, nil
}
