package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// process is a peer's server process.
type process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// startProcess starts name with args and env added to this process's
// environment, its output going to logFile.
func startProcess(name, logFile string, env []string, bin string, args ...string) (*process, error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so that a stop reaches its children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// alive reports an error when the process has exited.
func (p *process) alive() error {
	select {
	case <-p.exited:
		if p.err == nil {
			return fmt.Errorf("%s exited with status 0", p.name)
		}
		return fmt.Errorf("%s exited: %w", p.name, p.err)
	default:
		return nil
	}
}

// stop sends SIGTERM to the process group and waits up to timeout, then
// kills the group. Any exit after SIGTERM counts as a clean stop.
func (p *process) stop(timeout time.Duration) error {
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(timeout):
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.exited
	return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.name, timeout)
}

// freePort returns a loopback port free at the time of the call.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitFor calls try until it succeeds, p exits or timeout passes.
func waitFor(p *process, timeout time.Duration, what string, try func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := try()
		if err == nil {
			return nil
		}
		if perr := p.alive(); perr != nil {
			return fmt.Errorf("%s: %w", what, perr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s: %w", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tail returns the end of a log file, for error messages.
func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 2000 {
		_, _ = f.Seek(st.Size()-2000, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

var errNoBinary = errors.New("not installed; run bench/compare/install-peers.sh")
