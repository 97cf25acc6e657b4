package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
)

// checkS3Security checks the TLS and server-side encryption settings of
// the S3 backend: storage.s3.caFile must be a readable PEM bundle with at
// least one certificate (and is of use only with an https endpoint),
// storage.s3.sse one of the two S3 modes, storage.s3.kmsKeyId only with
// "aws:kms".
func checkS3Security(s S3, bad func(string, ...any)) {
	if s.CAFile != "" {
		if _, err := LoadCAFile(s.CAFile); err != nil {
			bad("storage.s3.caFile: %v", err)
		} else if u, err := url.Parse(s.Endpoint); s.Endpoint != "" && err == nil && u.Scheme != "https" {
			bad("storage.s3.caFile: is set but storage.s3.endpoint %q is not https", s.Endpoint)
		}
	}
	switch s.SSE {
	case "", SSES3, SSEKMS:
	default:
		bad("storage.s3.sse: must be %q (SSE-S3) or %q (SSE-KMS), got %q", SSES3, SSEKMS, s.SSE)
	}
	if s.KMSKeyID != "" && s.SSE != SSEKMS {
		bad("storage.s3.kmsKeyId: is set but storage.s3.sse is %q; it applies only to %q", s.SSE, SSEKMS)
	}
}

// LoadCAFile reads a PEM bundle of CA certificates into a pool; a file
// without any certificate is an error.
func LoadCAFile(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path) //nolint:gosec // the operator names the file
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
