package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
)

// The worker runs in a process of its own, so that the test can SIGKILL it
// as a host or an OOM killer would: the test binary started again with
// these variables set runs the Go SDK's worker for the workload's flows
// instead of the tests (TestMain), and appends every execution to the
// file named.
const (
	envWorkerAddrs = "DEX_CHAOS_WORKER_ADDRS"
	envWorkerLog   = "DEX_CHAOS_WORKER_EXECUTIONS"
)

// runWorkerProcess is the worker process's main; it returns its exit
// status.
func runWorkerProcess() int {
	f, err := os.OpenFile(os.Getenv(envWorkerLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	execLog = f
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: strings.Split(os.Getenv(envWorkerAddrs), ","),
		MaxConcurrentTasks: 32, Logger: quietLogger(), ReconnectBackoff: fastBackoff, DrainTimeout: time.Second},
		chainFlow, timerFlow)
	if err == nil {
		err = w.Run(ctx)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A workerProc supervises the worker process: it starts it, and starts it
// again after the test killed it.
type workerProc struct {
	addrs   []string
	execLog string
	logFile string
	tl      *timeline

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	starts int
}

func newWorkerProc(t *testing.T, addrs []string, tl *timeline) *workerProc {
	t.Helper()
	dir := t.TempDir()
	wp := &workerProc{addrs: addrs, execLog: dir + "/executions", logFile: dir + "/worker.log", tl: tl}
	wp.start(t)
	t.Cleanup(func() { wp.kill() })
	return wp
}

// start starts the worker process.
func (wp *workerProc) start(t *testing.T) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(wp.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envWorkerAddrs+"="+strings.Join(wp.addrs, ","), envWorkerLog+"="+wp.execLog)
	cmd.Stdout, cmd.Stderr = f, f
	// It dies with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatalf("start the worker process: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = f.Close(); close(done) }()
	wp.mu.Lock()
	wp.cmd, wp.done = cmd, done
	wp.starts++
	wp.mu.Unlock()
	wp.tl.addf("worker: started pid %d", cmd.Process.Pid)
}

// kill SIGKILLs the worker process and waits for it to end.
func (wp *workerProc) kill() {
	wp.mu.Lock()
	cmd, done := wp.cmd, wp.done
	wp.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	wp.tl.addf("worker: SIGKILL to pid %d", cmd.Process.Pid)
	_ = cmd.Process.Kill()
	<-done
}

// exitedEarly reports how the worker process ended if it ended without the
// test killing it.
func (wp *workerProc) exitedEarly() string {
	wp.mu.Lock()
	cmd, done := wp.cmd, wp.done
	wp.mu.Unlock()
	select {
	case <-done:
	default:
		return ""
	}
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() && st.Signal() == syscall.SIGKILL {
		return ""
	}
	return fmt.Sprintf("the worker process exited %v: %s", cmd.ProcessState, tail(wp.logFile))
}
