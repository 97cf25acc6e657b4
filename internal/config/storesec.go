package config

import (
	"net/url"

	"github.com/dexzd/dexzd/internal/auth"
)

// checkS3Security checks the TLS and server-side encryption settings of
// the S3 backend: storage.s3.caFile must be a readable PEM bundle with at
// least one certificate (and is of use only with an https endpoint),
// storage.s3.sse one of the two S3 modes, storage.s3.kmsKeyId only with
// "aws:kms".
func checkS3Security(s S3, bad func(string, ...any)) {
	if s.CAFile != "" {
		if _, err := auth.LoadCertPool(s.CAFile); err != nil {
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
