// Package clitest holds what the tests of dexcli's packages share: the
// golden files of their output and the checks of a command's outcome. Only
// tests import it (depguard refuses it elsewhere in internal/cli).
package clitest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// CheckGolden compares got with testdata/<name>.<json|txt> of the package
// under test (json for format "json", txt otherwise). With -update it
// rewrites the file.
func CheckGolden(t testing.TB, name, format, got string) {
	t.Helper()
	ext := ".txt"
	if format == "json" {
		ext = ".json"
	}
	path := filepath.Join("testdata", name+ext)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
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

// Result is what one command produced: its exit code and output.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// WantCode fails the test at once when r did not exit with code.
func (r Result) WantCode(t testing.TB, code int) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.Code, code, r.Stdout, r.Stderr)
	}
}

// WantStderr fails the test when stderr lacks one of subs.
func (r Result) WantStderr(t testing.TB, subs ...string) {
	t.Helper()
	wantAll(t, "stderr", r.Stderr, subs)
}

// WantStdout fails the test when stdout lacks one of subs.
func (r Result) WantStdout(t testing.TB, subs ...string) {
	t.Helper()
	wantAll(t, "stdout", r.Stdout, subs)
}

func wantAll(t testing.TB, stream, got string, subs []string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(got, s) {
			t.Errorf("%s lacks %q:\n%s", stream, s, got)
		}
	}
}
