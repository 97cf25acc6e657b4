package serving

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/server"
)

// TestDispatchScripts runs the dispatch scripts in testdata/dispatch: the
// dispatcher's rules (slots, flow types, timeouts and retries, reconnects,
// crashes, answers of an earlier epoch) as script lines, like the engine's
// golden scripts. Each script lists commands ("> cmd args") followed by
// their expected output (indented); `go test -run TestDispatchScripts
// -update` rewrites the outputs, which are then read and checked by hand.
//
// A script runs in one synctest bubble on the memory store with a real log
// writer: after every command the bubble settles (synctest.Wait), so what
// a command prints is all that follows from it, and "sleep" moves the
// fake clock. Commands:
//
//	worker W slots=N types=a,b   open worker W's session (again after a close or crash)
//	start F type=T step=S        start flow F at step S (step types: see flowDef)
//	tasks W                      the tasks handed to W since its last tasks
//	complete W F                 W answers its last task of F: graceful complete
//	fail W F                     W answers its last task of F: a failure
//	close W                      W's stream ends
//	sleep D                      the fake clock moves D
//	slow-writes D | off          every batch write takes D from now on
//	crash                        the process crashes; a new one (next epoch) recovers
//	flow F                       F's committed state: status, steps, attempts
//
// Covers: W1, W2, W3, W5, T2, T3, E9, E14
func TestDispatchScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/dispatch/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { runDispatchScript(t, f) })
		})
	}
}

func runDispatchScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := &dispatchScript{t: t, blobs: mem.New(), epoch: 1, sessions: map[string]server.Session{},
		last: map[string]map[string]*engine.Task{}}
	d.h = newHarness(t, d.blobs, d.epoch)
	defer func() {
		if t.Failed() { // a Fatal left the core running: end it inside the bubble
			d.h.crash()
		}
	}()
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
		got := d.run(strings.TrimPrefix(line, "> "), fmt.Sprintf("%s:%d", path, i+1))
		synctest.Wait()
		for j := range got {
			got[j] = "  " + got[j]
		}
		out = append(out, line)
		out = append(out, got...)
		if !*updateGolden && strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:%d: %s\n--- got:\n%s\n--- want:\n%s", path, i+1, line,
				strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if t.Failed() {
		return
	}
	d.h.stop()
	if *updateGolden {
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type dispatchScript struct {
	t        *testing.T
	blobs    *mem.Store
	epoch    uint64
	h        *harness
	sessions map[string]server.Session
	// last holds each worker's last task of each flow, across crashes, so
	// that a worker can answer a task of an earlier epoch.
	last map[string]map[string]*engine.Task
}

var ackNames = map[server.AckStatus]string{
	server.AckAccepted: "ACCEPTED", server.AckInvalid: "INVALID", server.AckStaleEpoch: "STALE_EPOCH",
	server.AckCanceled: "CANCELED", server.AckSuperseded: "SUPERSEDED", server.AckUnknownTask: "UNKNOWN_TASK",
}

// run runs one command and returns its output lines.
func (d *dispatchScript) run(cmd, where string) []string {
	t := d.t
	t.Helper()
	f := strings.Fields(cmd)
	args := map[string]string{}
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		}
	}
	arg := func(i int) string {
		if len(f) <= i {
			t.Fatalf("%s: %s: missing argument %d", where, cmd, i)
		}
		return f[i]
	}
	ctx := context.Background()
	switch f[0] {
	case "worker":
		slots, err := strconv.Atoi(args["slots"])
		if err != nil {
			t.Fatalf("%s: slots: %v", where, err)
		}
		d.sessions[arg(1)] = d.h.session(arg(1), slots, strings.Split(args["types"], ",")...)
	case "start":
		if _, err := d.h.core.StartFlow(ctx, engine.StartFlow{FlowID: arg(1), FlowType: args["type"], StartStep: args["step"]}); err != nil {
			return []string{"error: " + err.Error()}
		}
	case "tasks":
		var out []string
		for _, task := range tasks(d.session(arg(1), where)) {
			if d.last[arg(1)] == nil {
				d.last[arg(1)] = map[string]*engine.Task{}
			}
			d.last[arg(1)][task.FlowID] = task
			out = append(out, fmt.Sprintf("%s %s %s#%d epoch=%d", task.FlowID, task.StepExecID, task.Method, task.Attempt, task.Token.Epoch))
		}
		return out
	case "complete", "fail":
		task := d.last[arg(1)][arg(2)]
		if task == nil {
			t.Fatalf("%s: %s has no task of %s", where, arg(1), arg(2))
		}
		var res engine.Command = engine.ExecuteResult{Token: task.Token, Decision: engine.Decision{Kind: engine.DecideGracefulComplete}}
		if f[0] == "fail" {
			res = engine.TaskFailed{Token: task.Token, Failure: engine.Failure{Type: "Boom"}}
		}
		a, err := d.session(arg(1), where).Result(ctx, task.Token, res)
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		return []string{"ack " + ackNames[a.Status]}
	case "close":
		d.session(arg(1), where).Close()
		delete(d.sessions, arg(1))
	case "sleep":
		dur, err := time.ParseDuration(arg(1))
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		time.Sleep(dur)
	case "slow-writes":
		if arg(1) == "off" {
			d.blobs.SetFaults(nil)
			break
		}
		dur, err := time.ParseDuration(arg(1))
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		d.blobs.SetFaults(func(op, _ string) mem.Fault {
			if op == blob.OpPutIfAbsent {
				return mem.Fault{Latency: dur}
			}
			return mem.Fault{}
		})
	case "crash":
		d.h.crash()
		d.blobs.SetFaults(nil)
		d.sessions = map[string]server.Session{}
		d.epoch++
		d.h = newHarness(t, d.blobs, d.epoch)
	case "flow":
		st, err := d.h.core.cfg.Store.Flow(arg(1))
		if err != nil || st == nil {
			return []string{fmt.Sprintf("none (%v)", err)}
		}
		out := []string{fmt.Sprintf("%s %s", st.FlowID, st.Status)}
		steps := slices.Clone(st.Steps)
		slices.SortFunc(steps, func(a, b *engine.StepExec) int { return strings.Compare(a.ID, b.ID) })
		for _, s := range steps {
			out = append(out, fmt.Sprintf("step %s %s#%d %s", s.ID, s.Attempt.Method, s.Attempt.Number, s.Attempt.State))
		}
		return out
	default:
		t.Fatalf("%s: unknown command %q", where, f[0])
	}
	return nil
}

func (d *dispatchScript) session(w, where string) server.Session {
	s := d.sessions[w]
	if s == nil {
		d.t.Fatalf("%s: no session of worker %s", where, w)
	}
	return s
}
