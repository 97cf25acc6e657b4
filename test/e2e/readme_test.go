package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/testproc"
)

// README's "Your own program" works as written: its program, saved as
// main.go in a new module that points at this checkout with the README's
// commands, builds and prints the flow's output against a dev server.
func TestReadme_YourOwnProgramRunsInANewModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a new module")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	program := readmeBlock(t, string(readme), "<!-- readme-test: main.go -->")

	addr := testproc.FreeAddr(t)
	p := testproc.Start(t, "dev", "--data-dir", t.TempDir(), "--listen", addr)
	p.Serving(t, 30*time.Second)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = dir
		// The module cache and proxy settings of the environment; the
		// new module's own go.sum is written by `go mod tidy`.
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	run("go", "mod", "init", "example.com/hello")
	run("go", "mod", "edit", "-replace", "github.com/dexzd/dexzd="+root)
	run("go", "mod", "tidy")
	if out := run("go", "run", ".", "--server", addr); !strings.Contains(out, "hello, world\n") {
		t.Fatalf("the program printed %q, want \"hello, world\"", out)
	}
}

// readmeBlock returns the fenced code block that follows marker in text.
func readmeBlock(t *testing.T, text, marker string) string {
	t.Helper()
	_, after, ok := strings.Cut(text, marker)
	if !ok {
		t.Fatalf("README has no %q", marker)
	}
	_, after, ok = strings.Cut(after, "```go\n")
	if !ok {
		t.Fatalf("no Go block after %q", marker)
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatalf("the Go block after %q does not end", marker)
	}
	return block
}
