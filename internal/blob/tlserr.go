package blob

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// IsCertificateError reports whether err comes from verifying the store's
// TLS certificate: signed by an authority the client does not trust
// (storage.s3.caFile, sslrootcert), for another host name, expired. The
// backends class it as permanent: a retry meets the same certificate, and
// an operator must fix the CA bundle or the certificate.
func IsCertificateError(err error) bool {
	var (
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		ci  x509.CertificateInvalidError
		cve *tls.CertificateVerificationError
	)
	return errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci) || errors.As(err, &cve)
}
