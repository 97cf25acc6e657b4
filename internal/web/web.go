package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/auth"
)

//go:embed assets
var assets embed.FS

// API is the in-process API the UI calls: server.Local of the process's
// current phase implements it.
type API interface {
	SearchFlows(context.Context, *dexpb.SearchFlowsRequest) (*dexpb.SearchFlowsResponse, error)
	GetFlowSummary(context.Context, *dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error)
	GetFlowState(context.Context, *dexpb.GetFlowStateRequest) (*dexpb.GetFlowStateResponse, error)
	GetHistoryEvents(context.Context, *dexpb.GetHistoryEventsRequest) (*dexpb.GetHistoryEventsResponse, error)
	StopFlow(context.Context, *dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error)
	SkipTimer(context.Context, *dexpb.SkipTimerRequest) (*dexpb.SkipTimerResponse, error)
	PublishToChannel(context.Context, *dexpb.PublishToChannelRequest) (*dexpb.PublishToChannelResponse, error)
	SetAttributes(context.Context, *dexpb.SetAttributesRequest) (*dexpb.SetAttributesResponse, error)
	ResetFlow(context.Context, *dexpb.ResetFlowRequest) (*dexpb.ResetFlowResponse, error)
}

// Node is the process the UI shows (package node implements it).
type Node interface {
	// API returns the current phase's in-process API and its authorizer.
	API() (API, *auth.Authorizer)
	// Serving reports whether the process serves public calls now, and
	// when not, why (the /readyz message).
	Serving() (bool, string)
	// Status reads the node page's facts.
	Status(ctx context.Context) NodeStatus
}

// NodeStatus is what the node page shows.
type NodeStatus struct {
	NodeID    string    `json:"nodeId"`
	Mode      string    `json:"mode"`
	ProcessID string    `json:"processId"`
	StartedAt time.Time `json:"startedAt"`
	APIAddr   string    `json:"apiAddr"`
	// Role: active, cold standby, hot standby, holding off, starting.
	Role             string  `json:"role"`
	Serving          bool    `json:"serving"`
	NotServingReason string  `json:"notServingReason,omitempty"`
	Epoch            uint64  `json:"epoch"`
	StandbyState     string  `json:"standbyState"`
	LagSeconds       float64 `json:"lagSeconds"`
	// Lease is the lease record as read from the durable store now.
	Lease *LeaseStatus `json:"lease,omitempty"`
	// Events are the last takeovers and step downs of this process.
	Events []NodeEvent `json:"events"`
	// Standbys says what this process knows of the others: standbys do
	// not register with the active, so the active lists none; each
	// standby's node page shows its own state and lag.
	Standbys string `json:"standbys"`

	LogNextSeq           uint64            `json:"logNextSeq"`
	LogBatches           uint64            `json:"logBatches"`
	LogRecords           uint64            `json:"logRecords"`
	LogBytes             uint64            `json:"logBytes"`
	LeaseRenewals        uint64            `json:"leaseRenewals"`
	LeaseRenewalFailures uint64            `json:"leaseRenewalFailures"`
	Snapshots            uint64            `json:"snapshots"`
	SnapshotFailures     uint64            `json:"snapshotFailures"`
	LastSnapshot         *time.Time        `json:"lastSnapshot,omitempty"`
	LastSnapshotBytes    uint64            `json:"lastSnapshotBytes"`
	StoreRequests        map[string]uint64 `json:"storeRequests"`
	// MetricsURL is /metrics of metrics.listen; empty when it is off.
	MetricsURL string `json:"metricsUrl,omitempty"`
	// ActiveURL is web.activeURL.
	ActiveURL string    `json:"activeUrl,omitempty"`
	Now       time.Time `json:"now"`
}

