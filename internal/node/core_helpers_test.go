package node

import (
	"context"
	"testing"

	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
	"github.com/dexzd/dexzd/internal/serving"
	"github.com/dexzd/dexzd/internal/wal"
)

// A serving core on the memory store with a real log writer, for the
// process-level tests that need an active process's log (a crashed active
// before a takeover) or its metrics: the part of the serving package's
// test harness they use, through serving's exported API only.

var testLayout = wal.MustLayout("", "n1")

type harness struct {
	t            *testing.T
	blobs        *mem.Store
	core         *serving.Core
	w            *wal.Writer
	cancelWriter context.CancelFunc
}

// newHarness fences the log with epoch, replays it into a fresh memory
// store and starts a core. The test must call stop (or crash) before its
// synctest bubble ends.
func newHarness(t *testing.T, blobs *mem.Store, epoch uint64) *harness {
	t.Helper()
	return newMetricsHarness(t, blobs, epoch, nil)
}

func (h *harness) stop() {
	h.core.Stop()
	if err := h.w.Stop(); err != nil {
		h.t.Fatal(err)
	}
	h.cancelWriter()
}

// crash stops without flushing: a batch in flight is abandoned and records
// not yet written are lost.
func (h *harness) crash() {
	h.cancelWriter()
	<-h.w.Done()
	h.core.Stop()
}

var flowDef = &engine.FlowDefinition{Type: "a", Steps: map[string]engine.StepDef{
	"S": {}, "W": {HasWaitFor: true},
	"Async": {Options: &engine.StepOptions{Execute: &engine.MethodOptions{Durability: engine.ASYNC}}},
	"Sync":  {Options: &engine.StepOptions{Execute: &engine.MethodOptions{Durability: engine.SYNC}}},
}, Channels: []string{"c"}}

func (h *harness) session(id string, maxTasks int, types ...string) server.Session {
	h.t.Helper()
	hello := server.WorkerHello{WorkerID: id, MaxConcurrent: maxTasks}
	for _, typ := range types {
		def := *flowDef
		def.Type = typ
		hello.FlowTypes = append(hello.FlowTypes, server.FlowTypeDecl{Definition: &def})
	}
	s, err := h.core.OpenSession(context.Background(), hello)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h *harness) start(id, typ, step string) {
	h.t.Helper()
	if _, err := h.core.StartFlow(context.Background(), engine.StartFlow{FlowID: id, FlowType: typ, StartStep: step}); err != nil {
		h.t.Fatal(err)
	}
}

// tasks returns the tasks queued for s now.
func tasks(s server.Session) []*engine.Task {
	var out []*engine.Task
	for _, m := range s.Take() {
		if m.Task != nil {
			out = append(out, m.Task)
		}
	}
	return out
}

func (h *harness) complete(s server.Session, task *engine.Task) server.Ack {
	h.t.Helper()
	a, err := s.Result(context.Background(), task.Token, engine.ExecuteResult{Token: task.Token,
		Decision: engine.Decision{Kind: engine.DecideGracefulComplete}})
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}
