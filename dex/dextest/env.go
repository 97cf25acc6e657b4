package dextest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/node"
)

// Timings of an Env.
const (
	// startTimeout bounds starting (and restarting) the server.
	startTimeout = 30 * time.Second
	// workerDrain is the worker's DrainTimeout: how long a stop waits for
	// running tasks.
	workerDrain = 5 * time.Second
	// stopTimeout bounds waiting for the worker to stop.
	stopTimeout = 20 * time.Second
	// leakTimeout bounds waiting for stopped components' goroutines to end.
	leakTimeout = 5 * time.Second
	// serverDrain is the server's lifecycle.attemptDrainTimeout.
	serverDrain = 2 * time.Second
)

// Option configures an Env.
type Option func(*options)

type options struct {
	logs     bool
	maxTasks int
	codec    dex.Codec
}

// WithLogs sends the logs of the server, the worker and the client to the
// test's output (t.Output; standard error for New). By default they are
// discarded.
func WithLogs() Option { return func(o *options) { o.logs = true } }

// WithMaxConcurrentTasks sets the worker's MaxConcurrentTasks: 1 runs one
// task at a time; n <= 0 keeps the default, 10.
func WithMaxConcurrentTasks(n int) Option { return func(o *options) { o.maxTasks = n } }

// WithCodec sets the payload codec of the worker and the client
// (dex.WorkerOptions.Codec, dex.ClientOptions.Codec), for example the
// application's dex.AESGCMCodec: the flows then run with their values
// encoded as in production.
func WithCodec(c dex.Codec) Option { return func(o *options) { o.codec = c } }

// Env is a running server, a worker serving the flows and a client
// connected to it.
type Env struct {
	t      testing.TB // nil for New
	dir    string
	ownDir bool // New created dir; Close removes it
	sink   *logSink
	log    *slog.Logger
	fail   func(error) // reports a component that stopped by itself

	client     *dex.Client
	stopWorker context.CancelFunc
	workerDone chan error
	monitors   sync.WaitGroup // goroutines watching the worker and the servers

	life sync.Mutex // serializes Restart and Close

	mu       sync.Mutex
	node     *node.DevNode // nil while restarting
	addr     string
	closing  bool
	failures []error // New only: Close returns them

	closeOnce sync.Once
	closeErr  error
}

// Start starts a server on t.TempDir(), a worker serving flows and a
// client, and stops them when the test ends (see the package
// documentation). It returns once the worker is connected and its flow
// types are declared (dex.Worker.Connected), so the test's first flow gets
// the declared start step and options. It fails the test when they cannot
// start.
func Start(t testing.TB, flows ...*dex.Flow) *Env {
	t.Helper()
	return StartWith(t, flows)
}

// StartWith is Start with options:
//
//	env := dextest.StartWith(t, flows.All(), dextest.WithLogs())
func StartWith(t testing.TB, flows []*dex.Flow, opts ...Option) *Env {
	t.Helper()
	before := goroutines()
	running.Add(1)
	sink := &logSink{w: t.Output()}
	e := &Env{t: t, dir: t.TempDir(), sink: sink, fail: func(err error) { t.Errorf("dextest: %v", err) }}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := e.start(ctx, flows, opts); err != nil {
		_ = e.Close()
		running.Add(-1)
		t.Fatalf("dextest: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("dextest: %v", err)
		}
		if running.Add(-1) > 0 {
			return // another Env runs: its goroutines cannot be told apart
		}
		if left := waitLeaks(before, leakTimeout); len(left) > 0 {
			t.Errorf("dextest: %d goroutines left running after the Env stopped (started by the Env, by goroutines "+
				"the test started, or by another Env that stopped meanwhile):\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
	})
	return e
}

// New starts an Env outside a test: in TestMain, an example or a program.
// ctx bounds the startup. The server runs on a new temporary directory that
// Close removes; Close stops everything and must be called.
func New(ctx context.Context, flows []*dex.Flow, opts ...Option) (*Env, error) {
	dir, err := os.MkdirTemp("", "dextest-")
	if err != nil {
		return nil, fmt.Errorf("dextest: %w", err)
	}
	running.Add(1)
	e := &Env{dir: dir, ownDir: true, sink: &logSink{w: os.Stderr}}
	e.fail = func(err error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.failures = append(e.failures, err)
	}
	if err := e.start(ctx, flows, opts); err != nil {
		_ = e.Close()
		return nil, fmt.Errorf("dextest: %w", err)
	}
	return e, nil
}

// start starts the server, the client and the worker.
func (e *Env) start(ctx context.Context, flows []*dex.Flow, opts []Option) error {
	o := options{maxTasks: 10}
	for _, opt := range opts {
		opt(&o)
	}
	e.log = slog.New(slog.DiscardHandler)
	if o.logs {
		e.log = slog.New(slog.NewTextHandler(e.sink, nil))
	}
	if err := e.startNode(ctx, "127.0.0.1:0"); err != nil {
		return err
	}
	// A restarted server listens on the same address; these dial options
	// make the connections notice it quickly (gRPC's default first
	// reconnect delay is 1 s).
	dial := []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
		MinConnectTimeout: 5 * time.Second,
	})}
	quick := dex.Backoff{Initial: 10 * time.Millisecond, Max: 200 * time.Millisecond}
	w, err := dex.NewWorker(dex.WorkerOptions{
		Addresses: []string{e.addr}, WorkerID: "dextest", MaxConcurrentTasks: o.maxTasks,
		Logger: e.log.With("component", "worker"), DialOptions: dial, DrainTimeout: workerDrain, ReconnectBackoff: quick,
		Codec: o.codec,
	}, flows...)
	if err != nil {
		return err
	}
	e.client, err = dex.NewClient(dex.ClientOptions{
		Addresses: []string{e.addr}, Logger: e.log.With("component", "client"), DialOptions: dial, RetryBackoff: quick,
		Codec: o.codec,
	})
	if err != nil {
		return err
	}
	wctx, stop := context.WithCancel(context.Background())
	e.stopWorker = stop
	e.workerDone = make(chan error, 1)
	e.monitors.Add(1)
	go func() {
		defer e.monitors.Done()
		err := w.Run(wctx)
		if err != nil && !e.isClosing() {
			e.fail(fmt.Errorf("the worker stopped: %w", err))
			err = nil // reported
		}
		e.workerDone <- err
	}()
	// Return once the worker is connected and its declarations are
	// registered: a test's first flow then gets the declared options.
	select {
	case <-w.Connected():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the worker did not connect: %w", ctx.Err())
	case err := <-e.workerDone:
		e.workerDone <- err
		return fmt.Errorf("the worker stopped before it connected: %w", err)
	}
}

