package engine

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata/*.txt")

// base is the time every script starts at; outputs show times relative to it.
var base = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// TestScripts runs the golden scripts in testdata. Each script lists
// commands ("> cmd args") followed by their expected output (indented).
// After every script, all its records are replayed (through
// MarshalRecord/UnmarshalRecord) from an empty state and must rebuild the
// live state byte for byte. The requirement IDs a script covers are in its
// "# Covers:" header.
//
// Covers: E1, E2, E3, E4, E5, E6, E7, E8, E9, E10, E11, E12, E13, E14, E15, E16, E17, E18, E19, E20, E21, E22, E23, E24, E26, E28, E29, E37, E38, W2, W3, W4, W5
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			t.Parallel()
			runScript(t, f)
		})
	}
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if !strings.HasPrefix(line, "> ") {
			if !strings.HasPrefix(line, "  ") {
				out = append(out, line) // comments and blank lines
			}
			continue
		}
		var want []string
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "  ") {
			i++
			want = append(want, lines[i])
		}
		got := h.run(strings.TrimPrefix(line, "> "), fmt.Sprintf("%s:%d", path, i+1))
		for j := range got {
			got[j] = "  " + got[j]
		}
		out = append(out, line)
		out = append(out, got...)
		if !*update && strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:%d: %s\n--- got:\n%s\n--- want:\n%s", path, i+1, line,
				strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	h.checkReplay()
	if *update {
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// harness plays the node: it feeds commands to the engine, "logs" the
// records and applies them.
type harness struct {
	t      *testing.T
	e      *Engine
	now    time.Time
	epoch  uint64
	def    *FlowDefinition
	flowID string
	st     *FlowState
	recs   []Record
	tokens map[string]Token // the last token handed out per step execution
	calls  int
	// lastRPC is the last RPC result a worker returned, for rpcresend.
	lastRPC *RPCResult
	// Several flows (subflows, E31): the states and tokens of the flows
	// other than the current one, and the registry's definitions of
	// other flow types.
	flows     map[string]*FlowState
	flowToks  map[string]map[string]Token
	defs      map[string]*FlowDefinition
	flowOrder []string
	// lockedCall is the last RPC call rpclock took locks for (E30).
	lockedCall *InvokeRPC
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, e: New(Config{}), now: base, epoch: 1, flowID: "f1", tokens: map[string]Token{},
		flows: map[string]*FlowState{}, flowToks: map[string]map[string]Token{}, defs: map[string]*FlowDefinition{},
		flowOrder: []string{"f1"}}
}

// use makes flowID the current flow of the script.
func (h *harness) use(flowID string) {
	if flowID == h.flowID {
		return
	}
	h.flows[h.flowID], h.flowToks[h.flowID] = h.st, h.tokens
	h.flowID, h.st, h.tokens = flowID, h.flows[flowID], h.flowToks[flowID]
	if h.tokens == nil {
		h.tokens = map[string]Token{}
	}
	if !slices.Contains(h.flowOrder, flowID) {
		h.flowOrder = append(h.flowOrder, flowID)
	}
}

// decideOn decides cmd on flowID (the node deciding for another flow
// than the script's current one) and prints its records under the
// flow's ID.
func (h *harness) decideOn(flowID string, cmd Command) []string {
	cur := h.flowID
	h.use(flowID)
	out := h.decide(cmd)
	h.use(cur)
	for i := range out {
		out[i] = "[" + flowID + "] " + out[i]
	}
	return out
}

// link plays the node's cross-flow step for the current flow (E31).
func (h *harness) link(crash bool) []string {
	host := &scriptHost{h: h, crash: crash}
	if err := LinkSubFlows(host, h.flowID); err != nil {
		return append(host.out, "error: "+err.Error())
	}
	return orNone(host.out)
}

// scriptHost is the SubFlowHost of the scripts.
type scriptHost struct {
	h     *harness
	out   []string
	crash bool // drop the parent's updates
}

func (s *scriptHost) state(flowID string) *FlowState {
	if flowID == s.h.flowID {
		return s.h.st
	}
	return s.h.flows[flowID]
}

func (s *scriptHost) Flow(flowID string) (*FlowState, error) { return s.state(flowID), nil }

func (s *scriptHost) Run(flowID, runID string) (*FlowState, error) {
	if st := s.state(flowID); st != nil && st.RunID == runID {
		return st, nil
	}
	return s.h.replayedRun(flowID, runID), nil
}

func (s *scriptHost) Decide(flowID string, cmd Command) error {
	if c, ok := cmd.(StartFlow); ok {
		c.RunID = s.h.nextRunID()
		c.Definition = s.h.defs[c.FlowType]
		cmd = c
	}
	if _, ok := cmd.(SubFlowUpdate); ok && s.crash {
		s.out = append(s.out, "["+flowID+"] (lost in a crash)")
		return nil
	}
	out := s.h.decideOn(flowID, cmd)
	s.out = append(s.out, out...)
	if len(out) == 1 {
		if msg, ok := strings.CutPrefix(out[0], "["+flowID+"] error: "); ok {
			_, msg, _ = strings.Cut(msg, ": ") // the code, which Error() puts back
			return &Error{Code: CodeInvalidArgument, Message: msg}
		}
	}
	return nil
}

// nextRunID numbers runs across every flow of the script.
func (h *harness) nextRunID() string {
	runs := 1
	for _, r := range h.recs {
		if _, ok := r.Body.(FlowStarted); ok {
			runs++
		}
	}
	return fmt.Sprintf("r%d", runs)
}

// run executes one script command and returns its output lines.
func (h *harness) run(line, where string) []string {
	args, err := splitArgs(line)
	if err != nil || len(args) == 0 {
		h.t.Fatalf("%s: bad command %q: %v", where, line, err)
	}
	kv, pos := parseArgs(args[1:])
	cmd, out, err := h.command(args[0], kv, pos)
	if err != nil {
		h.t.Fatalf("%s: %v", where, err)
	}
	if cmd == nil {
		return out
	}
	return append(out, h.decide(cmd)...)
}

// decide runs Decide and applies the records, like the node does.
func (h *harness) decide(cmd Command) []string {
	before := mustMarshalState(h.st)
	recs, err := h.e.Decide(h.st, cmd, h.now)
	if !bytes.Equal(before, mustMarshalState(h.st)) {
		h.t.Fatalf("Decide(%T) modified its input state", cmd)
	}
	// Deciding again on an equal state gives the same records.
	again, err2 := h.e.Decide(h.st.Clone(), cmd, h.now)
	if (err == nil) != (err2 == nil) || !bytes.Equal(marshalAll(h.t, recs), marshalAll(h.t, again)) {
		h.t.Fatalf("Decide(%T) is not deterministic", cmd)
	}
	if err != nil {
		if len(recs) != 0 {
			h.t.Fatalf("Decide returned records with an error")
		}
		return []string{"error: " + err.Error()}
	}
	if len(recs) == 0 {
		return []string{"(no records)"}
	}
	var out []string
	for _, r := range recs {
		out = append(out, formatRecord(r))
		var eff []Effect
		h.st, eff = Apply(h.st, r)
		for _, e := range eff {
			out = append(out, "  -> "+formatEffect(e))
		}
	}
	h.recs = append(h.recs, recs...)
	return out
}

// checkReplay rebuilds the state of every flow from the logged records
// and compares.
func (h *harness) checkReplay() {
	for _, id := range h.flowOrder {
		h.use(id)
		h.checkReplayFlow()
	}
}

func (h *harness) checkReplayFlow() {
	if h.st == nil {
		return
	}
	rst := h.replayed(h.flowID)
	live, replayed := mustMarshalState(h.st), mustMarshalState(rst)
	if !bytes.Equal(live, replayed) {
		h.t.Fatalf("replayed state differs from live state:\nlive:     %s\nreplayed: %s", live, replayed)
	}
	// The encoding hides some differences (JSON turns invalid UTF-8 into
	// U+FFFD): the values themselves must be equal too.
	if !reflect.DeepEqual(h.st, rst) {
		h.t.Fatalf("replayed state differs from live state in memory, though both encode to:\n%s", live)
	}
	round, err := UnmarshalState(live)
	if err != nil {
		h.t.Fatal(err)
	}
	if !bytes.Equal(mustMarshalState(round), live) {
		h.t.Fatalf("state does not survive MarshalState/UnmarshalState")
	}
}

// replayedRun is the state of run runID of flowID as its records rebuild
// it, nil when the log has no such run.
func (h *harness) replayedRun(flowID, runID string) *FlowState {
	var st *FlowState
	for _, r := range h.recs {
		if r.FlowID != flowID || r.RunID != runID {
			continue
		}
		st, _ = Apply(st, r)
	}
	return st
}

// replayed rebuilds flowID's state from nil by applying every logged
// record after a MarshalRecord/UnmarshalRecord round trip, as a recovery
// does.
func (h *harness) replayed(flowID string) *FlowState {
	var st *FlowState
	for _, r := range h.recs {
		if r.FlowID != flowID {
			continue
		}
		b, err := MarshalRecord(r)
		if err != nil {
			h.t.Fatalf("marshal %s: %v", r.Type(), err)
		}
		back, err := UnmarshalRecord(b)
		if err != nil {
			h.t.Fatalf("unmarshal %s: %v", r.Type(), err)
		}
		st, _ = Apply(st, back)
	}
	return st
}

func marshalAll(t *testing.T, recs []Record) []byte {
	var out []byte
	for _, r := range recs {
		b, err := MarshalRecord(r)
		if err != nil {
			t.Fatalf("marshal %s: %v", r.Type(), err)
		}
		out = append(append(out, b...), '\n')
	}
	return out
}

func mustMarshalState(st *FlowState) []byte {
	if st == nil {
		return nil
	}
	b, err := MarshalState(st)
	if err != nil {
		panic(err)
	}
	return b
}

// splitArgs splits on spaces; double quotes group words.
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inQuote, has := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote, has = !inQuote, true
		case r == ' ' && !inQuote:
			if has {
				out = append(out, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteRune(r)
			has = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote")
	}
	if has {
		out = append(out, cur.String())
	}
	return out, nil
}

// arg is one "key=value" or positional word, in order.
type arg struct{ key, val string }

func parseArgs(args []string) (kv map[string]string, pos []arg) {
	kv = map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			pos = append(pos, arg{val: a})
			continue
		}
		kv[k] = v
		pos = append(pos, arg{key: k, val: v})
	}
	return kv, pos
}

func val(s string) Value {
	if s == "" {
		return Value{}
	}
	if data, ok := strings.CutPrefix(s, "json:"); ok { // json:'a' is the JSON string "a"
		return Value{Type: "json:", Data: []byte(strings.ReplaceAll(data, "'", `"`))}
	}
	return Value{Data: []byte(s)}
}

func dur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}
