package node

// The web UI's view of the process (package web): its current API phase,
// called in process, and the facts of its node page.

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dexzd/dexzd/internal/auth"
	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/web"
)

// maxNodeEvents is how many takeovers and step downs the node page lists.
const maxNodeEvents = 20

// webView implements web.Node for one process.
type webView struct {
	cfg      *config.Config
	mode     config.Mode
	api      *apiSurface
	metrics  *metrics.Metrics
	started  time.Time
	leaseKey string
	// processID is the lease.Config's, set before the lifecycle starts.
	processID atomic.Pointer[string]
	// blobs is the durable store once open (serve opens it after the UI).
	blobs atomic.Pointer[blob.Store]

	mu     sync.Mutex
	events []web.NodeEvent
}

var _ web.Node = (*webView)(nil)

func (v *webView) API() (web.API, *auth.Authorizer) {
	srv := v.api.current().srv
	return srv.Local(), srv.Authorizer()
}

func (v *webView) Serving() (bool, string) { return v.api.current().srv.Gate() }

func (v *webView) setStore(b blob.Store) { v.blobs.Store(&b) }

func (v *webView) setProcessID(id string) { v.processID.Store(&id) }

// event records a takeover or step down for the node page.
func (v *webView) event(kind string, epoch uint64, detail string) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.events = append(v.events, web.NodeEvent{Time: time.Now(), Kind: kind, Epoch: epoch, Detail: detail})
	if len(v.events) > maxNodeEvents {
		v.events = v.events[len(v.events)-maxNodeEvents:]
	}
}

func (v *webView) Status(ctx context.Context) web.NodeStatus {
	m := v.metrics.Status()
	m.Leader, m.NotServingReason = v.Serving()
	s := web.NodeStatus{NodeID: v.cfg.NodeID, Mode: string(v.mode), StartedAt: v.started, APIAddr: v.api.lis.Addr().String(),
		Serving: m.Leader, NotServingReason: m.NotServingReason, Epoch: m.Epoch, StandbyState: string(m.StandbyState),
		LagSeconds: m.Lag.Seconds(), LogNextSeq: m.LogNextSeq, LogBatches: m.Log.Batches, LogRecords: m.Log.Records,
		LogBytes: m.Log.Bytes, LeaseRenewals: m.LeaseRenewals, LeaseRenewalFailures: m.LeaseRenewalFailures,
		Snapshots: m.Snapshots, SnapshotFailures: m.SnapshotFailures, LastSnapshotBytes: m.LastSnapshotBytes,
		StoreRequests: m.StoreRequests, ActiveURL: v.cfg.Web.ActiveURL, Now: time.Now(),
		Standbys: "standbys do not register with the active process; each standby's node page shows its own state and lag"}
	if id := v.processID.Load(); id != nil {
		s.ProcessID = *id
	}
	if !m.LastSnapshot.IsZero() {
		t := m.LastSnapshot
		s.LastSnapshot = &t
	}
	switch {
	case m.Leader:
		s.Role = "active"
	case strings.Contains(m.NotServingReason, "stepped down") || strings.Contains(m.NotServingReason, "step down"):
		s.Role = "holding off after a step down"
	case m.StandbyState == metrics.StandbyCold:
		s.Role = "cold standby"
	case m.StandbyState != metrics.StandbyNotStandby && m.StandbyState != "":
		s.Role = "hot standby (" + string(m.StandbyState) + ")"
	default:
		s.Role = "starting"
	}
	if v.cfg.Metrics.Listen != "" {
		scheme := "http"
		if v.cfg.Metrics.TLS.Enabled() {
			scheme = "https"
		}
		s.MetricsURL = scheme + "://" + hostForURL(v.cfg.Metrics.Listen) + "/metrics"
	}
	v.mu.Lock()
	s.Events = append([]web.NodeEvent{}, v.events...)
	v.mu.Unlock()
	s.Lease = v.readLease(ctx)
	return s
}

// readLease reads the lease record from the durable store.
func (v *webView) readLease(ctx context.Context) *web.LeaseStatus {
	b := v.blobs.Load()
	if b == nil {
		return &web.LeaseStatus{Error: "the durable store is not open yet"}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	data, _, err := (*b).Get(ctx, v.leaseKey)
	if err != nil {
		return &web.LeaseStatus{Error: "read " + v.leaseKey + ": " + err.Error()}
	}
	rec, err := lease.Decode(data)
	if err != nil {
		return &web.LeaseStatus{Error: "decode " + v.leaseKey + ": " + err.Error()}
	}
	return &web.LeaseStatus{Holder: rec.Holder, Epoch: rec.Epoch, RenewedAt: rec.RenewedAt, ExpiresAt: rec.ExpiresAt(), Released: rec.Released}
}

// hostForURL names a wildcard listen address as loopback.
func hostForURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// startWeb serves the UI on web.listen; it returns a stop function. An
// empty address serves nothing; dev's default address, when in use, only
// warns (config.Web.DevDefault).
func startWeb(ctx context.Context, v *webView, log *slog.Logger) (func(), error) {
	if v.cfg.Web.Listen == "" {
		return func() {}, nil
	}
	ui, err := web.New(web.Options{Node: v, Logger: log, ActiveURL: v.cfg.Web.ActiveURL})
	if err != nil {
		return nil, err
	}
	addr, stop, err := ui.Listen(ctx, v.cfg.Web.Listen)
	if err != nil {
		if v.cfg.Web.DevDefault {
			log.Warn("web UI not served: its default address is in use; set web.listen or --web-listen", "addr", v.cfg.Web.Listen, "err", err)
			return func() {}, nil
		}
		return nil, err
	}
	log.Info("web UI listening", "url", web.URL(addr))
	return stop, nil
}
