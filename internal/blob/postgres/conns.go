package postgres

import (
	"context"
	"net"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
)

// connSet holds the network connections a store dialled (its statements'
// and pgx's cancel requests'), so that Close can cut them. pgxpool's own
// Close waits for every connection in use and gives each one 15 s to say
// goodbye (a cancel request after a statement's context ended, then
// Terminate and a read until the server hangs up); on a database no packet
// reaches it waits all of that.
type connSet struct {
	// ctx ends when the set is cut: dials in progress end with it.
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	cut   bool
	conns map[*setConn]struct{}
}

func newConnSet() *connSet {
	ctx, cancel := context.WithCancel(context.Background())
	return &connSet{ctx: ctx, cancel: cancel, conns: map[*setConn]struct{}{}}
}

// dialer returns dial with every connection it makes held in the set. Once
// the set is cut it dials nothing: it fails with errClosed.
func (cs *connSet) dialer(dial pgconn.DialFunc) pgconn.DialFunc {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(cs.ctx, cancel)()
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if cs.cut {
			_ = c.Close()
			return nil, errClosed
		}
		sc := &setConn{Conn: c, set: cs}
		cs.conns[sc] = struct{}{}
		return sc, nil
	}
}

// cutAll closes every connection in the set and ends the dials in
// progress: whatever waits on one of them (a statement for its answer, a
// cancel request, a goodbye) fails at once.
func (cs *connSet) cutAll() {
	cs.cancel()
	cs.mu.Lock()
	cs.cut = true
	conns := cs.conns
	cs.conns = map[*setConn]struct{}{}
	cs.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

// setConn is a connection of a connSet; closing it takes it out.
type setConn struct {
	net.Conn
	set *connSet
}

func (c *setConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.conns, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}
