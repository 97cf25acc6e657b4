package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Writer defaults.
const (
	// DefaultMaxBatchBytes caps the encoded record bytes group commit
	// gathers into one batch. A batch must be accepted within one
	// AttemptTimeout (2 s) on the slowest supported store, and within
	// LogWriteLimit (10 s) with its retries, or the process exits: 8 MiB in
	// 2 s needs 4 MiB/s (32 Mbit/s) of upload to the store, a small part
	// of what one S3 PUT from a cloud VM usually gets; on the local MinIO
	// of scripts/testenv.sh an 8 MiB PutIfAbsent took 65-122 ms (README:
	// Bounded load). Throughput does not need larger batches:
	// DefaultMaxBatchRecords of typical records are far below it.
	DefaultMaxBatchBytes   = 8 << 20
	DefaultMaxBatchRecords = 10_000
)

// WriterConfig configures a Writer.
type WriterConfig struct {
	Store  blob.Store
	Layout Layout
	// Epoch is the lease epoch this process holds; every batch carries it.
	Epoch uint64
	// NextSeq is the first sequence number to write: what Fence returned.
	NextSeq uint64
	// OnDurable is called on the writer goroutine, in sequence order, for
	// every batch once it is durable and before any of its submitters is
	// told. The node applies the batch to its local store here. An error
	// stops the writer (the batch's submitters get the error).
	//
	// Contract: each of the batch's Records is the very slice a submitter
	// passed to Submit or SubmitAsync (same backing array, same length),
	// in submission order; the writer never copies records. The serving
	// core's sequencer relies on it to find the decoded records of the
	// envelopes it submitted (by unsafe.SliceData) instead of decoding them
	// again.
	// TestWriter_OnDurableGetsTheSubmittedSlices pins it.
	OnDurable func(Batch) error
	// MaxBatchBytes caps the encoded size of a batch's records (4 bytes of
	// length plus the payload each) that group commit gathers: a record
	// that would take a batch past it starts the next batch. A record that
	// alone exceeds it (up to MaxRecordBytes) is written in a batch of its
	// own. Zero means DefaultMaxBatchBytes.
	MaxBatchBytes int
	// MaxRecordBytes caps one record's encoded size (prefix included); a
	// larger record is refused with ErrRecordTooLarge. Zero means
	// MaxBatchBytes; less than MaxBatchBytes is raised to it.
	MaxRecordBytes int
	// MaxBatchRecords caps the records per batch (at most
	// MaxRecordsPerBatch). Zero means DefaultMaxBatchRecords.
	MaxBatchRecords int
	// AttemptTimeout cuts off one write request so that a hung request is
	// retried. Zero means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// Logger receives retries and the fatal error. Nil discards.
	Logger *slog.Logger
	// OnBatch, when set, is called on the writer goroutine for every batch
	// once it is durable and applied (after OnDurable), before its
	// submitters are told; metrics use it. It must be quick and must not
	// block.
	OnBatch func(BatchStats)
	// Tracer, when set, records two spans per traced record (one given
	// to SubmitTraced with a valid parent) once its batch is applied:
	// "dex.log.append", the batch's write to the store, and
	// "dex.log.apply", its OnDurable, both children of the record's
	// parent and timed as they happened. Records submitted without a
	// parent cost nothing.
	Tracer trace.Tracer
	// StoreName names the durable store on those spans (fs, s3,
	// postgres).
	StoreName string
}

// BatchStats describe one batch the writer made durable.
type BatchStats struct {
	Seq uint64
	// Duration is the time from the first write request of the batch until
	// it was durable: retries and a read-back after a lost reply (G5)
	// included, OnDurable not.
	Duration time.Duration
	Bytes    int // the encoded batch
	Records  int
}

// Stats are the writer's counters since it was created, for metrics.
type Stats struct {
	Batches uint64 // batches written
	Records uint64 // records in those batches
	Bytes   uint64 // encoded bytes of those batches
	Retries uint64 // write or read-back attempts repeated after a transient error
	Adopted uint64 // batches an earlier attempt had landed without a reply (G5)
}