// startNode starts a server on the directory, listening on listen.
func (e *Env) startNode(ctx context.Context, listen string) error {
	cfg, err := config.Parse(nil, config.ModeDev)
	if err != nil {
		return err
	}
	cfg.API.Listen = listen
	cfg.Dev.DurabilityMode = config.DurabilityProcessCrashSafe
	cfg.Lifecycle.AttemptDrainTimeout = serverDrain
	n, err := node.StartDev(ctx, node.DevOptions{DataDir: e.dir, Config: cfg, Logger: e.log.With("component", "server")})
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.node, e.addr = n, n.Addr()
	e.mu.Unlock()
	e.monitors.Add(1)
	go func() {
		defer e.monitors.Done()
		<-n.Done()
		e.mu.Lock()
		unexpected := e.node == n && !e.closing
		e.mu.Unlock()
		if unexpected {
			e.fail(fmt.Errorf("the server stopped: %w", n.Err()))
		}
	}()
	return nil
}

func (e *Env) isClosing() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closing
}

// Client returns the client connected to the server. It stays usable
// across Restart: calls that may be repeated are retried while the server
// restarts. Close closes it; do not close it yourself.
func (e *Env) Client() *dex.Client { return e.client }

// Addr returns the server's API address ("127.0.0.1:41234"), for clients
// or workers of your own. It does not change on Restart.
func (e *Env) Addr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addr
}

// Restart crashes the server and starts a new one on the same directory and
// address, to test that flows survive a crash: nothing is drained, flushed
// or released, so the new server takes the lease over with the next epoch
// and recovers. Attempts that were running on the worker fail (with kind
// NOT_COMPLETED, which consumes a retry) and run again; timers that came
// due fire. The worker and the client reconnect by themselves. Restart
// returns once the new server serves. On failure it fails the test (Start)
// or panics (New); call it from the test's goroutine.
func (e *Env) Restart() {
	if e.t != nil {
		e.t.Helper()
	}
	if err := e.restart(); err != nil {
		if e.t != nil {
			e.t.Fatalf("dextest: restart: %v", err)
		}
		panic(fmt.Sprintf("dextest: restart: %v", err))
	}
}

func (e *Env) restart() error {
	e.life.Lock()
	defer e.life.Unlock()
	e.mu.Lock()
	old, addr, closing := e.node, e.addr, e.closing
	e.node = nil // the monitor of old stays quiet
	e.mu.Unlock()
	if closing {
		return errors.New("the Env is stopped")
	}
	if old == nil {
		return errors.New("no server is running (an earlier restart failed)")
	}
	if err := old.Abandon(); err != nil {
		return fmt.Errorf("crash the server: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return e.startNode(ctx, addr)
}

// Close stops the worker (it drains running tasks), closes the client and
// stops the server gracefully. It returns what went wrong, including a
// server or worker that stopped by itself earlier. Start's cleanup calls
// it; call it yourself only for an Env from New. Later calls return the
// first call's result.
func (e *Env) Close() error {
	e.closeOnce.Do(func() {
		e.life.Lock()
		defer e.life.Unlock()
		e.mu.Lock()
		e.closing = true
		n := e.node
		e.mu.Unlock()

		var errs []error
		if e.stopWorker != nil {
			e.stopWorker()
			select {
			case err := <-e.workerDone:
				if err != nil {
					errs = append(errs, fmt.Errorf("worker: %w", err))
				}
			case <-time.After(stopTimeout):
				errs = append(errs, fmt.Errorf("the worker did not stop within %v", stopTimeout))
			}
		}
		if e.client != nil {
			if err := e.client.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close the client: %w", err))
			}
		}
		if n != nil {
			if err := n.Close(); err != nil {
				errs = append(errs, fmt.Errorf("stop the server: %w", err))
			}
		}
		e.monitors.Wait()
		e.sink.close()
		if e.ownDir {
			if err := os.RemoveAll(e.dir); err != nil {
				errs = append(errs, err)
			}
			running.Add(-1) // Start's cleanup counts its own Env
		}
		e.mu.Lock()
		errs = append(errs, e.failures...)
		e.mu.Unlock()
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

// logSink writes logs until the Env stops; a test's output must not be
// written after the test ends.
type logSink struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return len(p), nil
	}
	return s.w.Write(p)
}

func (s *logSink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
}
