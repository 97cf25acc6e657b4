package engine

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// allowedImports are the only packages the engine may import: the standard
// library without I/O, randomness, clocks or concurrency.
var allowedImports = map[string]bool{
	"encoding/binary": true, "encoding/json": true, "errors": true, "fmt": true,
	"maps": true, "math": true, "slices": true, "sort": true, "strconv": true,
	"strings": true, "time": true, "unicode/utf8": true,
	// The codec of records and states (codec.go): deterministic, no I/O.
	"github.com/fxamacker/cbor/v2": true,
}

// cborPath is the one allowed package outside the standard library.
const cborPath = "github.com/fxamacker/cbor/v2"

// forbiddenTime are the time functions that read the clock or start timers.
var forbiddenTime = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
}

// TestPurity_NoIONoClockNoGoroutines fails when the engine's non-test code
// imports anything outside its allowlist of standard packages, reads the
// clock, starts a goroutine or selects on channels.
func TestPurity_NoIONoClockNoGoroutines(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		checked++
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		timeName := "time"
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowedImports[path] {
				t.Errorf("%s imports %q, outside the engine's allowlist", f, path)
			}
			if pkg, err := build.Import(path, "", build.FindOnly); path != cborPath && (err != nil || !pkg.Goroot) {
				t.Errorf("%s imports %q, not a standard library package", f, path)
			}
			if path == "time" && imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: goroutine at %s", f, fset.Position(n.Pos()))
			case *ast.SelectStmt:
				t.Errorf("%s: select at %s", f, fset.Position(n.Pos()))
			case *ast.SendStmt:
				t.Errorf("%s: channel send at %s", f, fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == timeName && forbiddenTime[n.Sel.Name] {
					t.Errorf("%s: time.%s at %s", f, n.Sel.Name, fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no engine source files found")
	}
}
