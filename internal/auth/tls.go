package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// TLSFiles configure a listener's TLS (api.tls, metrics.tls).
type TLSFiles struct {
	// Key is the configuration key ("api.tls"), for messages.
	Key string
	// CertFile and KeyFile are the PEM certificate (chain) and key.
	CertFile, KeyFile string
	// ClientCAFile, when set, is the PEM bundle client certificates are
	// verified against (mutual TLS).
	ClientCAFile string
	// ClientAuth is how client certificates are asked for when
	// ClientCAFile is set: tls.RequireAndVerifyClientCert (the default)
	// or tls.VerifyClientCertIfGiven.
	ClientAuth tls.ClientAuthType
	// Interval is how often the files are looked at for a change;
	// 0 means DefaultCheckInterval. Now nil means time.Now.
	Interval time.Duration
	Now      func() time.Time
	Logger   *slog.Logger
}

// TLSServer is a listener's TLS configuration, whose certificate, key and
// client CA bundle are re-read on a handshake when their files changed
// (at most once per interval): connections that are open keep going, new
// ones get the new certificate. A change that does not load (a
// certificate that does not match its key while a rotation is half
// written) keeps the files read last and is logged at WARN once.
type TLSServer struct {
	files TLSFiles
	w     *watched

	mu  sync.RWMutex
	cur *tls.Config
}

// NewTLSServer loads the files; an error names the key and the file.
func NewTLSServer(files TLSFiles) (*TLSServer, error) {
	if files.Logger == nil {
		files.Logger = slog.New(slog.DiscardHandler)
	}
	if files.ClientAuth == tls.NoClientCert {
		files.ClientAuth = tls.RequireAndVerifyClientCert
	}
	paths := []string{files.CertFile, files.KeyFile}
	if files.ClientCAFile != "" {
		paths = append(paths, files.ClientCAFile)
	}
	s := &TLSServer{files: files, w: newWatched(files.Interval, files.Now, paths...)}
	s.w.due()
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *TLSServer) load() error {
	st := s.w.statAll()
	f := s.files
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return fmt.Errorf("%s.certFile %s, %s.keyFile %s: %w", f.Key, f.CertFile, f.Key, f.KeyFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if f.ClientCAFile != "" {
		pool, err := LoadCertPool(f.ClientCAFile)
		if err != nil {
			return fmt.Errorf("%s.clientCAFile: %w", f.Key, err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = f.ClientAuth
	}
	s.mu.Lock()
	s.cur = cfg
	s.mu.Unlock()
	s.w.record(st)
	return nil
}

// LoadCertPool reads a PEM bundle of CA certificates.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// current re-reads the files when they changed and returns the
// configuration to use.
func (s *TLSServer) current() *tls.Config {
	s.w.refresh(s.files.Logger, s.files.Key, "TLS files", s.load)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur
}

// Config returns a tls.Config for a listener whose application protocols
// are nextProtos ("h2" for gRPC): each handshake uses the files as of
// that handshake.
func (s *TLSServer) Config(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cur := s.current()
			if cur == nil {
				return nil, errors.New("no TLS certificate loaded")
			}
			c := cur.Clone()
			c.NextProtos = nextProtos
			return c, nil
		},
	}
}

// Leaf returns the certificate in use (for logs and tests).
func (s *TLSServer) Leaf() *x509.Certificate {
	c := s.current()
	if c == nil || len(c.Certificates) == 0 {
		return nil
	}
	if l := c.Certificates[0].Leaf; l != nil {
		return l
	}
	l, err := x509.ParseCertificate(c.Certificates[0].Certificate[0])
	if err != nil {
		return nil
	}
	return l
}
