package lease

import (
	"context"

	"github.com/dexzd/dexzd/internal/blob"
)

// TryAcquire is Acquire's acquisition write on its own, for tests that
// race writers on a version they read: after Config.BeforeWrite, one
// create-if-absent or replace-if-unchanged of v with epoch
// observed.Epoch+1, whether or not the lease is available.
func TryAcquire(ctx context.Context, cfg Config, observed Record, v blob.Version) (*Holder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.BeforeWrite != nil {
		if err := cfg.BeforeWrite(ctx); err != nil {
			return nil, err
		}
	}
	return tryAcquire(ctx, cfg, observed, v)
}
