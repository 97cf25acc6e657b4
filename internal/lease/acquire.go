package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
)

// Config configures acquiring and holding one node's lease.
type Config struct {
	// Store is the node's durable store. Required.
	Store blob.Store
	// Key is the lease object's key, <prefix>nodes/<nodeId>/lease. Required.
	Key string
	// NodeID is the node the lease belongs to. Required; a lease object
	// that names another node is refused as a permanent error.
	NodeID string
	// ProcessID identifies this process start; NewProcessID makes one.
	// Required.
	ProcessID string
	// Duration is the lease duration, in whole milliseconds, at least
	// MinDuration. Zero means DefaultDuration.
	Duration time.Duration
	// FailIfHeld makes Acquire return a *HeldError instead of waiting
	// while another process holds the lease.
	FailIfHeld bool
	// TakeOverHeld makes Acquire take a held lease at once (epoch + 1)
	// instead of waiting for it to expire. Only for a dev or local node that
	// holds its directory's dev.lock: any lease it finds held belongs to a
	// stopped process. It takes precedence over FailIfHeld.
	TakeOverHeld bool
	// PollInterval is how often Acquire re-reads a lease that another
	// process holds (it also re-reads at the computed expiry, if sooner).
	// Zero means DefaultPollInterval.
	PollInterval time.Duration
	// BeforeWrite, if set, runs before every acquisition write of Acquire
	// and TryAcquire (a standby's takeover delay). An error from it is
	// returned as is.
	BeforeWrite func(ctx context.Context) error
	// Logger receives the lease's log lines. Nil discards them.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Store == nil:
		return c, errors.New("lease config: Store is nil")
	case c.NodeID == "":
		return c, errors.New("lease config: NodeID is empty")
	case c.ProcessID == "":
		return c, errors.New("lease config: ProcessID is empty")
	case c.Duration < MinDuration:
		return c, fmt.Errorf("lease config: Duration %v is shorter than %v", c.Duration, MinDuration)
	case c.Duration%time.Millisecond != 0:
		return c, fmt.Errorf("lease config: Duration %v is not a whole number of milliseconds", c.Duration)
	case c.PollInterval < 0:
		return c, fmt.Errorf("lease config: PollInterval %v is negative", c.PollInterval)
	}
	if err := blob.CheckKey(c.Key); err != nil {
		return c, fmt.Errorf("lease config: Key: %w", err)
	}
	return c, nil
}

// ErrHeld matches every *HeldError.
var ErrHeld = errors.New("lease is held by another process")

// HeldError is returned by Acquire with FailIfHeld when another process
// holds the lease.
type HeldError struct {
	Key       string
	Holder    string    // the holder's process ID
	Epoch     uint64    // the holder's epoch
	RenewedAt time.Time // the holder's last renewal (its wall clock)
	ExpiresAt time.Time // when a reader treats the lease as expired
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %q is held by process %q (epoch %d, last renewed %s, expires %s)",
		e.Key, e.Holder, e.Epoch, e.RenewedAt.Format(time.RFC3339Nano), e.ExpiresAt.Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

func heldError(key string, r Record) *HeldError {
	return &HeldError{Key: key, Holder: r.Holder, Epoch: r.Epoch, RenewedAt: r.RenewedAt, ExpiresAt: r.ExpiresAt()}
}

// Acquire acquires the lease and returns its holder; the caller then runs
// Holder.Run. An absent lease is created with epoch 1; a released or expired
// one, one held by this very process ID, or (with TakeOverHeld) any held
// one is replaced with epoch + 1. A lease held by another process makes it
// return a *HeldError (FailIfHeld) or wait: it re-reads the lease every
// PollInterval and at the lease's expiry, whichever comes first. Losing the
// conditional write to another process sends it back to waiting. Transient
// store errors are retried after a backoff; a permanent one is returned. It
// returns ctx's error when ctx ends first.
func Acquire(ctx context.Context, cfg Config) (*Holder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("key", cfg.Key, "processId", cfg.ProcessID)
	limit := AttemptTimeout(cfg.Duration)
	bo := backoff{limit: min(backoffMax, max(cfg.PollInterval, backoffStart))}
	var waitingFor Record
	retry := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if blob.Classify(err) == blob.ErrPermanent {
			return fmt.Errorf("acquire lease: %w", err)
		}
		log.Warn("lease acquisition failed; retrying", "err", err)
		if !sleep(ctx, nil, bo.next()) {
			return ctx.Err()
		}
		return nil
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, limit)
		rec, v, err := Read(rctx, cfg.Store, cfg.Key)
		cancel()
		if errors.Is(err, blob.ErrNotFound) {
			rec, v, err = Record{}, "", nil
		}
		if err != nil {
			if err := retry(err); err != nil {
				return nil, err
			}
			continue
		}
		if v != "" && rec.NodeID != cfg.NodeID {
			return nil, blob.Permanent(blob.OpGet, cfg.Key,
				fmt.Errorf("lease object names node %q, this process runs node %q", rec.NodeID, cfg.NodeID))
		}
		now := time.Now()
		if v != "" && !rec.AvailableAt(now) && rec.Holder != cfg.ProcessID && !cfg.TakeOverHeld {
			if cfg.FailIfHeld {
				return nil, heldError(cfg.Key, rec)
			}
			if rec.Holder != waitingFor.Holder || rec.Epoch != waitingFor.Epoch {
				waitingFor = rec
				log.Info("lease held by another process; waiting", "holder", rec.Holder,
					"epoch", rec.Epoch, "expiresAt", rec.ExpiresAt())
			}
			bo.reset()
			if !sleep(ctx, nil, min(cfg.PollInterval, rec.ExpiresAt().Sub(now))) {
				return nil, ctx.Err()
			}
			continue
		}
		if v != "" && !rec.AvailableAt(now) {
			log.Info("taking over a held lease", "holder", rec.Holder, "epoch", rec.Epoch)
		}
		if cfg.BeforeWrite != nil {
			if err := cfg.BeforeWrite(ctx); err != nil {
				return nil, err
			}
		}
		h, err := tryAcquire(ctx, cfg, rec, v)
		switch {
		case err == nil:
			return h, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, blob.ErrPrecondition):
			log.Info("lease acquisition lost to another process")
		default:
			if err := retry(err); err != nil {
				return nil, err
			}
		}
	}
}

