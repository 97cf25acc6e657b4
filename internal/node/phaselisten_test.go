package node

import (
	"errors"
	"net"
	"testing"
	"time"
)

// acceptOne accepts one connection on q within a second.
func acceptOne(t *testing.T, q net.Listener) net.Conn {
	t.Helper()
	got := make(chan net.Conn, 1)
	go func() {
		c, err := q.Accept()
		if err != nil {
			got <- nil
			return
		}
		got <- c
	}()
	select {
	case c := <-got:
		if c == nil {
			t.Fatal("Accept failed")
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	case <-time.After(time.Second):
		t.Fatal("no connection accepted within 1 s")
		return nil
	}
}

func dialTCP(t *testing.T, addr net.Addr) {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
}

// Connections go to the current phase; after a switch to the next phase,
// to that one; closing the final phase closes the process's listener and
// ends every phase's Accept.
func TestPhaseListener_HandsConnectionsToTheCurrentPhase(t *testing.T) {
	base, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, standby := newPhaseListener(base, false)
	if standby.Addr().String() != base.Addr().String() {
		t.Fatalf("Addr = %v, want %v", standby.Addr(), base.Addr())
	}
	dialTCP(t, base.Addr())
	acceptOne(t, standby)

	active := l.newPhase(true)
	if prev := l.switchTo(active); prev != standby {
		t.Fatal("switchTo did not return the previous phase")
	}
	if err := standby.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := standby.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on the closed standby phase = %v, want net.ErrClosed", err)
	}
	dialTCP(t, base.Addr())
	acceptOne(t, active)

	if err := active.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.closed:
	case <-time.After(time.Second):
		t.Fatal("closing the final phase did not close the listener")
	}
	if _, err := net.DialTimeout("tcp", base.Addr().String(), time.Second); err == nil {
		t.Fatal("the listener still accepts after the final phase closed")
	}
}
