package wal

import (
	"context"

	"github.com/dexzd/dexzd/internal/blob"
)

// ReplayReadAhead is how many batches a replay (Fence) reads ahead of the
// one it applies. A takeover replays one GET per batch; with the requests
// in flight together its time is bounded by the store's throughput rather
// than its round trip (a cold standby on object storage replays thousands
// of batches).
const ReplayReadAhead = 16

// prefetcher reads the batches from a sequence number on with up to
// window reads in flight, and hands them out in order. Batches are written
// create-if-absent and never change, so a batch read early is the batch;
// a miss read early is only used for the position it was asked for, and
// asking again for a position restarts the reads there (see get).
type prefetcher struct {
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
	store  blob.Store
	layout Layout
	window int
	next   uint64 // the next sequence number to start reading
	queue  []chan fetched
	first  uint64 // the sequence number of queue[0]
}

type fetched struct {
	b   Batch
	err error
}

func newPrefetcher(ctx context.Context, store blob.Store, layout Layout, window int) *prefetcher {
	p := &prefetcher{parent: ctx, store: store, layout: layout, window: max(1, window)}
	p.ctx, p.cancel = context.WithCancel(ctx)
	return p
}

// get returns batch seq as readBatchRetry would. Asking for the sequence
// number that was handed out last (after a miss, once a write there was
// lost) or any other out of order position drops what was read ahead and
// reads from seq anew.
func (p *prefetcher) get(seq uint64) (Batch, error) {
	if len(p.queue) == 0 || p.first != seq {
		p.reset(seq)
	}
	for len(p.queue) < p.window {
		ch := make(chan fetched, 1)
		// The read uses the context of its own round: reset replaces
		// p.ctx while reads of the round before may still run.
		ctx, s := p.ctx, p.next
		go func() {
			b, err := readBatchRetry(ctx, p.store, p.layout, s)
			ch <- fetched{b, err}
		}()
		p.queue = append(p.queue, ch)
		p.next++
	}
	f := <-p.queue[0]
	p.queue = p.queue[1:]
	p.first++
	return f.b, f.err
}

// reset drops the reads in flight and starts again at seq.
func (p *prefetcher) reset(seq uint64) {
	p.cancel()
	p.ctx, p.cancel = context.WithCancel(p.parent)
	p.queue = p.queue[:0]
	p.first, p.next = seq, seq
}

// close ends the reads in flight.
func (p *prefetcher) close() { p.cancel() }
