package server

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// ErrPlaintextMessage is what a plaintext client of a TLS listener is
// told, as UNAUTHENTICATED on every call.
const ErrPlaintextMessage = "this server requires TLS and the client connected in plaintext: " +
	"connect with TLS (dexcli --tls-ca FILE, or --tls for the system's CAs; dex.ClientOptions.TLS)"

// sniffTimeout bounds how long a new connection may take to send its
// first byte before it is closed.
const sniffTimeout = 10 * time.Second

// RefusePlaintext wraps a TLS listener: connections whose first byte
// opens a TLS handshake are accepted as they are; any other connection
// (a plaintext gRPC client) is served by a grpc.Server of its own that
// answers every call with UNAUTHENTICATED and ErrPlaintextMessage, so the
// client learns why instead of seeing its connection reset. Closing the
// returned listener closes lis and that server.
func RefusePlaintext(lis net.Listener) net.Listener {
	r := &sniffListener{base: lis, tlsConns: make(chan net.Conn), done: make(chan struct{}),
		plain: &chanListener{conns: make(chan net.Conn), done: make(chan struct{}), addr: lis.Addr()}}
	r.refuser = grpc.NewServer(
		grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
			return status.Error(codes.Unauthenticated, ErrPlaintextMessage)
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 30 * time.Second, MaxConnectionAgeGrace: time.Second}),
	)
	go func() { _ = r.refuser.Serve(r.plain) }()
	go r.run()
	return r
}

type sniffListener struct {
	base     net.Listener
	tlsConns chan net.Conn
	plain    *chanListener
	refuser  *grpc.Server
	done     chan struct{} // closed when base no longer accepts
	once     sync.Once
	err      error
}

func (r *sniffListener) run() {
	defer close(r.done)
	var delay time.Duration
	for {
		c, err := r.base.Accept()
		if err != nil {
			if ne, ok := err.(interface{ Temporary() bool }); ok && ne.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			r.err = err
			return
		}
		delay = 0
		go r.sniff(c)
	}
}

// sniff reads the first byte: 0x16 is a TLS handshake record.
func (r *sniffListener) sniff(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	br := bufio.NewReaderSize(c, 1024)
	b, err := br.Peek(1)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		_ = c.Close()
		return
	}
	pc := &peekedConn{Conn: c, r: br}
	to := r.tlsConns
	if b[0] != 0x16 {
		to = r.plain.conns
	}
	select {
	case to <- pc:
	case <-r.done:
		_ = c.Close()
	case <-r.plain.done:
		_ = c.Close()
	}
}

func (r *sniffListener) Accept() (net.Conn, error) {
	select {
	case c := <-r.tlsConns:
		return c, nil
	case <-r.done:
		if r.err != nil && !errors.Is(r.err, net.ErrClosed) {
			return nil, r.err
		}
		return nil, net.ErrClosed
	}
}

func (r *sniffListener) Close() error {
	err := r.base.Close()
	r.once.Do(func() {
		r.plain.close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		go func() { <-ctx.Done(); r.refuser.Stop() }()
		r.refuser.GracefulStop()
	})
	return err
}

func (r *sniffListener) Addr() net.Addr { return r.base.Addr() }

// peekedConn reads the bytes peeked first.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// chanListener is a net.Listener fed by a channel.
type chanListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	addr  net.Addr
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) close() { l.once.Do(func() { close(l.done) }) }

func (l *chanListener) Close() error { l.close(); return nil }

func (l *chanListener) Addr() net.Addr { return l.addr }
