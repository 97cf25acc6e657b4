package lease

import (
	"cmp"
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
	// BeforeWrite, if set, runs before every acquisition write of
	// Acquire: a hot standby waits its takeover delay there (0-50 ms
	// of jitter, or standby.laggingTakeoverDelay when it lags). An error
	// from it is returned as is.
	BeforeWrite func(ctx context.Context) error
	// RetryStart and RetryMax bound Acquire's backoff after a failed read
	// or acquisition write: RetryStart doubling up to RetryMax. Zero means
	// 100 ms doubling to PollInterval, within 100 ms to 1 s.
	RetryStart, RetryMax time.Duration
	// RetryPermanent makes Acquire retry permanent store errors too, with
	// the same backoff, instead of returning them: a hot standby keeps
	// following the log and keeps trying (S9). A lease object that names
	// another node is returned all the same.
	RetryPermanent bool
	// Decide, if set, is the waiter's own policy, for a waiter whose
	// rules are not Acquire's: Acquire hands it every read of the lease
	// and every failed acquisition write, as an Observation, before its
	// own rules, and follows its Decision. A process holding off after a
	// step down uses it to stop once another process holds the lease and
	// to write only after its hold-off.
	Decide func(Observation) Decision
	// Clock, if set, reads this process's clocks for the holder: the
	// monotonic reading, which stops while the host is suspended, and the
	// wall reading, which does not. Nil reads time.Now (its monotonic
	// reading, and the same rounded to its wall reading). The simulator
	// sets it to suspend one process's monotonic clock while the others'
	// run on (Holder.Valid needs both clocks to say the period runs).
	Clock func() (mono, wall time.Time)
	// Logger receives the lease's log lines. Nil discards them.
	Logger *slog.Logger
}

// systemClock is the default Config.Clock.
func systemClock() (mono, wall time.Time) {
	now := time.Now()
	return now, now.Round(0)
}

// An Observation is what Acquire learnt from one read of the lease, or
// from one acquisition write that failed other than by losing to another
// process (a lost write sends Acquire back to reading).
type Observation struct {
	// At is the waiter's wall clock when the read or the write returned.
	At time.Time
	// Record and Version are the lease as read: the zero Record and ""
	// when it is absent, or when the read failed.
	Record  Record
	Version blob.Version
	// Err is the read's error, or the write's when Write is set. A lease
	// object that names another node is a read error too.
	Err error
	// Write is set when Err is the acquisition write's. Record and
	// Version are then the lease the write meant to replace.
	Write bool
	// Held is set when the read found the lease held by another process:
	// not released, not expired (Record.AvailableAt) and naming another
	// holder than Config.ProcessID. Acquire's own rules wait for such a
	// lease, fail (FailIfHeld) or take it (TakeOverHeld).
	Held bool
}

