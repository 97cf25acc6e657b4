package sim

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/lease"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// monitor checks continuously, every 10 ms of virtual time, that at most
// one process counts its lease valid (its own view: Holder.Valid), and
// that no process serves on an epoch below one that another process holds
// validly.
func (s *sim) monitor(ctx context.Context) {
	for lease.Sleep(ctx, 10*time.Millisecond) {
		var valid []string
		for _, p := range s.procs {
			if e := p.validLease(); e != 0 {
				valid = append(valid, fmt.Sprintf("p%d (epoch %d)", p.id, e))
			}
		}
		if len(valid) > 1 {
			s.fail("%d processes hold a valid lease at once: %s", len(valid), strings.Join(valid, ", "))
			return
		}
	}
}

// check runs the end-of-run invariants over the durable store and the
// processes' local stores.
func (s *sim) check(ctx context.Context) error {
	batches, err := s.readLog(ctx)
	if err != nil {
		return err
	}
	if err := checkAttempts(batches); err != nil {
		return fmt.Errorf("superseded attempt: %w", err)
	}
	// Replay equals live: each process's local store equals the log,
	// replayed from scratch up to the batch the process applied. One
	// replay, compared with each process as it passes its position.
	type at struct {
		p   *proc
		seq uint64
	}
	var marks []at
	for _, p := range s.procs {
		if seq, ok := p.local.Applied(); ok {
			if seq >= uint64(len(batches)) {
				return fmt.Errorf("p%d applied batch %d, the log ends at %d", p.id, seq, len(batches)-1)
			}
			marks = append(marks, at{p, seq})
		}
	}
	slices.SortFunc(marks, func(a, b at) int { return cmp.Compare(a.seq, b.seq) })
	full := flowstore.NewMemStore()
	apply := serving.ReplayApply(full)
	for _, b := range batches {
		if err := apply(b); err != nil {
			return fmt.Errorf("replay batch %d: %w", b.Seq, err)
		}
		for len(marks) > 0 && marks[0].seq == b.Seq {
			if err := sameStates(full, marks[0].p.local); err != nil {
				return fmt.Errorf("p%d's local store (applied %d) differs from the log replayed from scratch: %w", marks[0].p.id, b.Seq, err)
			}
			marks = marks[1:]
		}
	}
	// What a restore reads (snapshot and log tail) is the whole history.
	rest, err := s.restored(ctx)
	if err != nil {
		return err
	}
	if a, _ := rest.Applied(); a != batches[len(batches)-1].Seq {
		return fmt.Errorf("a restore reaches batch %d, the log's last batch is %d", a, batches[len(batches)-1].Seq)
	}
	if err := sameStates(full, rest); err != nil {
		return fmt.Errorf("the newest snapshot and the log after it differ from the whole log replayed: %w", err)
	}
	if err := s.checkFlows(rest); err != nil {
		return err
	}
	s.ledger.mu.Lock()
	defer s.ledger.mu.Unlock()
	return s.hist.check(s.ledger.started, s.start)
}

// readLog returns every batch that ever landed in the log (the archive:
// truncation deleted some since) and checks that they are gap-free from
// 0 and that epochs never go down along them: no batch of an epoch
// follows a batch of a higher one.
func (s *sim) readLog(context.Context) ([]wal.Batch, error) {
	s.blobs.mu.Lock()
	defer s.blobs.mu.Unlock()
	seqs := slices.Sorted(maps.Keys(s.blobs.batches))
	var out []wal.Batch
	var epoch uint64
	for i, seq := range seqs {
		if seq != uint64(i) {
			return nil, fmt.Errorf("log gap: batch %d was never written, batch %d was", i, seq)
		}
		b, err := wal.DecodeAt(s.layout.LogKey(seq), seq, s.blobs.batches[seq])
		if err != nil {
			return nil, err
		}
		if b.Epoch < epoch {
			return nil, fmt.Errorf("batch %d has epoch %d after a batch of epoch %d", seq, b.Epoch, epoch)
		}
		epoch = b.Epoch
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, errors.New("the log is empty")
	}
	return out, nil
}