// Writer appends records to the log with group commit: while one batch is
// in flight, submitted records gather into the next one. Exactly one batch
// write is in flight at a time; each is written create-if-absent at the next
// sequence number and carries the writer's epoch (G1, L4). A durable batch
// is applied (OnDurable, in sequence order, on a goroutine of its own) and
// acknowledged while the next one is written.
//
// Its life: NewWriter, Start, any number of Submit/SubmitAsync calls from any
// goroutine, Stop. A fatal error (fenced, the store not accepting a batch
// within LogWriteLimit, a permanent store error, corruption, an OnDurable
// error) stops the writer at once: every pending and future submit fails
// with it, nothing further is written or acknowledged, Done is closed and
// Err returns it. The node then exits 1.
type Writer struct {
	cfg  WriterConfig
	log  *slog.Logger
	wake chan struct{}
	done chan struct{}

	mu      sync.Mutex
	state   writerState
	queue   []*group // records waiting for a batch, oldest first
	stopErr error    // what a submit gets once the writer is closed
	err     error    // the fatal error, sticky

	// queued is the encoded size of the records waiting for a batch (not
	// yet taken for a write); the node refuses new work while it is large
	// (QueuedBytes).
	queued                                    atomic.Int64
	nextSeq                                   atomic.Uint64
	batches, records, bytes, retries, adopted atomic.Uint64
}

type writerState int

const (
	stateIdle     writerState = iota // created, not started
	stateRunning                     // accepting records
	stateDraining                    // Stop called: writing what is queued
	stateStopped                     // the goroutine exited or never started
)

// group is the future of one batch: the records gathered for it and, once
// done is closed, its outcome.
type group struct {
	records [][]byte
	// parents are the span contexts of the traced records, nil when
	// none is (SubmitTraced).
	parents []trace.SpanContext
	size    int
	done    chan struct{}
	seq     uint64
	err     error
}

func (g *group) complete(seq uint64, err error) {
	g.seq, g.err = seq, err
	close(g.done)
}

// NewWriter checks cfg and returns a writer that is not started yet.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("wal writer: no store")
	case cfg.Layout.node == "":
		return nil, errors.New("wal writer: no layout")
	case cfg.OnDurable == nil:
		return nil, errors.New("wal writer: no OnDurable")
	case cfg.MaxBatchBytes < 0, cfg.MaxRecordBytes < 0, cfg.MaxBatchRecords < 0, cfg.AttemptTimeout < 0:
		return nil, errors.New("wal writer: negative limit")
	case cfg.MaxBatchRecords > MaxRecordsPerBatch:
		return nil, fmt.Errorf("wal writer: MaxBatchRecords %d is above %d", cfg.MaxBatchRecords, MaxRecordsPerBatch)
	}
	if cfg.MaxBatchBytes == 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	cfg.MaxRecordBytes = max(cfg.MaxRecordBytes, cfg.MaxBatchBytes)
	if cfg.MaxBatchRecords == 0 {
		cfg.MaxBatchRecords = DefaultMaxBatchRecords
	}
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Writer{
		cfg:  cfg,
		log:  log.With("epoch", cfg.Epoch),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	w.nextSeq.Store(cfg.NextSeq)
	return w, nil
}

// Start starts the writer goroutine. Cancelling ctx aborts the writer: the
// batch in flight is abandoned (it may or may not land) and every pending
// submit fails with ErrStopped; Err stays nil because the caller asked for
// it. Start after Stop does nothing; a second Start panics.
func (w *Writer) Start(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.state {
	case stateIdle:
		w.state = stateRunning
		go w.run(ctx)
	case stateStopped:
	default:
		panic("wal: Writer started twice")
	}
}

// Stop stops accepting records (later submits fail with ErrStopped), waits
// until every record already submitted is written and acknowledged (or
// failed), and returns Err. It is safe to call more than once, but not from
// OnDurable (it would wait for itself).
func (w *Writer) Stop() error {
	w.mu.Lock()
	switch w.state {
	case stateIdle:
		w.state = stateStopped
		w.stopErr = ErrStopped
		q := w.queue
		w.queue = nil
		w.queued.Store(0)
		close(w.done)
		w.mu.Unlock()
		for _, g := range q {
			g.complete(0, ErrStopped)
		}
		return nil
	case stateRunning:
		w.state = stateDraining
		w.stopErr = ErrStopped
	}
	w.mu.Unlock()
	w.signal()
	<-w.done
	return w.Err()
}

// Done is closed when the writer has stopped, for any reason.
func (w *Writer) Done() <-chan struct{} { return w.done }

