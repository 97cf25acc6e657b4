package serving

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/wal"
)

// objectBytes is the value object threshold of these tests.
const objectBytes = 1 << 10

// newObjectHarness is newHarness with value objects of at least
// objectBytes on blobs; the local store is fresh, replayed from the log.
func newObjectHarness(t *testing.T, blobs *mem.Store, epoch uint64) *harness {
	t.Helper()
	return newHarnessConfig(t, blobs, epoch, func(c *CoreConfig) {
		c.Values, c.ValueObjectBytes = &wal.Values{Store: blobs, Layout: testLayout}, objectBytes
	})
}

func bigValue(fill byte, n int) engine.Value {
	return engine.Value{Type: "bin:pad", Data: bytes.Repeat([]byte{fill}, n)}
}

// logBytes sums the encoded size of the node's log batches.
func logBytes(t *testing.T, blobs *mem.Store) (total, largest int) {
	t.Helper()
	for _, k := range blobs.Keys() {
		if _, ok := testLayout.ParseLogKey(k); ok {
			data, _ := blobs.Raw(k)
			total += len(data)
			largest = max(largest, len(data))
		}
	}
	return total, largest
}

func valueObjectKeys(blobs *mem.Store) []string {
	var out []string
	for _, k := range blobs.Keys() {
		if strings.HasPrefix(k, testLayout.ValuePrefix()) {
			out = append(out, k)
		}
	}
	return out
}

// A flow whose start input, attribute, movement input, output and channel
// message are above the threshold: the log holds references only (a few
// KiB where the values are 300 KiB), every task and every read gets the
// bytes back, and a process that replays the log from scratch (a
// takeover, a restart on an empty disk) reads the same values.
//
// Covers: G3
func TestValueObjects_LargeValuesTravelBesideTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newObjectHarness(t, blobs, 1)
		ctx := context.Background()
		in, attr, out, msg := bigValue('i', 100<<10), bigValue('a', 60<<10), bigValue('o', 80<<10), bigValue('m', 70<<10)
		if _, err := h.core.StartFlow(ctx, engine.StartFlow{FlowID: "f", FlowType: "a", StartStep: "S", Input: in,
			Attributes: []engine.AttributeWrite{{Name: "x", Value: attr}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.core.Command(ctx, "f", engine.PublishToChannel{FlowID: "f", Messages: []engine.Publish{{Channel: "c", Value: msg}}}); err != nil {
			t.Fatal(err)
		}
		s := h.session("w", 4, "a")
		synctest.Wait()
		ts := tasks(s)
		if len(ts) != 1 || !bytes.Equal(ts[0].Input.Data, in.Data) || !bytes.Equal(ts[0].Attributes["x"].Data, attr.Data) {
			t.Fatalf("first task: %d tasks, input/attribute bytes not those started with", len(ts))
		}
		// S moves to S with the same input (one object, written once more
		// and found there), then completes with out.
		if a, err := s.Result(ctx, ts[0].Token, engine.ExecuteResult{Token: ts[0].Token, Decision: engine.Decision{
			Kind: engine.DecideMovements, Movements: []engine.Movement{{StepType: "S", Input: ts[0].Input}}}}); err != nil || a.Status != server.AckAccepted {
			t.Fatalf("first result: %+v, %v", a, err)
		}
		synctest.Wait()
		ts = tasks(s)
		if len(ts) != 1 || !bytes.Equal(ts[0].Input.Data, in.Data) {
			t.Fatalf("second task: %d tasks, or its input is not the moved one", len(ts))
		}
		if a, err := s.Result(ctx, ts[0].Token, engine.ExecuteResult{Token: ts[0].Token, Decision: engine.Decision{
			Kind: engine.DecideGracefulComplete, Output: out}}); err != nil || a.Status != server.AckAccepted {
			t.Fatalf("second result: %+v, %v", a, err)
		}
		if _, err := h.core.WaitForFlow(ctx, "f", ""); err != nil {
			t.Fatal(err)
		}
		st, err := h.core.Flow(ctx, "f", "")
		if err != nil {
			t.Fatal(err)
		}
		checkResolved(t, st, in, attr, out, msg)

		total, largest := logBytes(t, blobs)
		if largest > 4<<10 {
			t.Errorf("the largest log batch is %d bytes: the values went into the log", largest)
		}
		if keys := valueObjectKeys(blobs); len(keys) != 4 {
			t.Errorf("value objects %v, want 4 (input, attribute, message, output; the moved input is the same object)", keys)
		}
		t.Logf("log: %d bytes for 310 KiB of values", total)
		h.stop()

		// Another process replays the log into an empty store.
		h2 := newObjectHarness(t, blobs, 2)
		st2, err := h2.core.Flow(ctx, "f", "")
		if err != nil {
			t.Fatal(err)
		}
		checkResolved(t, st2, in, attr, out, msg)
		h2.stop()
	})
}

