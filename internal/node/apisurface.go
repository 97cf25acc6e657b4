package node

// The API surface a process opens before it holds the lease, its phases
// (standby, serving instance, hold-off, ...), and the metrics listener:
// what dev and local (RunLocal) and serve (RunServe) share before and around a
// lease period (leaseperiod.go).

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/server"
)

// apiSurface is the gRPC surface of a process: open (answering UNAVAILABLE
// and NOT_SERVING) from before the lease is held until the process stops.
//
// The process goes through phases: standby, serving instance, hold-off
// after a step down, serving instance again after a take-back, and so on.
// Each phase has an apiPhase of its own: a server.Server (the handlers and
// their gate) and a grpc.Server. A phaseListener hands each connection the
// process accepts to the current phase, and a connection stays with the
// phase that accepted it. So every answer on a connection comes from one
// gate: a connection opened to a serving instance that stepped down keeps
// answering NOT_SERVING and "stepped down" after a take-back has started a
// new instance (H6), and a step down that reaches a standby's connection
// of a process that has just taken over finds no serving instance there
// (A6). A standby phase's grpc.Server closes each connection after
// server.StandbyConnectionAge (GOAWAY), so that a client that reached it
// reconnects and reaches the active process (H5); a retired serving
// instance's connections get the same GOAWAY after that age. When a
// serving instance opens its gate, the connections of the standby phases
// before it are ended at once (endStandbyPhases), so that their clients
// reconnect to it.
type apiSurface struct {
	opts server.Options
	// lis is the process's API listener.
	lis    net.Listener
	phases *phaseListener

	mu  sync.Mutex
	cur *apiPhase
	all []*apiPhase
	// stopping is closed when stop begins.
	stopping chan struct{}
}

// apiPhase is the API of one phase of the process.
type apiPhase struct {
	srv     *server.Server
	g       *grpc.Server
	standby bool
	// claimed is set once a lease period serves in the phase.
	claimed bool
	// ended is set once a standby phase's connections were closed because
	// a later serving instance serves (endStandbyPhases).
	ended bool
}

// startAPI reads the TLS files, the admin credential and the tokens and serves the first phase on lis
// (nil: listen on api.listen): a standby phase with standby, else a
// serving instance, as dev and local start.
//
// tp, when set, traces the API calls (server.Options.TracerProvider).
func startAPI(cfg *config.Config, mode config.Mode, log *slog.Logger, lis net.Listener, standby bool, tp trace.TracerProvider) (*apiSurface, error) {
	opts := server.Options{NodeID: cfg.NodeID, MaxPayloadBytes: cfg.Limits.MaxPayloadBytes,
		MaxRequestBytes: cfg.Limits.MaxRequestBytes, MaxFlowAttributeBytes: cfg.Limits.MaxFlowAttributeBytes,
		WaitForFlowMax: cfg.Limits.WaitForFlowMax, Logger: log,
		MaxConcurrentStreams: cfg.Limits.MaxConcurrentStreams, NoReflection: !cfg.API.Reflection,
		TracerProvider: tp}
	// TLS, the admin credential, tokens and roles (security.go).
	if err := apiSecurity(cfg, mode, log, &opts); err != nil {
		return nil, err
	}
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", cfg.API.Listen); err != nil {
			return nil, fmt.Errorf("api.listen: %w", err)
		}
	}
	lis = apiListener(lis, opts)
	phases, first := newPhaseListener(lis, false)
	a := &apiSurface{opts: opts, lis: lis, phases: phases, stopping: make(chan struct{})}
	a.cur = a.serve(first, standby)
	return a, nil
}

// serve starts a phase's server.Server and grpc.Server on conns.
func (a *apiSurface) serve(conns *phaseConns, standby bool) *apiPhase {
	srv := server.New(a.opts)
	opts := srv.GRPCOptions()
	if standby {
		opts = srv.StandbyGRPCOptions()
	}
	ph := &apiPhase{srv: srv, g: grpc.NewServer(opts...), standby: standby}
	srv.Register(ph.g)
	go func() { _ = ph.g.Serve(conns) }()
	a.mu.Lock()
	a.all = append(a.all, ph)
	a.mu.Unlock()
	return ph
}

