package dex_test

import (
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
)

// Worker.Connected is closed once a server has welcomed the worker (its
// declarations are registered), not before; a standby's refusals leave it
// open.
func TestWorker_ConnectedAfterTheWelcome(t *testing.T) {
	t.Parallel()
	ws := newFakeWorkerServer()
	ws.unavailable.Store(true)
	addr := serve(t, ws, nil)
	w, _ := runWorker(t, dex.WorkerOptions{Addresses: []string{addr}}, testFlow)
	deadline := time.Now().Add(5 * time.Second)
	for ws.refusals.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-w.Connected():
		t.Fatal("Connected closed while every stream was refused")
	default:
	}
	ws.unavailable.Store(false)
	select {
	case <-w.Connected():
	case <-time.After(5 * time.Second):
		t.Fatal("Connected still open 5 s after the server began to welcome the worker")
	}
	if h := ws.session(t).hello; len(h.GetFlowTypes()) != 1 {
		t.Errorf("the welcomed session's Hello = %v", h)
	}
}
