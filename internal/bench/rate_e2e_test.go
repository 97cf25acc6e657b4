package bench

import (
	"context"
	"testing"
	"time"
)

// An open-loop run beyond the server's capacity: the server refuses part
// of the starts (limits.maxQueuedTasks is small here), the refusals are
// counted, and every accepted flow completes with the right output. The
// rate is far above what one worker slot serves, so that a faster server
// still refuses.
func TestRun_OpenLoopCountsRefusals(t *testing.T) {
	t.Parallel()
	srv, err := StartDevServer(context.Background(), DevOptions{Binary: serverBinary(t), DataDir: t.TempDir(),
		Durability: "relaxed", Config: "limits:\n  maxQueuedTasks: 5\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(10 * time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Workload: WorkloadChain, Addresses: []string{srv.Addr}, Steps: 2, Callers: 2,
		WorkerConcurrency: 1, Warmup: 2, Rate: 4000, Duration: 250 * time.Millisecond})
	if err != nil {
		t.Fatalf("run: %v (%+v)", err, res)
	}
	if res.Flows != 1000 || res.Offered != 1000 || res.Accepted+res.Refused+res.Skipped != res.Flows {
		t.Fatalf("offered %d of %d, accepted %d, refused %d, skipped %d: want 1000 = accepted + refused + skipped",
			res.Offered, res.Flows, res.Accepted, res.Refused, res.Skipped)
	}
	if res.Refused == 0 || res.Accepted == 0 {
		t.Fatalf("accepted %d, refused %d: want both", res.Accepted, res.Refused)
	}
	if res.Completed != res.Accepted || res.Failures != 0 {
		t.Fatalf("completed %d of %d accepted, %d failures", res.Completed, res.Accepted, res.Failures)
	}
}
