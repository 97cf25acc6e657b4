package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/internal/config"
)

// An admin.credentialFile that names an empty, whitespace-only, missing or
// unreadable file must fail validation, naming the key and the file: the
// server reads the credential at startup and an empty one turns admin
// authentication off, so a mis-mounted Kubernetes secret would leave
// StepDown open to anyone who reaches api.listen (issue 9).
//
// Covers: A9
func TestValidate_AdminCredentialFileMustHoldACredential(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string, perm os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name   string
		path   string
		wantOK bool
		want   string // besides the key and the path
		asRoot bool   // false: root reads the file anyway, skip
	}{
		{name: "empty", path: write("empty", "", 0o600), want: "empty", asRoot: true},
		{name: "whitespace only", path: write("blank", " \n\t \r\n", 0o600), want: "empty", asRoot: true},
		{name: "missing", path: filepath.Join(dir, "missing"), want: "no such file", asRoot: true},
		{name: "unreadable", path: write("secret-000", "s3cret\n", 0o000), want: "permission denied"},
		{name: "a directory", path: dir, want: "is a directory", asRoot: true},
		{name: "good", path: write("good", "s3cret\n", 0o600), wantOK: true, asRoot: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if !c.asRoot && os.Geteuid() == 0 {
				t.Skip("root reads a file with mode 000")
			}
			doc := "admin:\n  credentialFile: " + c.path + "\n"
			for _, mode := range []config.Mode{config.ModeDev, config.ModeServe} {
				if mode == config.ModeServe {
					doc += "storage:\n  fs:\n    dir: /d\nlocalStore:\n  dir: /s\n"
				}
				cfg, err := config.Parse([]byte(doc), mode)
				if c.wantOK {
					if err != nil {
						t.Fatalf("%s: Parse with a good credential file: %v", mode, err)
					}
					if cfg.Admin.CredentialFile != c.path {
						t.Fatalf("%s: admin.credentialFile = %q, want %q", mode, cfg.Admin.CredentialFile, c.path)
					}
					continue
				}
				if err == nil {
					t.Fatalf("%s: Parse accepted admin.credentialFile %s (%s), want a configuration error", mode, c.path, c.name)
				}
				for _, w := range []string{"admin.credentialFile", c.path, c.want} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q lacks %q", mode, err, w)
					}
				}
			}
		})
	}
	// Without the key there is no credential and nothing to read.
	if _, err := config.Parse(nil, config.ModeDev); err != nil {
		t.Fatalf("no admin.credentialFile: %v", err)
	}
}
