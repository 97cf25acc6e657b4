package auth

import (
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Options configure an Authorizer.
type Options struct {
	// Enforce is set when the configuration has an auth section: every
	// call then needs a principal with the method's role. Without it the
	// API is open (callers without credentials may do anything) except
	// that AdminService needs AdminCredential when one is set (A9).
	Enforce bool
	// Tokens is auth.tokensFile; nil means none.
	Tokens *TokenFile
	// AdminCredential is the content of admin.credentialFile: a bearer
	// token with role admin. Empty means none.
	AdminCredential string
	// CertificateRoles is auth.certificateRoles: a verified client
	// certificate whose subject common name, or one of whose DNS, URI or
	// email SANs, is a key has the key's grant (the union when several
	// match).
	CertificateRoles map[string]Grant
}

// Authorizer authenticates callers.
type Authorizer struct {
	opts      Options
	anonymous Grant
}

// NewAuthorizer returns an Authorizer for opts.
func NewAuthorizer(opts Options) *Authorizer {
	a := &Authorizer{opts: opts}
	if !opts.Enforce {
		a.anonymous = All()
		if opts.AdminCredential != "" {
			a.anonymous.admin = false
		}
	}
	return a
}

// Open reports whether callers without credentials may call everything.
func (a *Authorizer) Open() bool { return a.anonymous.Allows(Admin) }

// Errors of Authenticate; the server maps both to UNAUTHENTICATED.
var (
	// ErrNoCredentials: the call carries neither a token nor a
	// certificate, and anonymous callers may not call the method.
	ErrNoCredentials = errors.New("no credentials")
	// ErrUnknownToken: the bearer token is in no tokens file (with
	// Enforce; in open mode such a caller is anonymous).
	ErrUnknownToken = errors.New("the bearer token is not valid")
	// ErrMalformedAuthorization: the authorization metadata is not
	// "Bearer <token>".
	ErrMalformedAuthorization = errors.New("the authorization metadata must be \"Bearer <token>\"")
)

// Credentials are what a call presented.
type Credentials struct {
	// Authorization is the "authorization" metadata; empty when absent.
	Authorization string
	// Certificate is the verified client certificate (the leaf of the
	// verified chain); nil when none.
	Certificate *x509.Certificate
}

// Authenticate returns the principal of c. A token wins over a
// certificate: it is the more specific credential. A call with neither is
// the anonymous principal, whose grant is empty when Enforce is set.
func (a *Authorizer) Authenticate(c Credentials) (Principal, error) {
	if c.Authorization != "" {
		tok, ok := strings.CutPrefix(c.Authorization, "Bearer ")
		if !ok {
			tok, ok = strings.CutPrefix(c.Authorization, "bearer ")
		}
		if !ok || tok == "" {
			return Principal{}, ErrMalformedAuthorization
		}
		if cred := a.opts.AdminCredential; cred != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(cred)) == 1 {
			return Principal{Identity: "token admin.credentialFile", Grant: Grant{admin: true}}, nil
		}
		if a.opts.Tokens != nil {
			if p, ok := a.opts.Tokens.Lookup(tok); ok {
				return p, nil
			}
		}
		if !a.opts.Enforce {
			// Open mode: an unknown token is an anonymous caller, as
			// before tokens existed; AdminService still refuses it when
			// an admin credential is set (PERMISSION_DENIED, A9).
			return Principal{Identity: "anonymous (unknown token)", Grant: a.anonymous}, nil
		}
		return Principal{}, ErrUnknownToken
	}
	if c.Certificate != nil {
		return a.certificatePrincipal(c.Certificate), nil
	}
	return Principal{Identity: "anonymous", Grant: a.anonymous}, nil
}

// certificatePrincipal maps a verified certificate to its grant. A
// certificate that no key names has the anonymous grant: with Enforce,
// none (the TLS handshake already proved it was issued by the CA).
func (a *Authorizer) certificatePrincipal(cert *x509.Certificate) Principal {
	g := a.anonymous
	names := CertificateNames(cert)
	for _, n := range names {
		if r, ok := a.opts.CertificateRoles[n]; ok {
			g = g.Union(r)
		}
	}
	id := "certificate CN=" + cert.Subject.CommonName
	if cert.Subject.CommonName == "" && len(names) > 0 {
		id = "certificate SAN=" + names[0]
	}
	return Principal{Identity: id, Grant: g}
}

// CertificateNames are the names auth.certificateRoles matches: the
// subject common name, then the DNS, URI and email SANs.
func CertificateNames(cert *x509.Certificate) []string {
	var names []string
	if cert.Subject.CommonName != "" {
		names = append(names, cert.Subject.CommonName)
	}
	names = append(names, cert.DNSNames...)
	for _, u := range cert.URIs {
		names = append(names, u.String())
	}
	names = append(names, cert.EmailAddresses...)
	return slices.Compact(names)
}

// DeniedError is a call whose principal lacks the method's permission.
type DeniedError struct {
	Principal Principal
	Method    string
	Need      Permission
	// FlowType is set when a worker is not granted a flow type it asked
	// for.
	FlowType string
}

func (e *DeniedError) Error() string {
	if e.FlowType != "" {
		return fmt.Sprintf("%s (role %s) is not a worker for flow type %q: needs role worker:%s (or worker:*, admin)",
			e.Principal.Identity, e.Principal.Grant, e.FlowType, e.FlowType)
	}
	return fmt.Sprintf("%s (role %s) may not call %s: needs role %s", e.Principal.Identity, e.Principal.Grant, e.Method, neededRoles(e.Need))
}

// UnauthenticatedError is a call without valid credentials for a method
// that needs some.
type UnauthenticatedError struct {
	Err    error
	Method string
	Need   Permission
}

func (e *UnauthenticatedError) Error() string {
	return fmt.Sprintf("%v: %s needs role %s; send \"authorization: Bearer <token>\" or a client certificate", e.Err, e.Method, neededRoles(e.Need))
}

func (e *UnauthenticatedError) Unwrap() error { return e.Err }

// neededRoles names the roles that have p.
func neededRoles(p Permission) string {
	switch p {
	case Reader:
		return "reader (or client, admin)"
	case Client:
		return "client (or admin)"
	case Worker:
		return "worker:FLOW_TYPE (or admin)"
	case Admin:
		return "admin"
	}
	return p.String()
}

// Check authenticates c and checks permission need for method: nil, an
// *UnauthenticatedError or a *DeniedError. It returns the principal for
// further checks (the worker's flow types).
func (a *Authorizer) Check(c Credentials, method string, need Permission) (Principal, error) {
	p, err := a.Authenticate(c)
	if err != nil {
		if need == Open {
			return Principal{Identity: "anonymous"}, nil
		}
		return p, &UnauthenticatedError{Err: err, Method: method, Need: need}
	}
	if p.Grant.Allows(need) {
		return p, nil
	}
	if c.Authorization == "" && c.Certificate == nil {
		return p, &UnauthenticatedError{Err: ErrNoCredentials, Method: method, Need: need}
	}
	return p, &DeniedError{Principal: p, Method: method, Need: need}
}
