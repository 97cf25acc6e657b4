package node

// What every mode shares: the API surface a process opens before it holds
// the lease, the metrics listener, and one lease period from the acquired
// lease to the end of serving (open the local store, replay and fence,
// writer under Supervise, Recover, serve, stop). dev and local (Run) and
// serve (Serve) differ only in how they get the durable store and the
// lease.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/wal"
)

// apiSurface is the gRPC surface of a process: open (answering UNAVAILABLE
// and NOT_SERVING) from before the lease is held until the process stops.
//
// Each phase of the process has a grpc.Server of its own, with the same
// handlers (srv) and gate: while the process is a standby, the connections
// it accepts are served by one created with server.StandbyGRPCOptions,
// which closes each after server.StandbyConnectionAge (GOAWAY), so a
// client that reached a standby reconnects and reaches the active process
// (H5); from activate on, new connections go to one without that limit.
// A connection stays with the grpc.Server that accepted it.
type apiSurface struct {
	srv *server.Server
	// g is the grpc.Server of the current phase.
	g *grpc.Server
	// lis is the process's API listener.
	lis    net.Listener
	phases *phaseListener
	// standby is the standby phase's grpc.Server (nil when the process
	// started without one); after activate it only serves the
	// connections it accepted, until they age out.
	standby      *grpc.Server
	standbyConns *phaseConns
}

// startAPI reads the admin credential, creates the server and serves it on
// lis (nil: listen on api.listen). With standby, the process starts as a
// standby (activate ends that phase); else it starts active, as dev and
// local do.
func startAPI(cfg *config.Config, log *slog.Logger, lis net.Listener, standby bool) (*apiSurface, error) {
	var cred string
	if cfg.Admin.CredentialFile != "" {
		raw, err := os.ReadFile(cfg.Admin.CredentialFile)
		if err != nil {
			return nil, fmt.Errorf("admin.credentialFile: %w", err)
		}
		cred = strings.TrimSpace(string(raw))
	}
	srv := server.New(server.Options{NodeID: cfg.NodeID, MaxPayloadBytes: cfg.Limits.MaxPayloadBytes,
		WaitForFlowMax: cfg.Limits.WaitForFlowMax, Logger: log, AdminCredential: cred})
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", cfg.API.Listen); err != nil {
			return nil, fmt.Errorf("api.listen: %w", err)
		}
	}
	phases, first := newPhaseListener(lis, !standby)
	a := &apiSurface{srv: srv, lis: lis, phases: phases}
	opts := srv.GRPCOptions()
	if standby {
		opts = srv.StandbyGRPCOptions()
	}
	a.g = grpc.NewServer(opts...)
	srv.Register(a.g)
	if standby {
		a.standby, a.standbyConns = a.g, first
	}
	go func(g *grpc.Server) { _ = g.Serve(first) }(a.g)
	return a, nil
}

// activate ends the standby phase: new connections go to a grpc.Server
// without the standby's connection age limit, which becomes g. The
// standby's grpc.Server keeps the connections it accepted until they age
// out. Without a standby phase it does nothing.
func (a *apiSurface) activate() {
	if a.standby == nil || a.g != a.standby {
		return
	}
	conns := a.phases.newPhase(true)
	g := grpc.NewServer(a.srv.GRPCOptions()...)
	a.srv.Register(g)
	go func() { _ = g.Serve(conns) }()
	a.g = g
	a.phases.switchTo(conns)
	_ = a.standbyConns.Close() // ends the standby's accept loop only
}

// stop ends the streams and closes every connection at once.
func (a *apiSurface) stop() {
	a.srv.Close()
	a.g.Stop()
	if a.standby != nil && a.standby != a.g {
		a.standby.Stop()
	}
	// A standby phase's listener leaves the process's listener open.
	_ = a.lis.Close()
}

// startMetrics serves m on metrics.listen; it returns a stop function. An
// empty address serves nothing.
func startMetrics(addr string, m *Metrics, log *slog.Logger) (func(), error) {
	if addr == "" || m == nil {
		return func() {}, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen: %w", err)
	}
	hs := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(lis) }()
	log.Info("metrics listening", "addr", lis.Addr().String())
	return func() { _ = hs.Close() }, nil
}

// leasePeriod is one period of holding the lease, with everything the
// process set up before it acquired it.
type leasePeriod struct {
	cfg    *config.Config
	log    *slog.Logger
	blobs  blob.Store
	layout wal.Layout
	api    *apiSurface
	holder *lease.Holder
	// stateDir is the local store's directory; open opens it.
	stateDir string
	open     func(dir string) (Store, error)
	ready    func(net.Addr)
	abandon  <-chan struct{}
	metrics  *Metrics
}

