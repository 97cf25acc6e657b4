package sim

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// checkChains checks each flow's runs in the final state (E37): from the
// run its acknowledged start answered, the forward links (a reset's
// ResetRunID, a continuation's ContinuedRunID) reach every run of the
// flow ID, once each, and end at its latest run, the one the client's
// WaitForFlow answered; each link's new run links back (PreviousRunID,
// and the reset's or continuation's own back link in its FLOW_STARTED);
// the reset links are the resets the client saw land, in order, one new
// run each; the continuations triggered by a client's call are those
// the client saw land, once each; and a continuation's new run holds
// what its run carried over (attributes, outputs, counters, none
// lost). The caller holds the ledger's lock.
func (s *sim) checkChains(final encodedStore) error {
	runs, latest := runIDs(final)
	for _, id := range slices.Sorted(maps.Keys(s.ledger.started)) {
		if err := s.checkChain(final, id, runs[id], latest[id]); err != nil {
			return fmt.Errorf("flow %s (%s): %w", id, s.ledger.started[id], err)
		}
	}
	return nil
}

func (s *sim) checkChain(final flowstore.Store, id string, runs []string, latest string) error {
	resets := s.ledger.resets[id]
	asked := map[string]continueAck{} // by run
	for _, a := range s.ledger.continues[id] {
		if _, ok := asked[a.run]; ok {
			return fmt.Errorf("two client continue-as-new calls landed on run %s", a.run)
		}
		asked[a.run] = a
	}
	seen := map[string]bool{}
	var chain []string
	nResets, nContinued := 0, 0
	run := s.ledger.firstRun[id]
	for {
		if seen[run] {
			return fmt.Errorf("the runs' links loop: %v -> %s", chain, run)
		}
		seen[run] = true
		chain = append(chain, run)
		st, err := final.Run(id, run)
		if err != nil {
			return err
		}
		if st == nil {
			if len(chain) == 1 {
				return fmt.Errorf("the run %s its acknowledged start answered is lost", run)
			}
			return fmt.Errorf("run %s is lost: run %s links to it", run, chain[len(chain)-2])
		}
		next := st.NextRunID()
		if next == "" {
			break
		}
		nst, err := final.Run(id, next)
		if err != nil {
			return err
		}
		if nst == nil {
			return fmt.Errorf("run %s is lost: run %s (%s) links to it", next, run, st.Status)
		}
		if nst.PreviousRunID != run {
			return fmt.Errorf("run %s follows run %s, but names run %s as its previous", next, run, nst.PreviousRunID)
		}
		var start *engine.StartInfo
		if len(nst.History) > 0 && nst.History[0].Type == engine.EventFlowStarted {
			start = nst.History[0].Start
		}
		switch {
		case st.ContinuedRunID() == next:
			nContinued++
			if st.Status != engine.StatusContinuedAsNew {
				return fmt.Errorf("run %s continued as run %s, but is %s", run, next, st.Status)
			}
			if start == nil || start.ContinuedFrom != run {
				return fmt.Errorf("run %s continues run %s, but its FLOW_STARTED does not say so: %+v", next, run, start)
			}
			trigger := st.Opts.Continued.Trigger
			s.count("continued as new: " + string(trigger))
			if trigger == engine.ContinueClient {
				a, ok := asked[run]
				if !ok || !continuedBy(st, a.reason) {
					return fmt.Errorf("run %s continued as new on a client's call the client did not see land (%q; the client's: %+v)", run, st.Close.Message, a)
				}
				delete(asked, run)
			}
			if err := s.carried(st, nst); err != nil {
				return fmt.Errorf("continue-as-new of run %s as run %s: %w", run, next, err)
			}
		case st.ResetRunID() == next:
			if st.Status != engine.StatusCompleted && st.Status != engine.StatusTerminated {
				return fmt.Errorf("run %s was reset as run %s, and is %s", run, next, st.Status)
			}
			if start == nil || start.Reset == nil || start.Reset.ResetRunID != run {
				return fmt.Errorf("run %s is run %s's reset, but its FLOW_STARTED does not say so: %+v", next, run, start)
			}
			if nResets >= len(resets) {
				return fmt.Errorf("run %s was reset as run %s, a reset its client did not see land (it saw %d: %+v)", run, next, len(resets), resets)
			}
			if a := resets[nResets]; a.from != run || a.to != next {
				return fmt.Errorf("run %s was reset as run %s; the client's reset %d was of run %s as run %s", run, next, nResets+1, a.from, a.to)
			}
			nResets++
		default:
			return fmt.Errorf("run %s (%s) was retried as run %s, which the workload never asks for", run, st.Status, next)
		}
		run = next
	}
	if run != latest {
		return fmt.Errorf("the links from run %s end at run %s, the latest run is %s (runs %v)", chain[0], run, latest, chain)
	}
	if len(chain) != len(runs) {
		var lost []string
		for _, r := range runs {
			if !seen[r] {
				lost = append(lost, r)
			}
		}
		return fmt.Errorf("no link from run %s reaches runs %v (links %v): a reset or continuation that made a second run?", chain[0], lost, chain)
	}
	if nResets != len(resets) {
		return fmt.Errorf("the client's resets %+v left %d new runs in the links %v", resets, nResets, chain)
	}
	if len(asked) > 0 {
		return fmt.Errorf("the client's continue-as-new calls %+v left no continuation (links %v)", asked, chain)
	}
	if w, ok := s.ledger.waited[id]; ok && w != latest {
		return fmt.Errorf("the client's WaitForFlow answered run %s, the latest run is %s", w, latest)
	}
	if s.ledger.started[id] == "count" && nContinued == 0 {
		return fmt.Errorf("a count flow never continued as new (its history passes the limit): runs %v", chain)
	}
	s.count(fmt.Sprintf("runs of a %s flow: %d", s.ledger.started[id], len(chain)))
	return nil
}

// carried checks that continuation next still holds what run st carried
// over (E37): its attributes (each written by one writer, with one
// value), its outputs and its step counters. Later changes only add.
func (s *sim) carried(st, next *engine.FlowState) error {
	vals := &wal.Values{Store: s.blobs, Layout: s.layout}
	st, err := serving.WithValueBytes(context.Background(), vals, st)
	if err != nil {
		return err
	}
	next, err = serving.WithValueBytes(context.Background(), vals, next)
	if err != nil {
		return err
	}
	for name, v := range st.Attributes {
		if got, ok := next.Attributes[name]; !ok || got.Type != v.Type || !bytes.Equal(got.Data, v.Data) {
			return fmt.Errorf("attribute %s=%s is %s in the new run (present: %v)", name, v.Data, got.Data, ok)
		}
	}
	for i, o := range st.Outputs {
		if i >= len(next.Outputs) || next.Outputs[i].StepExecID != o.StepExecID || !bytes.Equal(next.Outputs[i].Value.Data, o.Value.Data) {
			return fmt.Errorf("output %d (%s) is not the new run's: %+v", i, o.StepExecID, next.Outputs)
		}
	}
	for typ, n := range st.StepCounters {
		if next.StepCounters[typ] < n {
			return fmt.Errorf("step counter %s is %d in the new run, %d in the old", typ, next.StepCounters[typ], n)
		}
	}
	return nil
}
