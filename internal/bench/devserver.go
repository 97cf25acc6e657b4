package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BuildServer builds cmd/dex-server-zd of the module the working directory
// belongs to (found with "go env GOMOD") into out. It needs the Go
// toolchain and the source tree: it is for tests and benchmark harnesses
// run from a checkout.
func BuildServer(ctx context.Context, out string) error {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("find the module: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(gomod))
	if mod == "" || mod == "/dev/null" {
		return errors.New("find the module: not inside the dexzd module")
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/dex-server-zd")
	cmd.Dir = filepath.Dir(mod)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/dex-server-zd: %w\n%s", err, b)
	}
	return nil
}

// DevOptions configure StartDevServer.
type DevOptions struct {
	// Binary is the dex-server-zd executable (BuildServer makes one).
	Binary string
	// DataDir is the data directory; it should be empty or from an earlier
	// dev run.
	DataDir string
	// Durability is passed as --durability when set: strict,
	// processCrashSafe or relaxed.
	Durability string
	// Metrics, when set, has the server serve /metrics on a free loopback
	// port (DevServer.MetricsURL), with a configuration file written into
	// DataDir.
	Metrics bool
	// Config, when set, is more of the configuration file (YAML top-level
	// keys other than metrics), for example "limits:\n  maxQueuedTasks: 50\n".
	Config string
	// ReadyTimeout bounds the wait for dex.FlowService SERVING; default
	// 30 s.
	ReadyTimeout time.Duration
}

// DevServer is a running dex-server-zd process: "dev" (StartDevServer) or
// "serve" (StartServe).
type DevServer struct {
	// Addr is the API address it listens on.
	Addr string
	// MetricsURL is its Prometheus endpoint, empty when it serves none.
	MetricsURL string

	cmd    *exec.Cmd
	log    *lockedBuffer
	exited chan struct{}
	err    error // the result of Wait, once exited is closed
}

// StartDevServer starts "dex-server-zd dev" on a free loopback port and
// returns once it reports dex.FlowService SERVING. On an error the process
// is killed. Stop or Kill it when done.
func StartDevServer(ctx context.Context, opts DevOptions) (*DevServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"dev", "--data-dir", opts.DataDir, "--listen", addr}
	if opts.Durability != "" {
		args = append(args, "--durability", opts.Durability)
	}
	var metricsURL string
	conf := opts.Config
	if opts.Metrics {
		maddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		conf += "metrics:\n  listen: " + strconv.Quote(maddr) + "\n"
		metricsURL = "http://" + maddr + "/metrics"
	}
	if conf != "" {
		if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("make the data directory: %w", err)
		}
		path := filepath.Join(opts.DataDir, "bench-dev.yaml")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return nil, fmt.Errorf("write the configuration: %w", err)
		}
		args = append(args, "--config", path)
	}
	return startServer(ctx, opts.Binary, args, addr, metricsURL, opts.ReadyTimeout)
}

// startServer starts binary with args, which make it serve the API on
// addr, and waits until it reports dex.FlowService SERVING.
func startServer(ctx context.Context, binary string, args []string, addr, metricsURL string, readyTimeout time.Duration) (*DevServer, error) {
	if readyTimeout <= 0 {
		readyTimeout = 30 * time.Second
	}
	s := &DevServer{Addr: addr, MetricsURL: metricsURL, cmd: exec.Command(binary, args...), log: &lockedBuffer{}, exited: make(chan struct{})}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	readyCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// An early exit ends the wait at once.
		select {
		case <-s.exited:
			cancel()
		case <-readyCtx.Done():
		}
	}()
	if err := waitServing(readyCtx, []string{addr}, nil, readyTimeout); err != nil {
		s.Kill()
		return nil, fmt.Errorf("dex-server-zd %s did not become ready (%s): %w\n%s", args[0], s.cmd.ProcessState, err, s.Log())
	}
	return s, nil
}

// PID is the process ID.
func (s *DevServer) PID() int { return s.cmd.Process.Pid }

// Log is what the process wrote to stdout and stderr so far.
func (s *DevServer) Log() string { return s.log.String() }

// Stop sends SIGTERM and waits up to timeout for the process to exit. It
// returns an error unless the process exited with status 0; after the
// timeout it kills the process.
func (s *DevServer) Stop(timeout time.Duration) error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal dex-server-zd: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-t.C:
		s.Kill()
		return fmt.Errorf("dex-server-zd did not exit within %s of SIGTERM; killed", timeout)
	}
	if s.err != nil {
		return fmt.Errorf("dex-server-zd exited after SIGTERM: %w", s.err)
	}
	return nil
}

// Kill kills the process and waits for it. It is safe to call after Stop.
func (s *DevServer) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// freeAddr returns a loopback address with a port free at the time of the
// call.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	return addr, nil
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