// checkResolved checks that st shows the test's values with their bytes:
// the attribute, the output, and in the history the start input, the
// message and the output.
func checkResolved(t *testing.T, st *engine.FlowState, in, attr, out, msg engine.Value) {
	t.Helper()
	if st.Status != engine.StatusCompleted {
		t.Fatalf("status %s", st.Status)
	}
	if got := st.Attributes["x"]; !bytes.Equal(got.Data, attr.Data) {
		t.Errorf("attribute: %d bytes, want %d", len(got.Data), len(attr.Data))
	}
	if len(st.Outputs) != 1 || !bytes.Equal(st.Outputs[0].Value.Data, out.Data) {
		t.Errorf("outputs: %+v", len(st.Outputs))
	}
	seen := map[string]bool{}
	_, _ = mapEngineValues(st.History, func(v engine.Value) (engine.Value, bool, error) {
		if v.Ref != "" && v.Data == nil {
			t.Errorf("a history value names object %s without its bytes", v.Ref)
		}
		seen[string(v.Data)] = true
		return v, false, nil
	})
	for name, v := range map[string]engine.Value{"input": in, "message": msg, "output": out} {
		if !seen[string(v.Data)] {
			t.Errorf("history lacks the %s's bytes", name)
		}
	}
}

// A value object's write lands but its reply is lost (and the retry finds
// the object): the start is accepted once, with one object. A value
// object that is damaged later is reported with its key, and the task
// that needs it is not sent: its attempt fails with ValueUnavailable.
//
// Covers: G3, G5
func TestValueObjects_LostReplyAndDamagedObject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		var lost atomic.Int32
		blobs.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent && strings.HasPrefix(key, testLayout.ValuePrefix()) && lost.Add(1) == 1 {
				return mem.Fault{Err: mem.ErrServer, Lands: true}
			}
			return mem.Fault{}
		})
		h := newObjectHarness(t, blobs, 1)
		ctx := context.Background()
		in := bigValue('i', 10<<10)
		if _, err := h.core.StartFlow(ctx, engine.StartFlow{FlowID: "f", FlowType: "a", StartStep: "S", Input: in}); err != nil {
			t.Fatal(err)
		}
		keys := valueObjectKeys(blobs)
		if len(keys) != 1 || lost.Load() < 2 {
			t.Fatalf("objects %v after %d writes, want one object and a retried write", keys, lost.Load())
		}
		// Damage the object: reads report it with its key.
		blobs.SetRaw(keys[0], []byte("not the input"))
		_, err := h.core.Flow(ctx, "f", "")
		var ce *wal.CorruptError
		if !errors.As(err, &ce) || ce.Key != keys[0] || !errors.Is(err, server.ErrDataLoss) {
			t.Fatalf("Flow on a damaged object: %v, want DATA_LOSS: a corrupt object error naming %s", err, keys[0])
		}
		s := h.session("w", 4, "a")
		synctest.Wait()
		if ts := tasks(s); len(ts) != 0 {
			t.Fatalf("a task without its values was sent: %+v", ts)
		}
		synctest.Wait()
		st, err := h.core.flow("f", "")
		if err != nil {
			t.Fatal(err)
		}
		f := st.Steps[0].LastFailure
		if f == nil || f.Type != errValueUnavailable || !strings.Contains(f.Message, keys[0]) {
			t.Fatalf("the attempt's failure is %+v, want %s naming %s", f, errValueUnavailable, keys[0])
		}
		h.stop()
	})
}

// Without a value store, or below the threshold, values stay in the log
// as before (and no object is written).
func TestValueObjects_BelowTheThresholdStayInline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newObjectHarness(t, blobs, 1)
		in := bigValue('i', objectBytes-1)
		if _, err := h.core.StartFlow(context.Background(), engine.StartFlow{FlowID: "f", FlowType: "a", StartStep: "S", Input: in}); err != nil {
			t.Fatal(err)
		}
		if keys := valueObjectKeys(blobs); len(keys) != 0 {
			t.Fatalf("objects %v for a value below the threshold", keys)
		}
		if _, largest := logBytes(t, blobs); largest < objectBytes {
			t.Fatalf("largest batch %d bytes: the inline value is not in the log", largest)
		}
		h.stop()
	})
}