// A Decision is a waiter's answer to an Observation. The zero Decision
// leaves the observation to Acquire's own rules.
type Decision struct {
	// Stop, if not nil, ends Acquire, which returns it as is.
	Stop error
	// Wait, if positive (and Stop nil), makes Acquire wait this long, or
	// until Wake is closed, and then read the lease again, instead of
	// applying its own rules. A closed Wake ends the wait at once.
	Wait time.Duration
	Wake <-chan struct{}
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
	if c.Clock == nil {
		c.Clock = systemClock
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
	case c.RetryStart < 0 || c.RetryMax < 0:
		return c, fmt.Errorf("lease config: RetryStart %v or RetryMax %v is negative", c.RetryStart, c.RetryMax)
	}
	if c.RetryStart == 0 {
		c.RetryStart = backoffStart
	}
	if c.RetryMax == 0 {
		c.RetryMax = min(backoffMax, max(c.PollInterval, backoffStart))
	}
	c.RetryMax = max(c.RetryMax, c.RetryStart)
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
// PollInterval and at the lease's expiry, whichever comes first. An
// available lease is written after Config.BeforeWrite. Losing the
// conditional write to another process sends it back to waiting. Transient
// store errors are retried after a backoff (Config.RetryStart to
// RetryMax); a permanent one is returned, unless Config.RetryPermanent. A
// lease that names another node is always returned. It returns ctx's error
// when ctx ends first.
//
// Config.Decide, when set, sees every read and every failed write first
// and may stop Acquire or make it wait and read again instead.
//
// This is the one loop that waits for the lease: a cold standby and a
// starting process call it with the defaults, a hot standby with its
// takeover delay in BeforeWrite, its own backoff and RetryPermanent, and
// a process holding off after a step down with its rules in Decide.
func Acquire(ctx context.Context, cfg Config) (*Holder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("key", cfg.Key, "processId", cfg.ProcessID)
	bo := backoff{start: cfg.RetryStart, limit: cfg.RetryMax}
	var waitingFor Record
	// decide hands o to cfg.Decide: decided reports that it did not
	// leave o to Acquire's rules, and err ends Acquire.
	decide := func(o Observation) (decided bool, err error) {
		if cfg.Decide == nil {
			return false, nil
		}
		switch d := cfg.Decide(o); {
		case d.Stop != nil:
			return true, d.Stop
		case d.Wait > 0:
			if !sleep(ctx, d.Wake, d.Wait) && ctx.Err() != nil {
				return true, ctx.Err()
			}
			return true, nil
		}
		return false, nil
	}
	retry := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if blob.Classify(err) == blob.ErrPermanent && !cfg.RetryPermanent {
			return fmt.Errorf("acquire lease: %w", err)
		}
		d := bo.next()
		log.Warn("lease acquisition failed; retrying", "err", err, "backoff", d)
		if !sleep(ctx, nil, d) {
			return ctx.Err()
		}
		return nil
	}
	for {
		rec, v, err := current(ctx, cfg)
		now := time.Now()
		held := err == nil && v != "" && !rec.AvailableAt(now) && rec.Holder != cfg.ProcessID
		if decided, err := decide(Observation{At: now, Record: rec, Version: v, Err: err, Held: held}); decided {
			if err != nil {
				return nil, err
			}
			continue
		}
		if errors.Is(err, errOtherNode) {
			return nil, err
		}
		if err != nil {
			if err := retry(err); err != nil {
				return nil, err
			}
			continue
		}
		if held && !cfg.TakeOverHeld {
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
			if decided, err := decide(Observation{At: time.Now(), Record: rec, Version: v, Err: err, Write: true}); decided {
				if err != nil {
					return nil, err
				}
				continue
			}
			if err := retry(err); err != nil {
				return nil, err
			}
		}
	}
}

// errOtherNode matches the error of a lease object that names another node.
var errOtherNode = errors.New("lease object names another node")

// current reads cfg's lease within AttemptTimeout: the zero Record and ""
// when it is absent. A lease object that names another node than
// cfg.NodeID is an error matching blob.ErrPermanent.
func current(ctx context.Context, cfg Config) (Record, blob.Version, error) {
	rctx, cancel := context.WithTimeout(ctx, AttemptTimeout(cfg.Duration))
	defer cancel()
	rec, v, err := Read(rctx, cfg.Store, cfg.Key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return Record{}, "", nil
	case err != nil:
		return Record{}, "", err
	case rec.NodeID != cfg.NodeID:
		return Record{}, "", blob.Permanent(blob.OpGet, cfg.Key, fmt.Errorf("%w: it names node %q, this process runs node %q",
			errOtherNode, rec.NodeID, cfg.NodeID))
	}
	return rec, v, nil
}

// tryAcquire makes one acquisition write for a lease read as observed
// and v (the zero Record and "" for an absent lease): a create-if-absent
// or a replace-if-unchanged of v with epoch observed.Epoch+1. It does not
// check that the lease is available; the caller decides that. If the
// write's reply is lost it reads the lease back once and succeeds if the
// write landed. An error matching blob.ErrPrecondition means another
// process changed the lease first.
func tryAcquire(ctx context.Context, cfg Config, observed Record, v blob.Version) (*Holder, error) {
	limit := AttemptTimeout(cfg.Duration)
	sent := now(cfg.Clock)
	rec := Record{
		NodeID:    cfg.NodeID,
		Epoch:     observed.Epoch + 1,
		Holder:    cfg.ProcessID,
		Duration:  cfg.Duration,
		RenewedAt: wall(sent.wall),
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

// backoff is the deterministic retry backoff: start (zero: backoffStart)
// doubling to limit.
type backoff struct {
	start, cur, limit time.Duration
}

// peek returns the backoff next would return.
func (b *backoff) peek() time.Duration {
	if b.cur == 0 {
		return min(cmp.Or(b.start, backoffStart), b.limit)
	}
	return b.cur
}

func (b *backoff) next() time.Duration {
	d := b.peek()
	b.cur = min(2*d, b.limit)
	return d
}

func (b *backoff) reset() { b.cur = 0 }

// Sleep waits for d, or until ctx ends (it then returns false): the one
// cancellable wait of the lease's users.
func Sleep(ctx context.Context, d time.Duration) bool { return sleep(ctx, nil, d) }

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
