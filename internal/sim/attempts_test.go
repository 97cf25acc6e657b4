package sim

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/wal"
)

// inRun is a record body of run (other than "r").
type inRun struct {
	run string
	engine.RecordBody
}

// batch encodes recs as one batch of epoch, one envelope per record (the
// serving envelope: version 1, a uvarint count, each record's uvarint
// length and bytes), of flow "f" and run "r" unless inRun says.
func batch(t *testing.T, seq, epoch uint64, bodies ...engine.RecordBody) wal.Batch {
	t.Helper()
	b := wal.Batch{Seq: seq, Epoch: epoch, Kind: wal.KindRecords}
	for _, body := range bodies {
		run := "r"
		if r, ok := body.(inRun); ok {
			run, body = r.run, r.RecordBody
		}
		data, err := engine.MarshalRecord(engine.Record{FlowID: "f", RunID: run, At: time.Unix(0, 0), Body: body})
		if err != nil {
			t.Fatal(err)
		}
		env := binary.AppendUvarint([]byte{1}, 1)
		env = binary.AppendUvarint(env, uint64(len(data)))
		b.Records = append(b.Records, append(env, data...))
	}
	return b
}

// The superseded-attempt check refuses a result committed for an attempt
// that is not current, not handed out, handed out by another epoch, or
// already ended, or for a closed run, and accepts the regular sequence,
// also across a continue-as-new that carries the attempt and a reset to
// a step's Execute (E37).
//
// Covers: E37
func TestCheckAttempts(t *testing.T) {
	sched := func(n int) engine.RecordBody {
		return engine.AttemptScheduled{StepExecID: "A-1", Method: engine.MethodExecute, Attempt: n}
	}
	start := func(n int, epoch uint64) engine.RecordBody {
		return engine.AttemptStarted{StepExecID: "A-1", Method: engine.MethodExecute, Attempt: n, Epoch: epoch}
	}
	done := func(n int) engine.RecordBody {
		return engine.ExecuteCompleted{StepExecID: "A-1", Attempt: n, Kind: engine.DecideGracefulComplete}
	}
	failed := func(n int) engine.RecordBody {
		return engine.AttemptFailed{StepExecID: "A-1", Method: engine.MethodExecute, Attempt: n}
	}
	for _, c := range []struct {
		name    string
		batches func() []wal.Batch
		want    string
	}{
		{"regular", func() []wal.Batch {
			return []wal.Batch{batch(t, 0, 1, sched(1), start(1, 1)), batch(t, 1, 1, failed(1), sched(2)),
				batch(t, 2, 2, start(2, 2)), batch(t, 3, 2, done(2))}
		}, ""},
		{"older attempt", func() []wal.Batch {
			return []wal.Batch{batch(t, 0, 1, sched(1), start(1, 1), failed(1), sched(2), start(2, 1), done(1))}
		}, "the current attempt is"},
		{"other epoch", func() []wal.Batch {
			return []wal.Batch{batch(t, 0, 1, sched(1), start(1, 1)), batch(t, 1, 2, done(1))}
		}, "handed out in epoch 1 committed in epoch 2"},
		{"never handed out", func() []wal.Batch {
			return []wal.Batch{batch(t, 0, 1, sched(1), done(1))}
		}, "never handed out"},
		{"waitFor retried for a step without one", func() []wal.Batch {
			wf := engine.MethodWaitFor
			return []wal.Batch{batch(t, 0, 1,
				engine.StepCreated{StepExecID: "A-1", StepType: "A", N: 1, HasWaitFor: true},
				engine.AttemptScheduled{StepExecID: "A-1", Method: wf, Attempt: 1},
				engine.AttemptStarted{StepExecID: "A-1", Method: wf, Attempt: 1, Epoch: 1},
				engine.DefinitionSet{Steps: []engine.StepRedefined{{StepExecID: "A-1"}}},
				engine.AttemptFailed{StepExecID: "A-1", Method: wf, Attempt: 1},
				engine.AttemptScheduled{StepExecID: "A-1", Method: wf, Attempt: 2})}
		}, "waitFor attempt 2 scheduled for a step without WaitFor"},
		{"carried by a continue-as-new", func() []wal.Batch {
			return []wal.Batch{batch(t, 0, 1, sched(1), start(1, 1)),
				batch(t, 1, 1, engine.FlowContinuedAsNew{NewRunID: "r2", Trigger: engine.ContinueClient},
					inRun{"r2", engine.FlowStarted{FlowType: "t", ContinuedFrom: "r"}}),
				batch(t, 2, 1, inRun{"r2", done(1)})}
		}, ""},
		{"result of the continued run", func() []wal.Batch {
			return []wal.Batch{batch(t, 0, 1, sched(1), start(1, 1)),
				batch(t, 1, 1, engine.FlowContinuedAsNew{NewRunID: "r2", Trigger: engine.ContinueClient},
					inRun{"r2", engine.FlowStarted{FlowType: "t", ContinuedFrom: "r"}}),
				batch(t, 2, 1, done(1))}
		}, "the current attempt is <nil>"},
		{"reset to the Execute", func() []wal.Batch {
			return []wal.Batch{batch(t, 0, 1, engine.StepCreated{StepExecID: "A-1", StepType: "A", N: 1, HasWaitFor: true},
				engine.WaitForCompleted{StepExecID: "A-1"}, sched(1), start(1, 1), done(1))}
		}, ""},
		{"WaitFor completed without an attempt", func() []wal.Batch {
			return []wal.Batch{batch(t, 0, 1, engine.StepCreated{StepExecID: "A-1", StepType: "A", N: 1, HasWaitFor: true},
				sched(1), engine.WaitForCompleted{StepExecID: "A-1"})}
		}, "result of waitFor attempt 0"},
		{"closed run", func() []wal.Batch {
			return []wal.Batch{batch(t, 0, 1, sched(1), start(1, 1)),
				batch(t, 1, 1, engine.FlowClosed{CloseInfo: engine.CloseInfo{Status: engine.StatusTerminated}}), batch(t, 2, 1, done(1))}
		}, "the current attempt is"},
		{"twice", func() []wal.Batch {
			return []wal.Batch{batch(t, 0, 1, sched(1), start(1, 1), done(1)), batch(t, 1, 1, done(1))}
		}, "the current attempt is"},
	} {
		err := checkAttempts(c.batches())
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
