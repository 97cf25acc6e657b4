package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/dexzd/dexzd/internal/config"
)

// DevOptions configures StartDev.
type DevOptions struct {
	// DataDir is the node's data directory (required).
	DataDir string
	// Config is the node's configuration; nil means the dev defaults.
	// Config.API.Listen is the address it listens on ("127.0.0.1:0" picks a
	// free port; Addr reports it).
	Config *config.Config
	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
}

// DevNode is a dev node running in this process: `dex-server-zd dev`
// without the process, for test helpers (dex/dextest) and tests. It runs
// RunLocal; nothing of the startup or the shutdown is specific to it.
type DevNode struct {
	addr    string
	cancel  context.CancelFunc
	abandon chan struct{}
	done    chan struct{} // closed when RunLocal returned
	err     error         // RunLocal's result, set before done is closed

	closeOnce, abandonOnce sync.Once
}

// StartDev starts a dev node and returns once it serves (or failed to
// start). ctx bounds the startup only: the node then runs until Close
// (graceful), Abandon (a crash) or a fatal stop (Done).
func StartDev(ctx context.Context, o DevOptions) (*DevNode, error) {
	if o.DataDir == "" {
		return nil, errors.New("start dev node: no data directory")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start dev node: %w", err)
	}
	cfg := o.Config
	if cfg == nil {
		var err error
		if cfg, err = config.Parse(nil, config.ModeDev); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(config.ModeDev); err != nil {
		return nil, fmt.Errorf("start dev node: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n := &DevNode{cancel: cancel, abandon: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan net.Addr, 1)
	go func() {
		defer close(n.done)
		n.err = RunLocal(runCtx, LocalOptions{Mode: config.ModeDev, Config: cfg, DataDir: o.DataDir, Logger: o.Logger,
			Ready: func(a net.Addr) { ready <- a }, Abandon: n.abandon})
	}()
	select {
	case a := <-ready:
		n.addr = a.String()
		return n, nil
	case <-n.done:
		cancel()
		return nil, fmt.Errorf("start dev node: %w", n.err)
	case <-ctx.Done():
		cancel() // RunLocal stops: during startup with an error, once serving gracefully
		<-n.done
		return nil, fmt.Errorf("start dev node: %w", ctx.Err())
	}
}

// Addr is the API address the node serves on ("127.0.0.1:41234").
func (n *DevNode) Addr() string { return n.addr }

// Done is closed when the node has stopped: after Close or Abandon, or on
// a fatal stop (lease lost, log write limit, fenced); Err then says why.
func (n *DevNode) Done() <-chan struct{} { return n.done }

// Err is RunLocal's result once Done is closed, nil before: nil after a
// graceful stop, ErrAbandoned after Abandon, else the fatal error.
func (n *DevNode) Err() error {
	select {
	case <-n.done:
		return n.err
	default:
		return nil
	}
}

// Close stops the node gracefully, as SIGTERM does (drain, flush, release
// the lease; K2, L12), waits for it and returns RunLocal's result: nil after a
// clean stop. On a node that already stopped it returns why it stopped.
func (n *DevNode) Close() error {
	n.closeOnce.Do(n.cancel)
	<-n.done
	return n.err
}

// Abandon ends the node the way a crash would: nothing is drained, flushed
// or released, so the next node on the same directory takes the lease over
// with the next epoch (D3) and recovers (T1-T5). It returns nil once the
// node is gone, or the error of a node that had stopped for another reason.
func (n *DevNode) Abandon() error {
	n.abandonOnce.Do(func() { close(n.abandon) })
	<-n.done
	n.cancel() // releases the run context; RunLocal has returned
	if errors.Is(n.err, ErrAbandoned) {
		return nil
	}
	return n.err
}
