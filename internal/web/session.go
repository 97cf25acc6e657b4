package web

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/dexzd/dexzd/internal/auth"
	"github.com/dexzd/dexzd/internal/server"
)

// cookieName is the session cookie; it holds a random ID only.
const cookieName = "dexzd_session"

// sessions keeps the signed-in browsers' tokens in memory (doc.go: What a
// browser may do). A restart signs everybody out.
type sessions struct {
	ttl time.Duration
	max int // maxSessions; tests lower it
	mu  sync.Mutex
	m   map[string]session
}

type session struct {
	token   string
	expires time.Time
}

// maxSessions bounds the table; the oldest sign-ins go first.
const maxSessions = 10_000

func newSessions(ttl time.Duration) *sessions {
	return &sessions{ttl: ttl, max: maxSessions, m: map[string]session{}}
}

func (ss *sessions) add(token string, now time.Time) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b[:])
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for k, v := range ss.m {
		if !now.Before(v.expires) {
			delete(ss.m, k)
		}
	}
	for len(ss.m) >= ss.max {
		var oldest string
		var at time.Time
		for k, v := range ss.m {
			if oldest == "" || v.expires.Before(at) {
				oldest, at = k, v.expires
			}
		}
		delete(ss.m, oldest)
	}
	ss.m[id] = session{token: token, expires: now.Add(ss.ttl)}
	return id, nil
}

func (ss *sessions) token(id string, now time.Time) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	v, ok := ss.m[id]
	if !ok {
		return ""
	}
	if !now.Before(v.expires) {
		delete(ss.m, id)
		return ""
	}
	return v.token
}

func (ss *sessions) remove(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

// credentials are the credentials of r's session: its token, or none.
func (s *Server) credentials(r *http.Request) auth.Credentials {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return auth.Credentials{}
	}
	if tok := s.sessions.token(c.Value, time.Now()); tok != "" {
		return auth.Credentials{Authorization: "Bearer " + tok}
	}
	return auth.Credentials{}
}

// authorize checks that r's session may call method, answering 401 or 403
// (with the authorizer's message) when not; it returns the API to call.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, method string) (API, bool) {
	api, a := s.node.API()
	need := server.Permission(method)
	if _, err := a.Check(s.credentials(r), method, need); err != nil {
		var denied *auth.DeniedError
		if errors.As(err, &denied) {
			writeError(w, http.StatusForbidden, "PERMISSION_DENIED", err.Error())
		} else {
			writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "sign in with a token that has role "+need.String()+": "+err.Error())
		}
		return nil, false
	}
	return api, true
}

// sameOrigin refuses a write that a page of another site could have sent:
// it must carry X-Dex-UI (which a cross-site form or a simple request
// cannot set) and, when the browser names its Origin, come from the UI's
// own host.
func sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("X-Dex-UI") == "" {
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "writes need the X-Dex-UI header (they come from the UI's own pages)")
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "writes must come from the UI's own origin, not "+o)
			return false
		}
	}
	return true
}

// sessionInfo answers GET /api/session.
type sessionInfo struct {
	// Open: anonymous callers may read and act; no sign-in needed.
	Open     bool   `json:"open"`
	SignedIn bool   `json:"signedIn"`
	Identity string `json:"identity,omitempty"`
	Roles    string `json:"roles,omitempty"`
	CanRead  bool   `json:"canRead"`
	CanAct   bool   `json:"canAct"`
}

func (s *Server) info(r *http.Request) sessionInfo {
	_, a := s.node.API()
	c := s.credentials(r)
	p, err := a.Authenticate(c)
	si := sessionInfo{SignedIn: c.Authorization != "" && err == nil}
	anon, _ := a.Authenticate(auth.Credentials{})
	si.Open = anon.Grant.Allows(auth.Client)
	if err == nil {
		si.Identity, si.Roles = p.Identity, p.Grant.String()
		si.CanRead, si.CanAct = p.Grant.Allows(auth.Reader), p.Grant.Allows(auth.Client)
	}
	return si
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.info(r))
}

func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(w, r) {
		return
	}
	var in struct {
		Token string `json:"token"`
	}
	if err := decode(r, &in); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	if in.Token == "" {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "token: must be set")
		return
	}
	_, a := s.node.API()
	p, err := a.Authenticate(auth.Credentials{Authorization: "Bearer " + in.Token})
	if err != nil || !p.Grant.Allows(auth.Reader) {
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "the token is not valid, or has none of the roles reader, client, admin")
		return
	}
	id, err := s.sessions.add(in.Token, time.Now())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL", err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(s.sessions.ttl / time.Second)})
	s.log.Info("web UI sign-in", "identity", p.Identity, "roles", p.Grant.String())
	si := sessionInfo{SignedIn: true, Identity: p.Identity, Roles: p.Grant.String(),
		CanRead: true, CanAct: p.Grant.Allows(auth.Client)}
	writeJSON(w, http.StatusOK, si)
}

func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(w, r) {
		return
	}
	if c, err := r.Cookie(cookieName); err == nil {
		s.sessions.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	writeJSON(w, http.StatusOK, s.info(&http.Request{Header: http.Header{}}))
}

// decode reads a JSON body of at most 1 MiB, refusing unknown fields.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New("the request body is not the JSON object expected: " + err.Error())
	}
	return nil
}