// run serves the period: open the local store, replay the log from its
// applied position and write the fence (T1, G2), start the writer under
// Supervise, Recover (T2-T5), open the gate, then serve until ctx ends (the
// graceful stop: drain, flush, release; K2, L12), a fatal stop (lease lost,
// log write limit, fenced: that error; L7, L9, L10, G4) or abandon
// (ErrAbandoned: nothing drained, flushed or released, like a crash).
//
// A failure before the gate opens releases the lease, so that another
// process can take over at once, and returns the error (S9; the process
// exits 1).
func (p *leasePeriod) run(ctx context.Context) (err error) {
	log := p.log.With("epoch", p.holder.Epoch())
	p.metrics.setEpoch(p.holder.Epoch())
	p.metrics.setStandbyState(StandbyNotStandby)
	serving := false
	defer func() {
		if err != nil && !serving && !errors.Is(err, ErrAbandoned) {
			p.releaseAfterFailure(log, err)
		}
	}()

	store, err := p.open(p.stateDir)
	if err != nil {
		return fmt.Errorf("open local store %s: %w", p.stateDir, err)
	}
	defer func() { _ = store.Close() }()
	var from uint64
	if seq, ok := store.Applied(); ok {
		from = seq + 1
	}
	next, err := wal.Fence(ctx, p.blobs, p.layout, p.holder.Epoch(), from, ReplayApply(store))
	if err != nil {
		return fmt.Errorf("replay and fence the log: %w", err)
	}
	log.Info("log replayed and fenced", "from", from, "fence", next-1)

	srv := p.api.srv
	maxBatch := 2*srv.MaxMessageBytes() + (1 << 20)
	core := NewCore(CoreConfig{
		NodeID: p.cfg.NodeID, ProcessID: p.holder.ProcessID(), Epoch: p.holder.Epoch(), Store: store,
		Engine: engine.New(engine.Config{MaxPayloadBytes: p.cfg.Limits.MaxPayloadBytes}),
		Lease:  p.holder, Logger: log, MaxRecordBytes: maxBatch - 8,
	})
	w, err := wal.NewWriter(wal.WriterConfig{Store: p.blobs, Layout: p.layout, Epoch: p.holder.Epoch(), NextSeq: next,
		OnDurable: core.OnDurable, MaxBatchBytes: maxBatch, Logger: log})
	if err != nil {
		return err
	}
	core.SetWriter(w)
	p.metrics.setWriter(w)
	defer p.metrics.endWriter(w)
	supCtx, cancelSup := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSup()
	supDone := make(chan error, 1)
	go func() { supDone <- Supervise(supCtx, p.holder, w) }()
	core.Start(supCtx)
	if err := core.Recover(ctx); err != nil {
		core.Stop()
		_ = w.Stop()
		if serr := <-supDone; serr != nil {
			log.Error("supervise", "err", serr)
		}
		return err
	}
	serving = true
	srv.SetBackend(core)
	p.metrics.setActive(core)
	defer p.metrics.setActive(nil)
	addr := p.api.lis.Addr()
	log.Info("serving", "addr", addr.String())
	if p.ready != nil {
		p.ready(addr)
	}

	select {
	case <-ctx.Done():
		return shutdown(log, p.cfg, srv, p.api.g, core, w, p.holder, supDone)
	case err := <-supDone:
		// Refuse at once (the gate is closed: UNAVAILABLE, NOT_SERVING;
		// L15), end the streams, and let the calls already read get that
		// answer before the connections close.
		core.Fail(err)
		srv.Close()
		core.Stop()
		stopGRPC(p.api.g, time.Second)
		return err
	case <-p.abandon:
		srv.Close()
		p.api.g.Stop()
		core.Stop()
		cancelSup() // aborts the writer and stops renewing: like a crash
		if err := <-supDone; err != nil {
			log.Info("abandoned", "err", err)
		}
		return ErrAbandoned
	}
}

// stopGRPC stops g gracefully (calls in progress finish, new ones are
// refused), and at once after timeout.
func stopGRPC(g *grpc.Server, timeout time.Duration) {
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(timeout):
		g.Stop()
	}
}

// releaseAfterFailure gives the lease up after a failure before serving
// (S9). A lease already lost or fenced stays with its new holder.
func (p *leasePeriod) releaseAfterFailure(log *slog.Logger, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.holder.Release(ctx); err != nil {
		log.Warn("lease not released after a failed takeover", "err", err, "cause", cause)
		return
	}
	log.Info("lease released after a failed takeover", "cause", cause)
}
