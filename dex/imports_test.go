package dex_test

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// rawhook is the SDK's own internal package that connects package dexraw;
// it imports only the API and the standard library.
const rawhook = "github.com/dexzd/dexzd/dex/internal/rawhook"

// allowedImport reports whether the SDK may import path: the generated API,
// gRPC, protobuf, the OpenTelemetry API and its gRPC instrumentation, and
// the standard library only (and its own rawhook). The OpenTelemetry SDK
// and exporters are the application's choice, never the SDK's.
func allowedImport(path string) bool {
	switch {
	case path == "github.com/dexzd/dexzd/api/dexpb", path == rawhook,
		path == "google.golang.org/grpc", strings.HasPrefix(path, "google.golang.org/grpc/"),
		path == "google.golang.org/protobuf", strings.HasPrefix(path, "google.golang.org/protobuf/"),
		path == "go.opentelemetry.io/otel/attribute", path == "go.opentelemetry.io/otel/codes",
		path == "go.opentelemetry.io/otel/propagation", path == "go.opentelemetry.io/otel/trace",
		path == "go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc":
		return true
	}
	// The standard library has no dot in its first path element.
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// TestSDK_ImportsOnlyTheAPIGRPCProtobufAndOTelAPI keeps the SDK independent of the
// server: its non-test files import nothing else.
func TestSDK_ImportsOnlyTheAPIGRPCProtobufAndOTelAPI(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if !allowedImport(path) {
				t.Errorf("%s imports %s; the SDK may import only api/dexpb, gRPC, protobuf, the OpenTelemetry API, otelgrpc and the standard library", name, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no SDK files found")
	}
}

// TestSDK_DependsOnNoInternalPackage checks the transitive dependencies.
func TestSDK_DependsOnNoInternalPackage(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			t.Skip("no go command to list dependencies")
		}
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(dep, "go.opentelemetry.io/otel/exporters") {
			t.Errorf("the SDK depends on %s; the OpenTelemetry SDK is the application's to choose", dep)
		}
		if strings.HasPrefix(dep, "github.com/dexzd/dexzd/") && dep != "github.com/dexzd/dexzd/dex" && dep != "github.com/dexzd/dexzd/api/dexpb" && dep != rawhook {
			t.Errorf("the SDK depends on %s", dep)
		}
	}
}
