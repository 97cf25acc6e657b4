package engine

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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
// Covers: E1, E2, E3, E4, E5, E6, E7, E8, E9, E10, E11, E12, E13, E14, E15, E16, E17, E18, E19, E20, E21, E22, E23, E24, E26, E28, E29, E38, W2, W3, W4, W5
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
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, e: New(Config{}), now: base, epoch: 1, flowID: "f1", tokens: map[string]Token{}}
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

// checkReplay rebuilds the state from the logged records and compares.
func (h *harness) checkReplay() {
	if h.st == nil {
		return
	}
	rst := h.replayed()
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

// replayed rebuilds the state from nil by applying every logged record
// after a MarshalRecord/UnmarshalRecord round trip, as a recovery does.
func (h *harness) replayed() *FlowState {
	var st *FlowState
	for _, r := range h.recs {
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
