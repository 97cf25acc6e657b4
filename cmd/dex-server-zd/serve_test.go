package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve's usage and configuration errors exit 2 before anything starts:
// no --config, a configuration that misses localStore.dir, a hot standby
// with lease.failIfHeld (S5), stray arguments, a PostgreSQL DSN or table
// name that cannot work.
func TestServe_UsageAndConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, yaml string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fsStore := "storage:\n  backend: fs\n  fs:\n    dir: " + filepath.Join(dir, "shared") + "\n"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no config", []string{"serve"}, "--config"},
		{"no local store", []string{"serve", "--config", write("nolocal.yaml", fsStore)}, "localStore.dir"},
		{"hot", []string{"serve", "--config", write("hot.yaml", fsStore+"localStore:\n  dir: "+filepath.Join(dir, "l")+"\nlease:\n  failIfHeld: true\nstandby:\n  mode: hot\n")}, "lease.failIfHeld"},
		{"s3 without bucket", []string{"serve", "--config", write("s3.yaml", "storage:\n  backend: s3\nlocalStore:\n  dir: x\n")}, "storage.s3.bucket"},
		{"stray argument", []string{"serve", "--config", "x.yaml", "extra"}, "unexpected arguments"},
		// Never waited out as a store outage.
		{"postgres dsn", []string{"serve", "--config", write("pgdsn.yaml", "storage:\n  backend: postgres\n  postgres:\n    dsn: \"postgres://u@127.0.0.1:notaport/db\"\nlocalStore:\n  dir: x\n")}, "storage.postgres"},
		{"postgres table", []string{"serve", "--config", write("pgtable.yaml", "storage:\n  backend: postgres\n  postgres:\n    dsn: \"postgres://u@127.0.0.1:5432/db\"\n    table: Bad-Name\nlocalStore:\n  dir: x\n")}, "storage.postgres"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("run(%v) = %d, stderr:\n%s\nwant 2 and %q", tc.args, code, stderr.String(), tc.want)
			}
		})
	}
}