// current returns the current phase.
func (a *apiSurface) current() *apiPhase {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur
}

// enter starts a new phase (a standby one, or a serving instance) and
// sends new connections to it. The previous phase's grpc.Server keeps the
// connections it accepted.
func (a *apiSurface) enter(standby bool) *apiPhase {
	conns := a.phases.newPhase(false)
	ph := a.serve(conns, standby)
	prev := a.phases.switchTo(conns)
	_ = prev.Close() // ends the previous phase's accept loop only
	a.mu.Lock()
	a.cur = ph
	a.mu.Unlock()
	return ph
}

// serving returns the phase a lease period serves in: the current one if
// it is a serving instance not yet used (dev and local start in one),
// else a new serving instance.
func (a *apiSurface) serving() *apiPhase {
	a.mu.Lock()
	ph := a.cur
	fresh := !ph.standby && !ph.claimed
	ph.claimed = true
	a.mu.Unlock()
	if fresh {
		return ph
	}
	ph = a.enter(false)
	a.mu.Lock()
	ph.claimed = true
	a.mu.Unlock()
	return ph
}

// endStandbyPhases closes the connections of every earlier standby phase
// (a standby, a hold-off after a step down) at once: their long-lived
// streams end now, each connection gets GOAWAY, and calls in flight on
// them run to their end for up to server.StandbyConnectionAgeGrace. The
// lease period calls it as its serving instance's gate opens, so that a
// client whose connection the process accepted as a standby reconnects
// straight to the serving instance instead of being refused as by a
// standby until the connection's age (H5) ends it. A reconnection reaches
// the current phase, never the ended one, and a retired serving
// instance's connections are left alone: they keep their own closed gate
// (H6) until their own GOAWAY.
func (a *apiSurface) endStandbyPhases() {
	a.mu.Lock()
	var end []*apiPhase
	for _, ph := range a.all {
		if ph.standby && !ph.ended && ph != a.cur {
			ph.ended = true
			end = append(end, ph)
		}
	}
	a.mu.Unlock()
	for _, ph := range end {
		ph.srv.Close()
		go stopGRPC(ph.g, server.StandbyConnectionAgeGrace)
	}
}

// retire ends a serving instance that stopped serving without stopping
// the process (a step down): its long-lived streams end now; its
// connections get GOAWAY after server.StandbyConnectionAge, and calls in
// flight on them (the step down itself) run to their end. Until then its
// gate answers as a stepped-down instance does (H6).
func (ph *apiPhase) retire(stopping <-chan struct{}) {
	ph.srv.Close()
	go func() {
		t := time.NewTimer(server.StandbyConnectionAge)
		defer t.Stop()
		select {
		case <-t.C:
			ph.g.GracefulStop()
		case <-stopping:
		}
	}()
}

// stop ends the streams, lets the calls in flight finish for up to a
// second (a step down's answer on its way out, for example) and closes
// every connection.
func (a *apiSurface) stop() {
	a.mu.Lock()
	all := a.all
	a.mu.Unlock()
	close(a.stopping)
	var wg sync.WaitGroup
	for _, ph := range all {
		ph.srv.Close()
		wg.Go(func() { stopGRPC(ph.g, time.Second) })
	}
	wg.Wait()
	_ = a.lis.Close()
}

// startMetrics serves m on metrics.listen, with metrics.tls and
// metrics.tokensFile (security.go); it returns a stop function. An empty
// address serves nothing.
func startMetrics(mc config.Metrics, m *metrics.Metrics, log *slog.Logger) (func(), error) {
	if mc.Listen == "" || m == nil {
		return func() {}, nil
	}
	h, ts, err := metricsSecurity(mc, m.Handler(), log)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", mc.Listen)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen: %w", err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		// Failed handshakes (a plaintext probe of a TLS listener) are
		// the client's problem: debug lines, not stderr.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	if ts != nil {
		lis = tls.NewListener(lis, ts.Config("h2", "http/1.1"))
	}
	go func() { _ = hs.Serve(lis) }()
	log.Info("metrics listening", "addr", lis.Addr().String(), "tls", ts != nil, "tokens", mc.TokensFile != "")
	return func() { _ = hs.Close() }, nil
}
