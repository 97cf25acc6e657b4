package dextest

import (
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// running counts the Envs of this process that have not stopped. It is
// process-wide state because goroutines are: the goroutine check can only
// tell that a goroutine belongs to some Env when no other Env runs.
var running atomic.Int64

// ownPackages are the frames that mark a goroutine as started by an Env:
// the server, the SDK and the libraries they run.
var ownPackages = []string{"github.com/dexzd/dexzd/", "google.golang.org/grpc", "github.com/cockroachdb/pebble"}

// goroutines returns the stacks of the running goroutines by ID.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if id, ok := goroutineID(g); ok {
			out[id] = g
		}
	}
	return out
}

// goroutineID parses "goroutine 12 [chan receive]:".
func goroutineID(stack string) (string, bool) {
	head, _, _ := strings.Cut(stack, "\n")
	f := strings.Fields(head)
	if len(f) < 2 || f[0] != "goroutine" {
		return "", false
	}
	return f[1], true
}

// currentGoroutine returns the calling goroutine's ID.
func currentGoroutine() string {
	buf := make([]byte, 64)
	id, _ := goroutineID(string(buf[:runtime.Stack(buf, false)]))
	return id
}

// leaked returns the stacks of the goroutines that run code of an Env and
// were not running in before. Test goroutines (a parallel test waiting to
// run, the one calling leaked) are not leaks.
func leaked(before map[string]string) []string {
	self := currentGoroutine()
	var out []string
	for id, g := range goroutines() {
		if _, ok := before[id]; ok || id == self || strings.Contains(g, "testing.tRunner") {
			continue
		}
		if slices.ContainsFunc(ownPackages, func(p string) bool { return strings.Contains(g, p) }) {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out
}

// waitLeaks waits up to timeout for the goroutines of stopped components
// to end (a closed connection's goroutines end shortly after Close) and
// returns the ones left.
func waitLeaks(before map[string]string, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	pause := 5 * time.Millisecond
	for {
		left := leaked(before)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(pause)
		pause = min(2*pause, 200*time.Millisecond)
	}
}
