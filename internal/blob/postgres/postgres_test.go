package postgres_test

import (
	"errors"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/blobtest"
	"github.com/dexzd/dexzd/internal/blob/postgres"
	"github.com/dexzd/dexzd/internal/testenv"
)

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store { return testenv.NewPostgresStore(t) })
}

func TestStats_CountsStatements(t *testing.T) {
	t.Parallel()
	s := testenv.NewPostgresStore(t).(*postgres.Store)
	ctx := t.Context()
	v, err := s.PutIfAbsent(ctx, "a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfMatch(ctx, "a", []byte("2"), v); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, "", "", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Stats(), (postgres.Stats{Get: 1, Put: 2, List: 1, Delete: 1}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

// Covers: versions are decimal and increase, also across delete and
// re-creation of a key.
func TestVersions_IncreaseAcrossRecreate(t *testing.T) {
	t.Parallel()
	s := testenv.NewPostgresStore(t)
	ctx := t.Context()
	var last int64
	for i := range 3 {
		v, err := s.PutIfAbsent(ctx, "k", []byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n <= last {
			t.Fatalf("version %q after %d", v, last)
		}
		last = n
		if err := s.Delete(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
}

// Covers: List orders by bytes (code points), not by a locale, and the
// prefix bound works for prefixes that end in multi-byte characters.
func TestList_ByteOrder(t *testing.T) {
	t.Parallel()
	s := testenv.NewPostgresStore(t)
	ctx := t.Context()
	keys := []string{"a/B", "a/b", "a/_", "a/é", "a/éa", "a/êa", "a/z", "a/~", "a/\U0010FFFF", "a/\U0010FFFFx", "a%/x", "a_/x", "b/\uffff"}
	for _, k := range keys {
		if _, err := s.PutIfAbsent(ctx, k, nil); err != nil {
			t.Fatalf("PutIfAbsent(%q): %v", k, err)
		}
	}
	sorted := slices.Sorted(slices.Values(keys))
	cases := []struct {
		prefix, after string
		limit         int
	}{
		{"", "", 0},
		{"a/", "", 0},
		{"a/é", "", 0},
		{"a/\U0010FFFF", "", 0},
		{"a%", "", 0},
		{"a_", "", 0},
		{"a/", "a/_", 3},
		{"b/", "", 0},
	}
	for _, c := range cases {
		var want []string
		for _, k := range sorted {
			if len(k) >= len(c.prefix) && k[:len(c.prefix)] == c.prefix && k > c.after {
				want = append(want, k)
			}
		}
		if c.limit > 0 && len(want) > c.limit {
			want = want[:c.limit]
		}
		got, err := s.List(ctx, c.prefix, c.after, c.limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d): %v", c.prefix, c.after, c.limit, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("List(%q, %q, %d) = %q, want %q", c.prefix, c.after, c.limit, got, want)
		}
	}
}

// Covers: New from several processes at once on a new table: the schema is
// created once and every store works.
func TestNew_ConcurrentCreation(t *testing.T) {
	t.Parallel()
	cfg := testenv.PostgresConfig(t)
	const n = 6
	stores := make([]*postgres.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = postgres.New(t.Context(), cfg) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("New %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	if _, err := stores[0].PutIfAbsent(t.Context(), "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if data, _, err := stores[n-1].Get(t.Context(), "k"); err != nil || string(data) != "x" {
		t.Fatalf("Get through another store = %q, %v", data, err)
	}
}

// Covers: a server that does not answer is a transient error.
func TestErrors_UnreachableIsTransient(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = postgres.New(t.Context(), postgres.Config{DSN: "postgres://u:p@" + addr + "/db?sslmode=disable&connect_timeout=5"})
	if blob.Classify(err) != blob.ErrTransient {
		t.Fatalf("New against a closed port: got %v, want a transient error", err)
	}
}

// Covers: a wrong password is a permanent error.
func TestErrors_WrongPasswordIsPermanent(t *testing.T) {
	t.Parallel()
	dsn := withUser(t, testenv.PostgresDSN(t), "postgres", "wrong-password")
	_, err := postgres.New(t.Context(), postgres.Config{DSN: dsn, Table: "dex_unused"})
	if blob.Classify(err) != blob.ErrPermanent {
		t.Fatalf("New with a wrong password: got %v, want a permanent error", err)
	}
}

// Covers: a role without privileges on the table gets permanent errors from
// every operation.
func TestErrors_PermissionDeniedIsPermanent(t *testing.T) {
	t.Parallel()
	cfg := testenv.PostgresConfig(t)
	owner, err := postgres.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()

	role := cfg.Table + "_r"
	password := "pw-" + cfg.Table
	testenv.Exec(t, cfg.DSN, `CREATE ROLE `+pgx.Identifier{role}.Sanitize()+` LOGIN PASSWORD '`+password+`'`)
	t.Cleanup(func() { testenv.Exec(t, cfg.DSN, `DROP ROLE IF EXISTS `+pgx.Identifier{role}.Sanitize()) })

	other := cfg
	other.DSN = withUser(t, cfg.DSN, role, password)
	s, err := postgres.New(t.Context(), other)
	if err != nil {
		t.Fatalf("New on an existing table without CREATE rights: %v", err)
	}
	defer s.Close()
	wantAll(t, s, blob.ErrPermanent)
}

// Covers: a table dropped under a store gives permanent errors.
func TestErrors_UndefinedTableIsPermanent(t *testing.T) {
	t.Parallel()
	cfg := testenv.PostgresConfig(t)
	s, err := postgres.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testenv.Exec(t, cfg.DSN, `DROP TABLE `+pgx.Identifier{cfg.Table}.Sanitize())
	wantAll(t, s, blob.ErrPermanent)
}

func TestClose_LaterCallsFail(t *testing.T) {
	t.Parallel()
	s := testenv.NewPostgresStore(t)
	if _, err := s.PutIfAbsent(t.Context(), "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantAll(t, s, blob.ErrPermanent)
}

func TestNew_RejectsBadTableNames(t *testing.T) {
	t.Parallel()
	for _, table := range []string{"Upper", "a-b", "a.b.c", "1abc", `a"b`, "a b", "x123456789012345678901234567890123456789012345678901"} {
		_, err := postgres.New(t.Context(), postgres.Config{DSN: "postgres://u@127.0.0.1:1/db", Table: table})
		if err == nil {
			t.Errorf("New with table %q succeeded", table)
		}
	}
}

// withUser returns dsn (a URL) with another user and password.
func withUser(t *testing.T, dsn, user, password string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// wantAll checks that every operation fails with an error of kind.
func wantAll(t *testing.T, s blob.Store, kind error) {
	t.Helper()
	ctx := t.Context()
	errs := map[string]error{}
	_, _, errs[blob.OpGet] = s.Get(ctx, "k")
	_, errs[blob.OpPutIfAbsent] = s.PutIfAbsent(ctx, "k2", []byte("x"))
	_, errs[blob.OpPutIfMatch] = s.PutIfMatch(ctx, "k", []byte("x"), "1")
	_, errs[blob.OpList] = s.List(ctx, "", "", 0)
	errs[blob.OpDelete] = s.Delete(ctx, "k")
	for op, err := range errs {
		if !errors.Is(err, kind) || blob.Classify(err) != kind {
			t.Errorf("%s: got %v, want one matching %v", op, err, kind)
		}
	}
}