// restored is what a process restoring the node now would have: the
// newest snapshot and the log from its nextSeq up to the first missing
// batch. Nothing may follow that gap in the store.
func (s *sim) restored(ctx context.Context) (*localStore, error) {
	store, ok, err := loadLatest(ctx, s.blobs, s.layout)
	if err != nil {
		return nil, err
	}
	if !ok {
		store = newLocalStore()
	}
	var seq uint64
	if a, ok := store.Applied(); ok {
		seq = a + 1
	}
	apply := serving.ReplayApply(store)
	for ; ; seq++ {
		b, _, err := wal.ReadBatch(ctx, s.blobs, s.layout, seq)
		if errors.Is(err, blob.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := apply(b); err != nil {
			return nil, fmt.Errorf("restore: apply batch %d: %w", seq, err)
		}
	}
	for _, k := range s.blobs.Keys() {
		if n, ok := s.layout.ParseLogKey(k); ok && n > seq {
			return nil, fmt.Errorf("log gap: batch %d is missing, batch %d exists", seq, n)
		}
	}
	return store, nil
}

// encodedStore is a store that hands out its runs encoded
// (flowstore.MemStore, which the local stores embed).
type encodedStore interface {
	flowstore.Store
	EncodedRuns() (runs map[string]map[string][]byte, latest map[string]string)
}

// runIDs lists every run a store holds, by flow ID (sorted), with the
// latest run of each.
func runIDs(store encodedStore) (runs map[string][]string, latest map[string]string) {
	enc, latest := store.EncodedRuns()
	runs = map[string][]string{}
	for id, rs := range enc {
		runs[id] = slices.Sorted(maps.Keys(rs))
	}
	return runs, latest
}

// sameStates compares every run's state in its encoding
// (engine.MarshalState), and which run is each flow's latest.
func sameStates(want, got encodedStore) error {
	wantRuns, wantLatest := want.EncodedRuns()
	gotRuns, gotLatest := got.EncodedRuns()
	ids := func(m map[string]map[string][]byte) map[string][]string {
		out := map[string][]string{}
		for id, rs := range m {
			out[id] = slices.Sorted(maps.Keys(rs))
		}
		return out
	}
	if w, g := ids(wantRuns), ids(gotRuns); !maps.EqualFunc(w, g, slices.Equal) {
		return fmt.Errorf("runs %v, want %v", g, w)
	}
	if !maps.Equal(wantLatest, gotLatest) {
		return fmt.Errorf("latest runs %v, want %v", gotLatest, wantLatest)
	}
	for _, id := range slices.Sorted(maps.Keys(wantRuns)) {
		for _, run := range slices.Sorted(maps.Keys(wantRuns[id])) {
			if bytes.Equal(wantRuns[id][run], gotRuns[id][run]) {
				continue
			}
			// Stored bytes differ: compare them decoded and encoded again
			// (a snapshot restore encodes what it decoded).
			wb, gb, err := reencode(wantRuns[id][run], gotRuns[id][run])
			if err != nil {
				return fmt.Errorf("flow %s run %s: %w", id, run, err)
			}
			if !bytes.Equal(wb, gb) {
				w, _ := engine.UnmarshalState(wb)
				g, _ := engine.UnmarshalState(gb)
				return fmt.Errorf("flow %s run %s: live state (%s, %d bytes) differs from the replayed one (%s, %d bytes):\nlive:     %.400q\nreplayed: %.400q",
					id, run, g.Status, len(gb), w.Status, len(wb), gb, wb)
			}
		}
	}
	return nil
}

// reencode decodes two encoded states and encodes them again.
func reencode(a, b []byte) ([]byte, []byte, error) {
	var out [2][]byte
	for i, raw := range [][]byte{a, b} {
		st, err := engine.UnmarshalState(raw)
		if err != nil {
			return nil, nil, err
		}
		if out[i], err = engine.MarshalState(st); err != nil {
			return nil, nil, err
		}
	}
	return out[0], out[1], nil
}

// checkFlows checks the final state (the log replayed from scratch)
// against the ledger: every acknowledged start, publish and result is in
// it, and every flow completed exactly once with the expected outputs.
func (s *sim) checkFlows(final encodedStore) error {
	s.ledger.mu.Lock()
	defer s.ledger.mu.Unlock()
	for id, typ := range s.ledger.started {
		st, err := s.flowWithValues(final, id)
		if err != nil {
			return fmt.Errorf("acknowledged start of %s: %w", id, err)
		}
		if st == nil {
			return fmt.Errorf("acknowledged start of %s lost: the flow is not in the final state", id)
		}
		want := engine.StatusCompleted
		if typ == "stop" {
			// Nothing but the client's stop ends a stop flow (its step
			// waits for a message nobody sends); a retry of a stop whose
			// reply got lost is not acknowledged, so the status says which
			// kind landed.
			want = engine.StatusCanceled
			if hash(s.cfg.Seed, id, 2)%2 == 1 {
				want = engine.StatusTerminated
			}
			if a, ok := s.ledger.stopped[id]; ok && (a.kind == engine.StopTerminate) != (want == engine.StatusTerminated) {
				return fmt.Errorf("flow %s: acknowledged stop %s, the ledger's kind differs from the seed's", id, a.kind)
			}
			if n := len(st.History); n == 0 || st.History[n-1].Type != engine.EventFlowClosed {
				return fmt.Errorf("flow %s: history does not end with its close: %+v", id, st.History[max(0, n-1):])
			}
		}
		if st.Status != want {
			return fmt.Errorf("flow %s is %s, want %s", id, st.Status, want)
		}
		for name, v := range s.ledger.attrs[id] {
			got, ok := st.Attributes[name]
			if !ok || got.Type != v.Type || !bytes.Equal(got.Data, v.Data) {
				return fmt.Errorf("flow %s: acknowledged attribute %s=%s is %s in the final state (present: %v)", id, name, v.Data, got.Data, ok)
			}
		}
		outs := wantOutputs(typ, id)
		if len(st.Outputs) != len(outs) {
			return fmt.Errorf("flow %s completed with %d outputs, want %d: %+v", id, len(st.Outputs), len(outs), st.Outputs)
		}
		for _, o := range st.Outputs {
			w, ok := outs[o.StepType]
			if !ok || w.Type != o.Value.Type || !bytes.Equal(w.Data, o.Value.Data) {
				return fmt.Errorf("flow %s: output of %s is %s %s, want %s %s", id, o.StepType, o.Value.Type, o.Value.Data, w.Type, w.Data)
			}
			delete(outs, o.StepType) // each step type completes once
		}
		for step, n := range wantCounters[typ] {
			if st.StepCounters[step] != n {
				return fmt.Errorf("flow %s ran %d executions of %s, want %d (a result committed twice?)", id, st.StepCounters[step], step, n)
			}
		}
	}
	for id := range s.ledger.published {
		if _, ok := s.ledger.started[id]; !ok {
			return fmt.Errorf("publish to %s acknowledged before its start", id)
		}
		// The wait flow's output is the message: checked above.
	}
	for id, byRun := range s.ledger.results {
		for run, execs := range byRun {
			if err := s.checkResults(final, id, run, execs); err != nil {
				return err
			}
		}
	}
	return s.checkChains(final)
}

// checkResults checks the accepted Execute results of run of flow id: they
// are in the run, or in the run its continuations (E37) end with, which
// carries its steps, counters and outputs (and takes the result of an
// attempt carried there running).
func (s *sim) checkResults(final flowstore.Store, id, tokenRun string, execs map[string]engine.Decision) error {
	var st *engine.FlowState
	for run := tokenRun; run != ""; run = st.ContinuedRunID() {
		var err error
		if st, err = final.Run(id, run); err != nil {
			return fmt.Errorf("flow %s run %s of an accepted result: %w", id, run, err)
		}
		if st == nil {
			return fmt.Errorf("flow %s run %s of an accepted result is lost", id, run)
		}
	}
	st, err := serving.WithValueBytes(context.Background(), &wal.Values{Store: s.blobs, Layout: s.layout}, st)
	if err != nil {
		return fmt.Errorf("flow %s run %s of an accepted result: %w", id, tokenRun, err)
	}
	for exec, d := range execs {
		typ := exec[:max(0, strings.LastIndexByte(exec, '-'))]
		switch d.Kind {
		case engine.DecideMovements:
			for _, m := range d.Movements {
				if st.StepCounters[m.StepType] < 1 {
					return fmt.Errorf("accepted result of %s/%s (run %s) moved to %s, which never ran (run %s)", id, exec, tokenRun, m.StepType, st.RunID)
				}
			}
		case engine.DecideGracefulComplete:
			if !slices.ContainsFunc(st.Outputs, func(o engine.Output) bool {
				return o.StepExecID == exec && bytes.Equal(o.Value.Data, d.Output.Data)
			}) {
				return fmt.Errorf("accepted result of %s/%s (%s) of run %s completed with %s, not in the outputs of run %s %+v",
					id, exec, typ, tokenRun, d.Output.Data, st.RunID, st.Outputs)
			}
		}
	}
	return nil
}

// flowWithValues reads a flow from the final state with the bytes of its
// value objects, read from the durable store the processes wrote them to.
func (s *sim) flowWithValues(final flowstore.Store, id string) (*engine.FlowState, error) {
	st, err := final.Flow(id)
	if err != nil || st == nil {
		return st, err
	}
	return serving.WithValueBytes(context.Background(), &wal.Values{Store: s.blobs, Layout: s.layout}, st)
}
