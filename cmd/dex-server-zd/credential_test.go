package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// credentialConfigs writes an empty and a whitespace-only credential file
// (a mis-mounted Kubernetes secret) and a configuration naming each, with
// extra appended; it returns config file -> credential file.
func credentialConfigs(t *testing.T, extra string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for name, content := range map[string]string{"empty": "", "blank": " \n\t\n"} {
		cred := filepath.Join(dir, name+".token")
		cfg := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(cred, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, []byte("admin:\n  credentialFile: "+cred+"\n"+extra), 0o644); err != nil {
			t.Fatal(err)
		}
		out[cfg] = cred
	}
	return out
}

// The binary refuses an admin.credentialFile holding no credential: exit 2
// (a configuration error) naming the key and the file, before it opens a
// store or listens, instead of serving AdminService without authentication
// (issue 9), in dev and in serve.
//
// Covers: A9
func TestProcess_EmptyAdminCredentialFileExits2(t *testing.T) {
	dir := t.TempDir()
	serveStore := "storage:\n  fs:\n    dir: " + filepath.Join(dir, "shared") + "\nlocalStore:\n  dir: " + filepath.Join(dir, "local") + "\n"
	for _, mode := range []struct{ name, extra string }{{"dev", ""}, {"serve", serveStore}} {
		for cfg, cred := range credentialConfigs(t, mode.extra) {
			t.Run(mode.name+"/"+filepath.Base(cfg), func(t *testing.T) {
				args := []string{mode.name, "--config", cfg, "--listen", "127.0.0.1:0"}
				if mode.name == "dev" {
					args = append(args, "--data-dir", t.TempDir())
				}
				p := start(t, args...)
				waitExitOrServing(t, p, 20*time.Second)
				if code := p.ExitCode(); code != 2 {
					t.Fatalf("exit %d, want 2:\n%s", code, p.log())
				}
				for _, w := range []string{"admin.credentialFile", cred} {
					if !strings.Contains(p.log(), w) {
						t.Fatalf("the error does not name %q:\n%s", w, p.log())
					}
				}
				for _, d := range []string{"shared", "local"} {
					if _, err := os.Stat(filepath.Join(dir, d)); err == nil {
						t.Fatalf("%s created %s before refusing the configuration", mode.name, d)
					}
				}
			})
		}
	}
}

// waitExitOrServing waits for p to exit, failing the test at once if it
// logs that it serves.
func waitExitOrServing(t *testing.T, p proc, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.Exited():
			return
		case <-time.After(20 * time.Millisecond):
		}
		if strings.Contains(p.log(), "msg=serving") {
			t.Fatalf("the process serves, with admin authentication off:\n%s", p.log())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process neither served nor exited within %v:\n%s", timeout, p.log())
		}
	}
}