// Err returns the fatal error that stopped the writer, or nil while it runs
// and after a Stop or an abort through Start's context.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// QueuedBytes returns the encoded size of the records submitted and not
// yet taken for a batch write. The writer's queue has no bound of its own:
// every submitted record was decided and must be written. Its callers bound
// it by refusing new work while it is above their limit (node: admission),
// so that back-pressure reaches the clients, never a refusal here.
func (w *Writer) QueuedBytes() int64 { return w.queued.Load() }

// NextSeq returns the sequence number of the next batch to write.
func (w *Writer) NextSeq() uint64 { return w.nextSeq.Load() }

// Stats returns the counters.
func (w *Writer) Stats() Stats {
	return Stats{
		Batches: w.batches.Load(),
		Records: w.records.Load(),
		Bytes:   w.bytes.Load(),
		Retries: w.retries.Load(),
		Adopted: w.adopted.Load(),
	}
}

// Future is the outcome of one submitted record.
type Future struct{ g *group }

// Done is closed once the record's batch is durable and applied (OnDurable
// returned), or the record failed.
func (f Future) Done() <-chan struct{} { return f.g.done }

// Result waits for Done and returns the sequence number of the batch that
// holds the record, or why it was not written.
func (f Future) Result() (uint64, error) {
	<-f.g.done
	return f.g.seq, f.g.err
}

