package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// A dev server is SIGKILLed while 200 three-step flows run; restarted on
// the same data directory it takes the lease over at once (no 30 s wait)
// and every flow whose start was acknowledged completes with the right
// output.
//
// Covers: G3, D3, D5
func TestKill_AcknowledgedFlowsSurviveSIGKILL(t *testing.T) {
	const flows = 200
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--data-dir", dir, "--listen", addr, "--durability", "strict"}
	p1 := testproc.Start(t, args...)
	p1.Serving(t, 30*time.Second)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, stopWorker := chainWorkerAndClient(t, ctx, addr)

	// Start the flows from 16 callers; kill the server after a third of
	// the starts were acknowledged, while steps are running.
	var (
		mu    sync.Mutex
		acked = map[string]int{}
		acks  atomic.Int64
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	killed := make(chan time.Time, 1)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= flows {
					return
				}
				id, in := fmt.Sprintf("chain-%03d", i), i*10
				if _, err := c.StartFlow(ctx, chainFlow, id, in); err != nil {
					t.Logf("start %s not acknowledged: %v", id, err)
					continue
				}
				mu.Lock()
				acked[id] = in
				mu.Unlock()
				if acks.Add(1) == flows/3 {
					p1.Signal(t, syscall.SIGKILL)
					killed <- time.Now()
				}
			}
		})
	}
	killedAt := <-killed
	p1.Wait(t, 10*time.Second)
	p2 := testproc.Start(t, args...)
	p2.Serving(t, 30*time.Second)
	if took := time.Since(killedAt); took > 10*time.Second {
		t.Fatalf("the restart took %v to serve; a dev node must take over its own lease at once (D3), not wait 30 s", took)
	}
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(acked) < flows/3 {
		t.Fatalf("only %d starts were acknowledged", len(acked))
	}
	for id, in := range acked {
		res, err := c.WaitForFlow(ctx, id)
		if err != nil {
			t.Fatalf("wait for %s: %v", id, err)
		}
		if res.Status != dex.StatusCompleted {
			t.Fatalf("%s ended %v (%v), want COMPLETED", id, res.Status, res.Error)
		}
		out, err := dex.Output[int](res)
		if err != nil || out != in+3 {
			t.Fatalf("%s output = %d (%v), want %d", id, out, err, in+3)
		}
	}
	t.Logf("%d of %d starts acknowledged, all completed after the kill", len(acked), flows)

	// The restart took the lease with a raised epoch.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	d, err := dexpb.NewAdminServiceClient(conn).Describe(ctx, &dexpb.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetNodeEpoch() != 2 {
		t.Fatalf("node epoch after one restart = %d, want 2", d.GetNodeEpoch())
	}

	stopWorker()
	p2.Signal(t, syscall.SIGTERM)
	if code := p2.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("graceful stop exited %d", code)
	}
}
