package node

import (
	"net"
	"sync"
	"time"
)

// phaseListener accepts on the process's API listener and hands each
// connection to the grpc.Server of the current phase: a standby's
// grpc.Server closes its connections after a few seconds (H5), the active
// one's does not. Each grpc.Server serves a phaseConns of its own; a
// connection stays with the grpc.Server that accepted it.
type phaseListener struct {
	base   net.Listener
	mu     sync.Mutex
	cur    *phaseConns
	closed chan struct{} // closed when base no longer accepts
}

// newPhaseListener starts accepting on base; the first phase's
// connections go to the returned phaseConns.
func newPhaseListener(base net.Listener, final bool) (*phaseListener, *phaseConns) {
	l := &phaseListener{base: base, closed: make(chan struct{})}
	first := l.newPhase(final)
	l.cur = first
	go l.run()
	return l, first
}

// newPhase returns the connections of a phase. Closing the final phase's
// closes the process's listener as well, as a grpc.Server's stop closes
// the listener it serves.
func (l *phaseListener) newPhase(final bool) *phaseConns {
	return &phaseConns{l: l, conns: make(chan net.Conn), done: make(chan struct{}), final: final}
}

// switchTo makes next the phase that receives new connections and returns
// the previous one.
func (l *phaseListener) switchTo(next *phaseConns) *phaseConns {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.cur
	l.cur = next
	return prev
}

func (l *phaseListener) run() {
	defer close(l.closed)
	var delay time.Duration
	for {
		c, err := l.base.Accept()
		if err != nil {
			// Temporary errors (out of file descriptors): back off as
			// grpc.Server.Serve does.
			if ne, ok := err.(interface{ Temporary() bool }); ok && ne.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return
		}
		delay = 0
		l.hand(c)
	}
}

// hand gives c to the current phase's grpc.Server; if that phase closes
// meanwhile, to the phase that replaced it, and closes c when none takes
// it.
func (l *phaseListener) hand(c net.Conn) {
	l.mu.Lock()
	q := l.cur
	l.mu.Unlock()
	for {
		select {
		case q.conns <- c:
			return
		case <-q.done:
		}
		l.mu.Lock()
		next := l.cur
		l.mu.Unlock()
		if next == q {
			_ = c.Close()
			return
		}
		q = next
	}
}

// phaseConns is the net.Listener one phase's grpc.Server serves.
type phaseConns struct {
	l     *phaseListener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	final bool
}

func (q *phaseConns) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	case <-q.l.closed:
		return nil, net.ErrClosed
	}
}

func (q *phaseConns) Close() error {
	q.once.Do(func() { close(q.done) })
	if q.final {
		return q.l.base.Close()
	}
	return nil
}

func (q *phaseConns) Addr() net.Addr { return q.l.base.Addr() }