// The walk copies the containers on the path to a changed value and
// shares or leaves alone everything else; an interface (a record's body)
// and a map of values are walked like the rest.
func TestMapEngineValues_CopiesOnlyThePathToAChange(t *testing.T) {
	st := &engine.FlowState{FlowID: "f",
		Attributes: map[string]engine.Value{"a": {Type: "t", Data: []byte("a")}, "b": {Type: "t", Ref: "r", Size: 1}},
		Steps:      []*engine.StepExec{{ID: "1", Input: engine.Value{Type: "t", Data: []byte("in")}}}}
	out, err := mapEngineValues(st, func(v engine.Value) (engine.Value, bool, error) {
		if v.Ref == "" {
			return v, false, nil
		}
		v.Data = []byte("B")
		return v, true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Attributes["b"].Data != nil {
		t.Fatal("the walk modified its input")
	}
	if string(out.Attributes["b"].Data) != "B" || string(out.Attributes["a"].Data) != "a" {
		t.Fatalf("attributes %+v", out.Attributes)
	}
	if out.Steps[0] != st.Steps[0] {
		t.Error("an unchanged step was copied")
	}
	recs := []engine.Record{{FlowID: "f", Body: engine.FlowStarted{StartStep: &engine.Movement{StepType: "S",
		Input: engine.Value{Type: "t", Data: []byte("x"), Ref: "r", Size: 1}}}}}
	stripped := stripValueData(recs)
	if stripped[0].Body.(engine.FlowStarted).StartStep.Input.Data != nil || recs[0].Body.(engine.FlowStarted).StartStep.Input.Data == nil {
		t.Fatalf("strip: %+v, input left %+v", stripped[0].Body, recs[0].Body)
	}
	if !hasValueObjects(stripped) || hasValueObjects(engine.Task{Input: engine.Value{Data: []byte("x")}}) {
		t.Error("hasValueObjects")
	}
}

// A value object the store refuses for good (a full disk, a denied write)
// ends the lease period as a log write refused so does: the core tells
// CoreConfig.Fatal, and the call is answered UNAVAILABLE, nothing decided.
//
// Covers: L10
func TestValueObjects_PermanentStoreErrorIsFatal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newObjectHarness(t, blobs, 1)
		var fatal []error
		h.core.cfg.Fatal = func(err error) { fatal = append(fatal, err) }
		blobs.SetFaults(func(op, key string) mem.Fault {
			if strings.HasPrefix(key, testLayout.ValuePrefix()) {
				return mem.Fault{Err: blob.Permanent(op, key, mem.ErrDenied)}
			}
			return mem.Fault{}
		})
		_, err := h.core.StartFlow(context.Background(), engine.StartFlow{FlowID: "f", FlowType: "a", StartStep: "S",
			Input: bigValue('i', 4<<10)})
		if !errors.Is(err, server.ErrNotServing) || len(fatal) != 1 || blob.Classify(fatal[0]) != blob.ErrPermanent {
			t.Fatalf("start: %v; fatal: %v", err, fatal)
		}
		if st, _ := h.core.flow("f", ""); st != nil {
			t.Fatalf("the refused start was decided: %s", st.Status)
		}
		h.stop()
	})
}

// One object named many times in a state (a large input moved from step
// to step shows in every step's creation, every movement and the output,
// in the history too) is read once per read of the state, and its bytes
// are shared: a read of a long flow's state costs one store GET and one
// copy per distinct object, not one per place that names it.
func TestValueObjects_ReadOncePerObject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		var gets atomic.Int32
		blobs.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpGet && strings.HasPrefix(key, testLayout.ValuePrefix()) {
				gets.Add(1)
			}
			return mem.Fault{}
		})
		h := newObjectHarness(t, blobs, 1)
		ctx := context.Background()
		in := startBig(t, h)
		s := h.session("w", 4, "a")
		const moves = 5
		for i := 0; i <= moves; i++ {
			synctest.Wait()
			ts := tasks(s)
			if len(ts) != 1 {
				t.Fatalf("move %d: %d tasks", i, len(ts))
			}
			dec := engine.Decision{Kind: engine.DecideMovements, Movements: []engine.Movement{{StepType: "S", Input: ts[0].Input}}}
			if i == moves {
				dec = engine.Decision{Kind: engine.DecideGracefulComplete, Output: ts[0].Input}
			}
			if a, err := s.Result(ctx, ts[0].Token, engine.ExecuteResult{Token: ts[0].Token, Decision: dec}); err != nil || a.Status != server.AckAccepted {
				t.Fatalf("move %d: %+v, %v", i, a, err)
			}
		}
		if keys := valueObjectKeys(blobs); len(keys) != 1 {
			t.Fatalf("objects %v, want 1", keys)
		}
		gets.Store(0)
		st, err := h.core.Flow(ctx, "f", "")
		if err != nil {
			t.Fatal(err)
		}
		names := 0
		var first []byte
		_, _ = mapEngineValues(st, func(v engine.Value) (engine.Value, bool, error) {
			if v.Ref == "" {
				return v, false, nil
			}
			names++
			if !bytes.Equal(v.Data, in.Data) {
				t.Errorf("a value naming %s holds %d bytes, not the input's", v.Ref, len(v.Data))
			}
			if first == nil {
				first = v.Data
			} else if len(v.Data) > 0 && &v.Data[0] != &first[0] {
				t.Errorf("a value naming %s has a copy of its own", v.Ref)
			}
			return v, false, nil
		})
		if names <= moves {
			t.Errorf("the state names the object %d times, want more than %d (the test lost its point)", names, moves)
		}
		if n := gets.Load(); n != 1 {
			t.Errorf("one read of a state naming 1 object %d times read it %d times", names, n)
		}
		h.stop()
	})
}

