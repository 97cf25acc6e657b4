package open

import (
	"context"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/internal/config"
)

// Only s3 has a key prefix; the others keep the node's keys at the root.
func TestPrefix_OnlyS3HasOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		backend string
		want    string
	}{{config.BackendS3, "team/"}, {config.BackendPostgres, ""}, {config.BackendFS, ""}} {
		st := config.Storage{Backend: tc.backend}
		st.S3.Prefix = "team/"
		if got := Prefix(st); got != tc.want {
			t.Errorf("Prefix(%s) = %q, want %q", tc.backend, got, tc.want)
		}
	}
}

// fs opens the directory; a backend nobody knows and an fs directory that
// cannot be created fail naming the key.
func TestStore_OpensFSAndNamesTheBadKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := config.Storage{Backend: config.BackendFS}
	st.FS.Dir = t.TempDir()
	s, err := Store(ctx, st)
	if err != nil || s == nil {
		t.Fatalf("Store(fs) = %v, %v", s, err)
	}
	if _, err := Store(ctx, config.Storage{Backend: "tape"}); err == nil || !strings.Contains(err.Error(), "storage.backend") {
		t.Errorf("Store(tape) = %v, want an error naming storage.backend", err)
	}
	st.FS.Dir = "/dev/null/log"
	if _, err := Store(ctx, st); err == nil || !strings.Contains(err.Error(), "storage.fs.dir") {
		t.Errorf("Store(fs on a file) = %v, want an error naming storage.fs.dir", err)
	}
}

// A DSN that cannot parse is refused without connecting; other backends
// are not checked.
func TestCheckPostgres_RefusesABadDSN(t *testing.T) {
	t.Parallel()
	st := config.Storage{Backend: config.BackendPostgres}
	st.Postgres.DSN = "postgres://%zz"
	st.Postgres.Table = "dex_blobs"
	if err := CheckPostgres(st); err == nil || !strings.Contains(err.Error(), "storage.postgres") {
		t.Errorf("CheckPostgres = %v, want an error naming storage.postgres", err)
	}
	st.Backend = config.BackendFS
	if err := CheckPostgres(st); err != nil {
		t.Errorf("CheckPostgres(fs) = %v, want nil", err)
	}
}