// Wait is Result that gives up when ctx ends. Giving up does not withdraw the
// record: it may still be written.
func (f Future) Wait(ctx context.Context) (uint64, error) {
	select {
	case <-f.g.done:
		return f.g.seq, f.g.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func failed(err error) Future {
	g := &group{done: make(chan struct{})}
	g.complete(0, err)
	return Future{g}
}

// Submit appends record to the log and returns the sequence number of the
// batch that holds it, once that batch is durable in the store and OnDurable
// has returned (G3). The writer keeps record; do not modify it afterwards.
// If ctx ends first Submit returns ctx.Err() and the record may still be
// written.
func (w *Writer) Submit(ctx context.Context, record []byte) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return w.SubmitAsync(record).Wait(ctx)
}

// SubmitAsync queues record and returns at once; the Future reports its
// outcome. Records are written in the order SubmitAsync was called.
func (w *Writer) SubmitAsync(record []byte) Future {
	return w.SubmitTraced(record, trace.SpanContext{})
}

// SubmitTraced is SubmitAsync for a record written on behalf of a traced
// call: with WriterConfig.Tracer set and parent valid, the batch's write
// and apply are recorded as spans under parent.
func (w *Writer) SubmitTraced(record []byte, parent trace.SpanContext) Future {
	size := recordPrefixSize + len(record)
	if size > w.cfg.MaxRecordBytes {
		return failed(fmt.Errorf("%w: %d bytes, the record limit is %d", ErrRecordTooLarge, len(record), w.cfg.MaxRecordBytes))
	}
	w.mu.Lock()
	if w.state >= stateDraining {
		err := w.stopErr
		w.mu.Unlock()
		return failed(err)
	}
	var g *group
	if n := len(w.queue); n > 0 {
		last := w.queue[n-1]
		if len(last.records) < w.cfg.MaxBatchRecords && last.size+size <= w.cfg.MaxBatchBytes {
			g = last
		}
	}
	if g == nil {
		g = &group{done: make(chan struct{})}
		w.queue = append(w.queue, g)
	}
	g.records = append(g.records, record)
	if parent.IsValid() && w.cfg.Tracer != nil {
		g.parents = append(g.parents, parent)
	}
	g.size += size
	w.queued.Add(int64(size))
	w.mu.Unlock()
	w.signal()
	return Future{g}
}

func (w *Writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// take waits for the next group to write. It returns nil when the writer
// drained after Stop, ctx ended or the applier broke.
func (w *Writer) take(ctx context.Context, broken <-chan struct{}) *group {
	for {
		w.mu.Lock()
		if len(w.queue) > 0 {
			g := w.queue[0]
			w.queue[0] = nil
			w.queue = w.queue[1:]
			w.queued.Add(-int64(g.size))
			w.mu.Unlock()
			return g
		}
		draining := w.state == stateDraining
		w.mu.Unlock()
		if draining {
			return nil
		}
		select {
		case <-w.wake:
		case <-ctx.Done():
			return nil
		case <-broken:
			return nil
		}
	}
}

func (w *Writer) run(ctx context.Context) {
	defer close(w.done)
	// The batch written last is applied (OnDurable) and acknowledged by
	// the applier while the next one is written: a write does not wait
	// for the apply before it, only for the write before it. At most one
	// durable batch waits for the applier.
	ap := &applier{w: w, in: make(chan durable, 1), broken: make(chan struct{}), done: make(chan struct{})}
	go ap.run(ctx)
	var inflight *group
	var err error
	for {
		var g *group
		if ctx.Err() == nil {
			g = w.take(ctx, ap.broken)
		}
		if g == nil {
			break
		}
		select {
		case <-ap.broken:
			inflight = g
		default:
		}
		if inflight != nil {
			break
		}
		var d durable
		if d, err = w.writeGroup(ctx, g); err != nil {
			inflight = g
			break
		}
		sent := false
		select {
		case ap.in <- d:
			sent = true
		case <-ap.broken:
			inflight = g // durable, but an earlier batch could not be applied
		}
		if !sent {
			break
		}
	}
	close(ap.in)
	<-ap.done
	if err == nil && ap.err != nil {
		err = ap.err
	}
	switch {
	case ctx.Err() != nil:
		w.stop(inflight, abortErr(ctx))
	case err != nil:
		w.fail(inflight, err)
	default:
		w.stop(nil, ErrStopped)
	}
}

func abortErr(ctx context.Context) error {
	return fmt.Errorf("%w: %w", ErrStopped, context.Cause(ctx))
}

// durable is a batch that is in the store, waiting to be applied.
type durable struct {
	g     *group
	b     Batch
	start time.Time // of the first write request
	took  time.Duration
	size  int
}

// writeGroup writes g as the next batch and advances the position.
func (w *Writer) writeGroup(ctx context.Context, g *group) (durable, error) {
	seq := w.nextSeq.Load()
	b := Batch{Seq: seq, Epoch: w.cfg.Epoch, Kind: KindRecords, Records: g.records}
	data := Encode(b)
	start := time.Now()
	if err := w.write(ctx, seq, data); err != nil {
		return durable{}, err
	}
	w.nextSeq.Store(seq + 1)
	return durable{g: g, b: b, start: start, took: time.Since(start), size: len(data)}, nil
}

// applier applies durable batches in order and acknowledges them. After a
// failed OnDurable (err is set and broken closed, which stops the writer)
// and after the writer was aborted, it acknowledges nothing more: the
// batches it still receives fail with the error.
type applier struct {
	w      *Writer
	in     chan durable
	broken chan struct{}
	done   chan struct{}
	err    error // read by the writer only after done is closed
}

func (a *applier) run(ctx context.Context) {
	defer close(a.done)
	var stopped error
	for d := range a.in {
		if stopped == nil && ctx.Err() != nil {
			stopped = abortErr(ctx)
		}
		if stopped != nil {
			d.g.complete(0, stopped)
			continue
		}
		applyStart := time.Now()
		if err := a.w.cfg.OnDurable(d.b); err != nil {
			stopped = fmt.Errorf("apply batch %d: %w", d.b.Seq, err)
			a.err = stopped
			close(a.broken)
			d.g.complete(0, stopped)
			continue
		}
		w := a.w
		w.batches.Add(1)
		w.records.Add(uint64(len(d.b.Records)))
		w.bytes.Add(uint64(d.size))
		if w.cfg.OnBatch != nil {
			w.cfg.OnBatch(BatchStats{Seq: d.b.Seq, Duration: d.took, Bytes: d.size, Records: len(d.b.Records)})
		}
		if len(d.g.parents) > 0 {
			w.traceBatch(d, applyStart, time.Now())
		}
		d.g.complete(d.b.Seq, nil)
	}
}

// attemptTimeout is the cut-off of one write of n bytes: AttemptTimeout,
// stretched in proportion for a batch above MaxBatchBytes (a record larger
// than the cap goes alone, up to MaxRecordBytes), so that every batch gets
// the same assumed minimum upload rate (MaxBatchBytes per AttemptTimeout)
// and the largest legal record is not cut off on a store that takes the
// capped batches in time (found in review: a 19 MiB record under a 2 s cut
// off needs 9.5 MiB/s). LogWriteLimit still bounds all attempts.
func (w *Writer) attemptTimeout(n int) time.Duration {
	d := w.cfg.AttemptTimeout
	if n > w.cfg.MaxBatchBytes && w.cfg.MaxBatchBytes > 0 {
		d = time.Duration(float64(d) * float64(n) / float64(w.cfg.MaxBatchBytes))
	}
	return min(d, LogWriteLimit)
}

// write stores data at seq create-if-absent (G1, L4), retrying transient
// errors with the same bytes until LogWriteLimit has passed since the first
// attempt (L10). A write that finds the key taken reads it back: its own
// bytes mean an earlier attempt landed (G5); a higher epoch means this
// writer is fenced (G4); anything else is a conflict or corruption.
func (w *Writer) write(ctx context.Context, seq uint64, data []byte) error {
	key := w.cfg.Layout.LogKey(seq)
	r := newRetrier(LogWriteLimit, w.attemptTimeout(len(data)), func(err error, wait time.Duration) {
		w.retries.Add(1)
		w.log.Warn("log write retry", "seq", seq, "key", key, "backoff", wait, "err", err)
	})
	err := r.do(ctx, func(ctx context.Context) error {
		_, err := w.cfg.Store.PutIfAbsent(ctx, key, data)
		return err
	})
	if errors.Is(err, blob.ErrPrecondition) {
		var got []byte
		err = r.do(ctx, func(ctx context.Context) error {
			var err error
			got, _, err = w.cfg.Store.Get(ctx, key)
			return err
		})
		if err == nil {
			return w.resolveTaken(key, seq, data, got)
		}
		if errors.Is(err, blob.ErrNotFound) {
			return fmt.Errorf("append batch %d: %w: %s was taken, then gone", seq, ErrLogConflict, key)
		}
	}
	switch {
	case err == nil:
		return nil
	case isDeadline(err):
		return fmt.Errorf("append batch %d: %w: %v: %w", seq, ErrLogWriteTimeout, LogWriteLimit, err)
	default:
		return fmt.Errorf("append batch %d: %w", seq, err)
	}
}

// resolveTaken decides what the batch found at a taken key means.
func (w *Writer) resolveTaken(key string, seq uint64, ours, got []byte) error {
	if bytes.Equal(ours, got) {
		w.adopted.Add(1)
		w.log.Info("log write found landed", "seq", seq, "key", key)
		return nil
	}
	b, err := DecodeAt(key, seq, got)
	switch {
	case err != nil:
		return fmt.Errorf("append batch %d: %w", seq, err)
	case b.Epoch > w.cfg.Epoch:
		return fmt.Errorf("append batch %d: %w: %s holds a %s batch of epoch %d, ours is %d", seq, ErrFenced, key, b.Kind, b.Epoch, w.cfg.Epoch)
	default:
		return fmt.Errorf("append batch %d: %w: %s holds a %s batch of epoch %d, ours is %d", seq, ErrLogConflict, key, b.Kind, b.Epoch, w.cfg.Epoch)
	}
}

// fail records a fatal error and fails everything pending.
func (w *Writer) fail(inflight *group, err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	w.log.Error("log writer stopped", "err", err)
	w.stop(inflight, err)
}

// stop closes the writer and fails inflight and every queued group with err.
func (w *Writer) stop(inflight *group, err error) {
	w.mu.Lock()
	w.state = stateStopped
	w.stopErr = err
	q := w.queue
	w.queue = nil
	w.queued.Store(0)
	w.mu.Unlock()
	if inflight != nil {
		inflight.complete(0, err)
	}
	for _, g := range q {
		g.complete(0, err)
	}
}

// traceBatch records the write and the apply of batch d under each traced
// record's parent (WriterConfig.Tracer).
func (w *Writer) traceBatch(d durable, applyStart, applyEnd time.Time) {
	attrs := []attribute.KeyValue{
		attribute.String("dex.log.store", w.cfg.StoreName),
		attribute.Int64("dex.log.seq", int64(d.b.Seq)),     //nolint:gosec // sequence numbers stay far below 2^63
		attribute.Int64("dex.log.epoch", int64(d.b.Epoch)), //nolint:gosec // epochs stay far below 2^63
		attribute.Int("dex.log.bytes", d.size),
		attribute.Int("dex.log.records", len(d.b.Records)),
	}
	for _, p := range d.g.parents {
		ctx := trace.ContextWithSpanContext(context.Background(), p)
		_, s := w.cfg.Tracer.Start(ctx, "dex.log.append", trace.WithTimestamp(d.start),
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		s.End(trace.WithTimestamp(d.start.Add(d.took)))
		_, s = w.cfg.Tracer.Start(ctx, "dex.log.apply", trace.WithTimestamp(applyStart), trace.WithAttributes(attrs[1:3]...))
		s.End(trace.WithTimestamp(applyEnd))
	}
}
