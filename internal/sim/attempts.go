package sim

import (
	"fmt"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// checkAttempts reads the whole log's records in order and checks that no
// result of a superseded attempt is committed: a WaitFor or Execute result
// (WaitForCompleted, ExecuteCompleted) commits only for its step's current
// attempt of that method, once, after that attempt was handed out
// (AttemptStarted), and in a batch of the epoch that handed it out (a
// result carries the token of its attempt and epoch; a retry, a takeover
// or a timeout supersedes it). An attempt is handed out in the epoch that
// writes its start, and fails (AttemptFailed) only while it is the
// current one; a closed run's attempts take none, a continue-as-new
// carries a run's attempts to its new run, a reset to a step's Execute
// completes its WaitFor before any attempt (E37). No WaitFor attempt is scheduled for a step without WaitFor
// (E4: one handed out before the run's first definition said so is left
// to its worker, and goes to Execute if it fails).
func checkAttempts(batches []wal.Batch) error {
	type attempt struct {
		method  engine.Method
		number  int
		started bool
		epoch   uint64
		ended   bool
	}
	type key struct{ flow, run, step string }
	cur := map[key]*attempt{}
	// hasWaitFor: the step has a WaitFor (StepCreated, changed by the
	// run's first DefinitionSet).
	hasWaitFor := map[key]bool{}
	// fresh: the step was created and has had no attempt yet; a reset to
	// its Execute (E37: BeforeExecute) completes its WaitFor with the
	// old run's wait and no attempt (attempt 0).
	fresh := map[key]bool{}
	for _, b := range batches {
		var recs []engine.Record
		for i, raw := range b.Records {
			rs, err := serving.DecodeRecords(raw)
			if err != nil {
				return fmt.Errorf("batch %d record %d: %w", b.Seq, i, err)
			}
			recs = append(recs, rs...)
		}
		for i, rec := range recs {
			where := func(step string) string {
				return fmt.Sprintf("batch %d (epoch %d) record %d, %s/%s %s", b.Seq, b.Epoch, i, rec.FlowID, step, rec.RunID)
			}
			get := func(step string, m engine.Method, n int, what string) (*attempt, error) {
				a := cur[key{rec.FlowID, rec.RunID, step}]
				if a == nil || a.ended || a.method != m || a.number != n {
					return nil, fmt.Errorf("%s: %s of %s attempt %d, the current attempt is %+v", where(step), what, m, n, a)
				}
				return a, nil
			}
			complete := func(step string, m engine.Method, n int, what string) error {
				a, err := get(step, m, n, what)
				if err != nil {
					return err
				}
				if !a.started {
					return fmt.Errorf("%s: %s of %s attempt %d, which was never handed out", where(step), what, m, n)
				}
				if a.epoch != b.Epoch {
					return fmt.Errorf("%s: %s of %s attempt %d handed out in epoch %d committed in epoch %d", where(step), what, m, n, a.epoch, b.Epoch)
				}
				a.ended = true
				return nil
			}
			switch r := rec.Body.(type) {
			case engine.FlowStarted:
				if r.ContinuedFrom == "" {
					break
				}
				// A continuation carries its run's attempts as they stand
				// (E37): a running one keeps its token and commits here;
				// the old run, closed, takes none.
				for k, a := range cur {
					if k.flow == rec.FlowID && k.run == r.ContinuedFrom {
						moved := *a
						cur[key{rec.FlowID, rec.RunID, k.step}] = &moved
						delete(cur, k)
					}
				}
				for k, w := range hasWaitFor {
					if k.flow == rec.FlowID && k.run == r.ContinuedFrom {
						hasWaitFor[key{rec.FlowID, rec.RunID, k.step}] = w
					}
				}
			case engine.FlowClosed:
				// A closed run takes no result.
				for k, a := range cur {
					if k.flow == rec.FlowID && k.run == rec.RunID {
						a.ended = true
					}
				}
			case engine.StepCreated:
				hasWaitFor[key{rec.FlowID, rec.RunID, r.StepExecID}] = r.HasWaitFor
				fresh[key{rec.FlowID, rec.RunID, r.StepExecID}] = true
			case engine.DefinitionSet:
				for _, sr := range r.Steps {
					hasWaitFor[key{rec.FlowID, rec.RunID, sr.StepExecID}] = sr.HasWaitFor
				}
			case engine.AttemptScheduled:
				k := key{rec.FlowID, rec.RunID, r.StepExecID}
				if r.Method == engine.MethodWaitFor && !hasWaitFor[k] {
					// Only an attempt handed out before the definition
					// arrived may be a WaitFor the step does not have (E4).
					return fmt.Errorf("%s: waitFor attempt %d scheduled for a step without WaitFor", where(r.StepExecID), r.Attempt)
				}
				cur[k] = &attempt{method: r.Method, number: r.Attempt}
				delete(fresh, k)
			case engine.AttemptStarted:
				a, err := get(r.StepExecID, r.Method, r.Attempt, "start")
				if err != nil {
					return err
				}
				if a.started {
					return fmt.Errorf("%s: %s attempt %d started twice (epochs %d and %d)", where(r.StepExecID), r.Method, r.Attempt, a.epoch, r.Epoch)
				}
				if r.Epoch != b.Epoch {
					return fmt.Errorf("%s: %s attempt %d started with epoch %d in a batch of epoch %d", where(r.StepExecID), r.Method, r.Attempt, r.Epoch, b.Epoch)
				}
				a.started, a.epoch = true, r.Epoch
			case engine.AttemptFailed:
				a, err := get(r.StepExecID, r.Method, r.Attempt, "failure")
				if err != nil {
					return err
				}
				a.ended = true
			case engine.WaitForCompleted:
				if k := (key{rec.FlowID, rec.RunID, r.StepExecID}); r.Attempt == 0 && fresh[k] {
					delete(fresh, k) // a reset's, before any attempt
					break
				}
				if err := complete(r.StepExecID, engine.MethodWaitFor, r.Attempt, "result"); err != nil {
					return err
				}
			case engine.ExecuteCompleted:
				if err := complete(r.StepExecID, engine.MethodExecute, r.Attempt, "result"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
