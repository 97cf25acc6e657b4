package e2e

import (
	"context"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// A dev server killed and restarted on its data directory serves again in
// a few hundred milliseconds (D3); a client with the SDK's defaults, which
// calls every 10 ms, is answered again within 0.5 s of the restarted
// server logging "serving": the SDK reconnects with a 50 ms connect
// backoff (gRPC's default waits 1 s) and a retry waits for the
// reconnection, not for a whole retry backoff.
//
// Covers: D3, P5
func TestDevRestart_ClientIsAnsweredSoonAfterTheServerIsBack(t *testing.T) {
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--data-dir", dir, "--listen", addr}
	p1 := testproc.Start(t, args...)
	p1.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ListFlows(ctx, dex.FlowQuery{}); err != nil {
		t.Fatal(err)
	}

	p1.Signal(t, syscall.SIGKILL)
	killedAt := time.Now()
	p1.Wait(t, 10*time.Second)
	answered := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.ListFlows(cctx, dex.FlowQuery{})
			ccancel()
			if err == nil {
				answered <- time.Now()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	p2 := testproc.Start(t, args...)
	p2.Serving(t, 30*time.Second)
	serving := servingTime(t, p2)
	var at time.Time
	select {
	case at = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10 s of the restart")
	}
	t.Logf("answered %v after the kill, %v after the restarted server logged serving (%v after the kill)",
		at.Sub(killedAt).Round(time.Millisecond), at.Sub(serving).Round(time.Millisecond), serving.Sub(killedAt).Round(time.Millisecond))
	if lag := at.Sub(serving); lag > 500*time.Millisecond {
		t.Errorf("the client was answered %v after the restarted server logged serving, want within 0.5 s", lag)
	}
}

var servingTimeLine = regexp.MustCompile(`time=(\S+) level=INFO msg=serving `)

// servingTime returns when the process logged that it serves.
func servingTime(t *testing.T, p *testproc.Proc) time.Time {
	t.Helper()
	m := servingTimeLine.FindStringSubmatch(p.Log())
	if m == nil {
		t.Fatalf("no serving line in the log:\n%s", p.Log())
	}
	ts, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatal(err)
	}
	return ts
}