// TryAcquire makes one acquisition write for a lease the caller has read
// (observed and v from Read; the zero Record and "" for an absent lease):
// after Config.BeforeWrite, a create-if-absent or a replace-if-unchanged of
// v with epoch observed.Epoch+1. It does not check that the lease is
// available; the caller decides that (Record.AvailableAt). If the write's
// reply is lost it reads the lease back once and succeeds if the write
// landed. An error matching blob.ErrPrecondition means another process
// changed the lease first.
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

func tryAcquire(ctx context.Context, cfg Config, observed Record, v blob.Version) (*Holder, error) {
	limit := AttemptTimeout(cfg.Duration)
	sent := time.Now()
	rec := Record{
		NodeID:    cfg.NodeID,
		Epoch:     observed.Epoch + 1,
		Holder:    cfg.ProcessID,
		Duration:  cfg.Duration,
		RenewedAt: wall(sent),
		Write:     1,
	}
	actx, cancel := context.WithTimeout(ctx, limit)
	var nv blob.Version
	var err error
	if v == "" {
		nv, err = cfg.Store.PutIfAbsent(actx, cfg.Key, rec.Encode())
	} else {
		nv, err = cfg.Store.PutIfMatch(actx, cfg.Key, rec.Encode(), v)
	}
	cancel()
	if err != nil && blob.Classify(err) == blob.ErrTransient && ctx.Err() == nil {
		// The write may have landed with its reply lost: read it back.
		rctx, cancel := context.WithTimeout(ctx, limit)
		got, gv, rerr := Read(rctx, cfg.Store, cfg.Key)
		cancel()
		if rerr == nil && got.sameWrite(rec) {
			nv, err = gv, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("acquire lease epoch %d: %w", rec.Epoch, err)
	}
	h := newHolder(cfg, rec, nv, sent)
	cfg.Logger.Info("lease acquired", "key", cfg.Key, "processId", cfg.ProcessID,
		"epoch", rec.Epoch, "previousHolder", observed.Holder)
	return h, nil
}

// backoff is the deterministic retry backoff: backoffStart doubling to limit.
type backoff struct {
	cur, limit time.Duration
}

// peek returns the backoff next would return.
func (b *backoff) peek() time.Duration {
	if b.cur == 0 {
		return min(backoffStart, b.limit)
	}
	return b.cur
}

func (b *backoff) next() time.Duration {
	d := b.peek()
	b.cur = min(2*d, b.limit)
	return d
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits for d, or until ctx ends or stop is closed (it then returns
// false). stop may be nil.
func sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}