// A worker stream breaks in the middle of a batch: the tasks after the
// failed send go back to the session (Untake) and, as it closes, to the
// dispatcher's queue until a slot is free. They went out with their bytes
// loaded; the queue keeps their references only (the bytes are loaded
// again for the next worker), as for every other queued task.
func TestValueObjects_UntakenTasksWaitWithoutTheirBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newObjectHarness(t, blobs, 1)
		in := startBig(t, h)
		s := h.session("w", 4, "a")
		synctest.Wait()
		msgs := s.Take()
		if len(msgs) != 1 || msgs[0].Task == nil || !bytes.Equal(msgs[0].Task.Input.Data, in.Data) {
			t.Fatalf("taken: %+v", msgs)
		}
		s.Untake(msgs) // the send failed before this one
		s.Close()
		d := h.core.disp
		d.mu.Lock()
		var held []string
		for _, p := range d.queues["a"] {
			if p.started != nil {
				_, _ = mapEngineValues(*p.started, func(v engine.Value) (engine.Value, bool, error) {
					if v.Ref != "" && v.Data != nil {
						held = append(held, v.Ref)
					}
					return v, false, nil
				})
			}
		}
		d.mu.Unlock()
		if len(held) != 0 {
			t.Errorf("the queued task holds the bytes of objects %v", held)
		}
		s2 := h.session("w2", 4, "a")
		synctest.Wait()
		if ts := tasks(s2); len(ts) != 1 || !bytes.Equal(ts[0].Input.Data, in.Data) {
			t.Errorf("the next worker's task: %d tasks, or its input is not the started one", len(ts))
		}
		h.stop()
	})
}

// A call is writing its value object into a store that fails (every
// attempt a 5xx) when the process stops serving: a step down, a lost
// lease, a kill. Like a call waiting on the sequencer, it is answered
// UNAVAILABLE at once, so that its caller retries on the new active
// process, rather than retrying the old process's store until its own
// deadline. (Found by the simulator, seeds 1177 and 2052 of -first 1000:
// a client's SetAttributes spent two 5 s deadlines in such writes while
// its timer flow completed, and then could only be refused.)
func TestValueObjects_StopEndsACallWritingItsObject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		blobs.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpPutIfAbsent && strings.HasPrefix(key, testLayout.ValuePrefix()) {
				return mem.Fault{Err: mem.ErrServer}
			}
			return mem.Fault{}
		})
		h := newObjectHarness(t, blobs, 1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := h.core.StartFlow(ctx, engine.StartFlow{FlowID: "f", FlowType: "a", StartStep: "S", Input: bigValue('i', 4<<10)})
			done <- err
		}()
		time.Sleep(200 * time.Millisecond)
		h.core.Stop()
		err := <-done
		if took := time.Since(start); took > time.Second || !errors.Is(err, server.ErrNotServing) {
			t.Errorf("a call writing its object when the core stopped: %v after %v, want ErrNotServing at once", err, took)
		}
		h.stop()
	})
}

// startBig starts flow "f" of type "a" with an input of 4 KiB (a value
// object) and returns the input.
func startBig(t *testing.T, h *harness) engine.Value {
	t.Helper()
	in := bigValue('i', 4<<10)
	if _, err := h.core.StartFlow(context.Background(), engine.StartFlow{FlowID: "f", FlowType: "a", StartStep: "S", Input: in}); err != nil {
		t.Fatal(err)
	}
	return in
}

