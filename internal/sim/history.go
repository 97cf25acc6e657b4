package sim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
)

// The client-visible history, checked for linearizability with porcupine:
// per flow, the acknowledged start and client attribute write, and reads
// of the flow's state through the serving process's FlowService
// (GetFlowState, as a client reads, through the server's read gate). The
// model is a flow as a client sees it:
//
//   - it does not exist until its start takes effect, and exists from
//     then on;
//   - its attribute "client" (timer flows) is absent until the client's
//     SetAttributes takes effect and present from then on; that write
//     takes effect only while the flow runs;
//   - it runs, then is closed until the client resets it (E37: its new
//     run runs); closing is the node's own doing (its steps, its timer,
//     a stop), so a read may see it happen. A continue-as-new is not
//     seen: the latest run runs on (and the latest run never links to a
//     successor: a read that sees one fails the run at once).
//
// Each operation spans from the client's first try to the answer it took
// as the acknowledgement, so a try whose answer was lost but that landed
// falls inside it. A read that fails tells nothing and is not recorded; a
// start never acknowledged leaves the flow out; a client attribute write
// never acknowledged (the client gave up) leaves the attribute out of that
// flow's reads. A read that a stale process answered from state another
// process had changed since it was sent (L15), or a write acknowledged
// but not visible to a read sent after it, has no linearization.

// histKind is an operation of the history.
type histKind int

const (
	opStart histKind = iota
	opSetClient
	opRead
	// opReset: a reset the node acknowledged, or that the client found
	// landed after its answer got lost.
	opReset
)

// histObs is what a read saw.
type histObs struct {
	exists, closed, client bool
}

// histOp is the input of one operation; a read carries what it saw.
type histOp struct {
	kind histKind
	obs  histObs
	// ignoreClient: the flow's client write was never acknowledged, so
	// it may or may not have landed.
	ignoreClient bool
}

func (o histOp) String() string {
	switch o.kind {
	case opStart:
		return "start"
	case opSetClient:
		return "set client"
	case opReset:
		return "reset"
	}
	return fmt.Sprintf("read exists=%v closed=%v client=%v", o.obs.exists, o.obs.closed, o.obs.client)
}

// flowModel is the model's state of one flow.
type flowModel struct {
	started, client, closed bool
}

var flowHistoryModel = porcupine.Model{
	Init: func() any { return flowModel{} },
	Step: func(state, input, _ any) (bool, any) {
		st, op := state.(flowModel), input.(histOp)
		switch op.kind {
		case opStart:
			st.started = true
			return true, st
		case opSetClient:
			ok := st.started && !st.closed
			st.client = true
			return ok, st
		case opReset:
			// The new run keeps the client's attribute (the state at
			// the point, or re-applied from the old run).
			ok := st.started
			st.closed = false
			return ok, st
		}
		o := op.obs
		switch {
		case !o.exists:
			return !st.started, st
		case !st.started, st.closed && !o.closed:
			return false, st
		case !op.ignoreClient && o.client != st.client:
			return false, st
		}
		st.closed = st.closed || o.closed
		return true, st
	},
	DescribeOperation: func(input, _ any) string { return input.(histOp).String() },
}

// history records the operations, by flow.
type history struct {
	mu  sync.Mutex
	ops map[string][]porcupine.Operation
	// unsure: flows whose client write was never acknowledged.
	unsure map[string]bool
}

func (h *history) add(flowID string, op histOp, call, ret time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ops == nil {
		h.ops, h.unsure = map[string][]porcupine.Operation{}, map[string]bool{}
	}
	h.ops[flowID] = append(h.ops[flowID], porcupine.Operation{Input: op, Call: call.UnixNano(), Return: ret.UnixNano()})
}

func (h *history) unsureClient(flowID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unsure == nil {
		h.ops, h.unsure = map[string][]porcupine.Operation{}, map[string]bool{}
	}
	h.unsure[flowID] = true
}

// check checks every flow whose start was acknowledged; start is the
// run's beginning (for the report).
func (h *history) check(started map[string]string, start time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, ops := range h.ops {
		if _, ok := started[id]; !ok {
			continue
		}
		if h.unsure[id] {
			for i := range ops {
				op := ops[i].Input.(histOp)
				op.ignoreClient = true
				ops[i].Input = op
			}
		}
		if !porcupine.CheckOperations(flowHistoryModel, ops) {
			var b strings.Builder
			for _, o := range ops {
				ret := "…"
				if o.Return != math.MaxInt64 {
					ret = fmt.Sprint(time.Duration(o.Return - ops[0].Call))
				}
				fmt.Fprintf(&b, "\n    [%v, %s] %v", time.Duration(o.Call-ops[0].Call), ret, o.Input)
			}
			return fmt.Errorf("the client-visible history of %s is not linearizable (a stale or lost read, L15); from its start at %v:%s",
				id, time.Duration(ops[0].Call-start.UnixNano()), b.String())
		}
	}
	return nil
}

// read reads a flow's state once, as a client would, from a process that
// serves, and records what it saw.
func (s *sim) read(ctx context.Context, flowID string) {
	p, c := s.serving()
	if c == nil {
		return
	}
	call := time.Now()
	if !p.gate.wait() {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := p.srv.FlowService().GetFlowState(cctx, &dexpb.GetFlowStateRequest{FlowId: flowID})
	ret := time.Now()
	var o histObs
	switch {
	case status.Code(err) == codes.NotFound:
	case err != nil:
		return
	default:
		o.exists = true
		o.closed = resp.GetState().GetSummary().GetStatus() != dexpb.FlowStatus_FLOW_STATUS_RUNNING
		if st := resp.GetState(); st.GetResetRunId() != "" || st.GetContinuedRunId() != "" {
			s.fail("a read of %s answered run %s (%s), which run %s%s follows: not the latest", flowID,
				st.GetSummary().GetRunId(), st.GetSummary().GetStatus(), st.GetResetRunId(), st.GetContinuedRunId())
		}
		for _, a := range resp.GetState().GetAttributes() {
			o.client = o.client || a.GetName() == "client"
		}
	}
	s.hist.add(flowID, histOp{kind: opRead, obs: o}, call, ret)
}
