// Package e2e holds process tests: real dex-server-zd processes, the Go SDK's
// worker and client, signals, and a check of what survived.
package e2e

import (
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testproc.Cleanup()
	os.Exit(code)
}

// The chain flow: three sequential steps, each adds one to its input.
type (
	First  struct{ dex.Step[int] }
	Second struct{ dex.Step[int] }
	Third  struct{ dex.Step[int] }
)

func (First) Execute(_ dex.Context, n int) (dex.Decision, error)  { return dex.GoTo[Second](n + 1), nil }
func (Second) Execute(_ dex.Context, n int) (dex.Decision, error) { return dex.GoTo[Third](n + 1), nil }
func (Third) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.GracefulComplete(n + 1), nil
}

var chainFlow = dex.NewFlow("chain3").Start(First{}).Steps(Second{}, Third{})

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