// LeaseStatus is the lease record.
type LeaseStatus struct {
	Holder    string    `json:"holder,omitempty"`
	Epoch     uint64    `json:"epoch,omitempty"`
	RenewedAt time.Time `json:"renewedAt,omitzero"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	Released  bool      `json:"released,omitempty"`
	// Error says why the record could not be read.
	Error string `json:"error,omitempty"`
}

// NodeEvent is one takeover or step down.
type NodeEvent struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	Epoch  uint64    `json:"epoch"`
	Detail string    `json:"detail,omitempty"`
}

// Options configure the UI.
type Options struct {
	Node   Node
	Logger *slog.Logger
	// SessionTTL is how long a signed-in session lasts; 0 means 12 h.
	SessionTTL time.Duration
	// ActiveURL is web.activeURL: the 503 pages of a process that does
	// not serve link to it.
	ActiveURL string
}

// Server is the UI's HTTP handler.
type Server struct {
	node     Node
	log      *slog.Logger
	sessions *sessions
	static   http.Handler
	index    []byte
	active   string
}

// New returns the UI for o.Node.
func New(o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		return nil, fmt.Errorf("web assets: %w", err)
	}
	return &Server{node: o.Node, log: o.Logger, sessions: newSessions(o.SessionTTL), index: index, active: o.ActiveURL,
		static: http.StripPrefix("/assets/", http.FileServerFS(sub))}, nil
}

// Handler returns the UI's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /assets/", s.cached(s.static))
	mux.HandleFunc("GET /{$}", s.flowPage)
	mux.HandleFunc("GET /flows", s.flowPage)
	mux.HandleFunc("GET /flows/{id}", s.flowPage)
	mux.HandleFunc("GET /node", s.page)
	mux.HandleFunc("GET /api/session", s.getSession)
	mux.HandleFunc("POST /api/session", s.signIn)
	mux.HandleFunc("DELETE /api/session", s.signOut)
	mux.HandleFunc("GET /api/node", s.nodeStatus)
	mux.HandleFunc("GET /api/flows", s.listFlows)
	mux.HandleFunc("GET /api/flows/{id}", s.getFlow)
	mux.HandleFunc("POST /api/flows/{id}/stop", s.stopFlow)
	mux.HandleFunc("POST /api/flows/{id}/skip-timer", s.skipTimer)
	mux.HandleFunc("POST /api/flows/{id}/publish", s.publish)
	mux.HandleFunc("POST /api/flows/{id}/attributes", s.setAttribute)
	mux.HandleFunc("POST /api/flows/{id}/reset", s.resetFlow)
	return headers(mux)
}

// headers sets the headers every answer carries: no framing by other
// sites, no sniffing, scripts and styles from this origin only.
func headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		h.ServeHTTP(w, r)
	})
}

func (s *Server) cached(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// page serves the one HTML page; the browser routes by path.
func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(s.index)
}

// flowPage serves the page for the flow routes, or 503 with the reason
// while the process does not serve.
func (s *Server) flowPage(w http.ResponseWriter, r *http.Request) {
	if ok, reason := s.node.Serving(); !ok {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprint(w, notServingPage(reason, s.active))
		return
	}
	s.page(w, r)
}

// Listen serves the UI on addr until ctx ends; it returns once the
// listener is open (or failed to open).
func (s *Server) Listen(ctx context.Context, addr string) (net.Addr, func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("web.listen: %w", err)
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn("web UI stopped", "err", err)
		}
	}()
	return lis.Addr(), func() { _ = hs.Close(); <-done }, nil
}

// URL is the UI's address for people: http://HOST:PORT/, with a wildcard
// host named as loopback.
func URL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// notServingPage is the 503 page of the flow routes.
func notServingPage(reason, activeURL string) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Dex-ZD: not serving</title>` +
		`<link rel="stylesheet" href="/assets/style.css"></head><body><main class="notserving"><h1>This process does not serve flows</h1><p id="reason">`)
	b.WriteString(htmlEscape(reason))
	b.WriteString(`</p><p><a href="/node">This process's node page</a>`)
	if activeURL != "" {
		b.WriteString(` · <a id="active" href="` + htmlEscape(activeURL) + `">The active process</a>`)
	}
	b.WriteString(`</p></main></body></html>`)
	return b.String()
}

var htmlReplacer = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")

func htmlEscape(s string) string { return htmlReplacer.Replace(s) }