// hasValueObjects reports whether any Value reachable from x names a value
// object.
func hasValueObjects(x any) bool {
	found := false
	_, _ = mapEngineValues(x, func(v engine.Value) (engine.Value, bool, error) {
		if v.Ref != "" {
			found = true
		}
		return v, false, nil
	})
	return found
}

// A request the engine refuses writes no value object: a large attribute
// for an unknown flow and a large message for a closed one are refused
// with the engine's error and leave the store as it was, while the same
// attribute for a running flow becomes an object.
//
// Covers: E28
func TestValueObjects_ARefusedRequestWritesNoObject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		h := newObjectHarness(t, blobs, 1)
		ctx := context.Background()
		big := bigValue('v', 2*objectBytes)
		code := func(err error) engine.Code {
			var ee *engine.Error
			if !errors.As(err, &ee) {
				t.Fatalf("error %v is not the engine's", err)
			}
			return ee.Code
		}
		noObjects := func(what string) {
			t.Helper()
			if keys := valueObjectKeys(blobs); len(keys) != 0 {
				t.Fatalf("%s wrote objects %v", what, keys)
			}
		}

		_, err := h.core.Command(ctx, "nope", engine.SetAttributes{FlowID: "nope", Attributes: []engine.AttributeWrite{{Name: "x", Value: big}}})
		if code(err) != engine.CodeNotFound {
			t.Fatalf("attribute for an unknown flow: %v", err)
		}
		noObjects("an attribute for an unknown flow")

		for _, id := range []string{"closed", "open"} {
			if _, err := h.core.StartFlow(ctx, engine.StartFlow{FlowID: id, FlowType: "a", StartStep: "S", Input: smallInput}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.core.Command(ctx, "closed", engine.StopFlow{FlowID: "closed", Kind: engine.StopTerminate}); err != nil {
			t.Fatal(err)
		}
		_, err = h.core.Command(ctx, "closed", engine.PublishToChannel{FlowID: "closed", Messages: []engine.Publish{{Channel: "c", Value: big}}})
		if code(err) != engine.CodeFailedPrecondition {
			t.Fatalf("message for a closed flow: %v", err)
		}
		noObjects("a message for a closed flow")

		if _, err := h.core.Command(ctx, "open", engine.SetAttributes{FlowID: "open", Attributes: []engine.AttributeWrite{{Name: "x", Value: big}}}); err != nil {
			t.Fatal(err)
		}
		if keys := valueObjectKeys(blobs); len(keys) != 1 {
			t.Fatalf("an accepted large attribute made objects %v, want one", keys)
		}
		h.stop()
	})
}

// A flow's result carries its outputs only, so WaitForFlow reads the
// objects its outputs name and no other: a run whose input and output are
// different large values costs one object read for its result, where a
// read of its whole state costs two.
//
// Covers: E25
func TestValueObjects_WaitForFlowReadsOnlyTheOutputsObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := mem.New()
		var gets atomic.Int32
		blobs.SetFaults(func(op, key string) mem.Fault {
			if op == blob.OpGet && strings.HasPrefix(key, testLayout.ValuePrefix()) {
				gets.Add(1)
			}
			return mem.Fault{}
		})
		h := newObjectHarness(t, blobs, 1)
		ctx := context.Background()
		startBig(t, h)
		s := h.session("w", 4, "a")
		synctest.Wait()
		ts := tasks(s)
		if len(ts) != 1 {
			t.Fatalf("%d tasks", len(ts))
		}
		out := bigValue('o', 4<<10)
		dec := engine.Decision{Kind: engine.DecideGracefulComplete, Output: out}
		if a, err := s.Result(ctx, ts[0].Token, engine.ExecuteResult{Token: ts[0].Token, Decision: dec}); err != nil || a.Status != server.AckAccepted {
			t.Fatalf("result: %+v, %v", a, err)
		}
		if keys := valueObjectKeys(blobs); len(keys) != 2 {
			t.Fatalf("objects %v, want the input's and the output's", keys)
		}
		gets.Store(0)
		st, err := h.core.WaitForFlow(ctx, "f", "")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Outputs) != 1 || !bytes.Equal(st.Outputs[0].Value.Data, out.Data) {
			t.Fatalf("outputs %+v, want the output's bytes", st.Outputs)
		}
		if n := gets.Load(); n != 1 {
			t.Errorf("WaitForFlow read %d objects, want 1 (the output's)", n)
		}
		gets.Store(0)
		if _, err := h.core.Flow(ctx, "f", ""); err != nil {
			t.Fatal(err)
		}
		if n := gets.Load(); n != 2 {
			t.Errorf("a read of the whole state read %d objects, want 2", n)
		}
		h.stop()
	})
}
