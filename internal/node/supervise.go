package node

// Supervision: what keeps a process fit to serve is a held lease that keeps
// renewing and a log writer that keeps being accepted; the way a process
// ends maps to its exit status.

import (
	"context"
	"errors"

	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/wal"
)

// Supervise starts w and renews h until ctx ends or one of them fails. When
// the lease is lost, cannot be renewed in time, or meets a permanent store
// error (L7, L9), Supervise aborts the writer at once, so no record submitted
// after that point is acknowledged, and returns the lease's error. When the
// writer fails (fenced, G4; not accepted within 10 s, L10; a permanent
// error) it stops renewing and returns the writer's error. It returns nil
// when ctx ends. The caller exits with ExitCode of the result.
func Supervise(ctx context.Context, h *lease.Holder, w *wal.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.Start(ctx)
	renewed := make(chan error, 1)
	go func() { renewed <- h.Run(ctx) }()
	select {
	case err := <-renewed:
		cancel() // abort the writer: pending submits fail, nothing is acknowledged
		<-w.Done()
		return err
	case <-w.Done():
		cancel()
		if err := <-renewed; err != nil && w.Err() == nil {
			return err
		}
		return w.Err()
	}
}

// ExitCode is the status a process exits with after Run returned err: 0
// for a clean stop (nil, or a cancelled context after a signal), 1 for
// every other end, which includes each stop of L7, L9, L10 and G4 (L11).
func ExitCode(err error) int {
	if err == nil || errors.Is(err, context.Canceled) {
		return 0
	}
	return 1
}
