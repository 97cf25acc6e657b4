package benchcmd

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/internal/cli/session"
)

// The exit codes, as the tests of package cli name them.
const (
	exitOK          = session.ExitOK
	exitFailure     = session.ExitFailure
	exitInterrupted = session.ExitInterrupted
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// checkGolden compares got with testdata/<name>.<json|txt>. With -update it
// rewrites the file.
func checkGolden(t *testing.T, name, format, got string) {
	t.Helper()
	ext := ".txt"
	if format == "json" {
		ext = ".json"
	}
	path := filepath.Join("testdata", name+ext)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run go test -update if the change is intended)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// result is what one command produced.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) wantCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

func (r result) wantStderr(t *testing.T, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
}

func (r result) wantStdout(t *testing.T, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
}
