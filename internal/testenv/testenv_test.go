package testenv

import (
	"regexp"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/internal/blob"
)

// recorder stands in for a test to see whether a helper skips or fails.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()                   {}
func (r *recorder) Skip(...any)               { r.skipped = true }
func (r *recorder) Fatalf(string, ...any)     { r.failed = true }
func (r *recorder) Name() string              { return "TestX/sub case" }
func (r *recorder) Errorf(f string, a ...any) { r.failed = true }

func TestLookup_SkipsUnlessRequired(t *testing.T) {
	const v = "DEX_TEST_TESTENV_UNSET"
	t.Setenv(v, "")
	cases := []struct {
		require       string
		skip, failure bool
	}{
		{"", true, false},
		{"postgres", true, false},
		{"s3", false, true},
		{" postgres , S3 ", false, true},
	}
	for _, c := range cases {
		t.Setenv(EnvRequire, c.require)
		r := &recorder{TB: t}
		lookup(r, ServiceS3, v)
		if r.skipped != c.skip || r.failed != c.failure {
			t.Errorf("DEX_TEST_REQUIRE=%q: skipped %v, failed %v; want %v, %v", c.require, r.skipped, r.failed, c.skip, c.failure)
		}
	}
	t.Setenv(v, "set")
	r := &recorder{TB: t}
	if got := lookup(r, ServiceS3, v); len(got) != 1 || got[0] != "set" || r.skipped || r.failed {
		t.Errorf("lookup of a set variable = %q (skipped %v, failed %v)", got, r.skipped, r.failed)
	}
}

func TestUniqueName_FitsKeysAndTables(t *testing.T) {
	t.Parallel()
	ident := regexp.MustCompile(`^[a-z0-9_]+$`)
	seen := map[string]bool{}
	for range 100 {
		name := uniqueName(&recorder{TB: t}, 38)
		if !ident.MatchString(name) || len(name) > 38+9 || !strings.HasPrefix(name, "testx_sub_case_") {
			t.Fatalf("uniqueName = %q", name)
		}
		if err := blob.CheckKey("test/" + name + "/k"); err != nil {
			t.Fatalf("uniqueName = %q: %v", name, err)
		}
		if seen[name] {
			t.Fatalf("uniqueName repeated %q", name)
		}
		seen[name] = true
	}
}

func TestS3Config_UniquePrefixes(t *testing.T) {
	t.Parallel()
	a, b := S3Config(t), S3Config(t)
	if a.Prefix == b.Prefix {
		t.Fatalf("two calls gave the prefix %q", a.Prefix)
	}
}

func TestNewPostgresStore_SeparateTables(t *testing.T) {
	t.Parallel()
	a, b := NewPostgresStore(t), NewPostgresStore(t)
	if _, err := a.PutIfAbsent(t.Context(), "k", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutIfAbsent(t.Context(), "k", []byte("b")); err != nil {
		t.Fatalf("the second store saw the first one's key: %v", err)
	}
}
