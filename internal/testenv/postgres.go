package testenv

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/postgres"
)

// PostgresDSN returns the DSN of the test database server (as its
// superuser), or skips the test.
func PostgresDSN(tb testing.TB) string {
	tb.Helper()
	return lookup(tb, ServicePostgres, EnvPostgresDSN)[0]
}

// PostgresCAFile returns the file of the CA that issued the test database
// server's TLS certificate (for 127.0.0.1 and localhost), or skips the
// test.
func PostgresCAFile(tb testing.TB) string {
	tb.Helper()
	return lookup(tb, ServicePostgres, EnvPostgresCAFile)[0]
}

// PostgresConfig returns the configuration of a store on a table of its own,
// which is dropped (with its sequence) when the test ends. The table does not
// exist yet: postgres.New creates it.
func PostgresConfig(tb testing.TB) postgres.Config {
	tb.Helper()
	cfg := postgres.Config{DSN: PostgresDSN(tb), Table: "t_" + uniqueName(tb, 38)}
	tb.Cleanup(func() {
		// The sequence is owned by the table and goes with it; it is named
		// here too in case the table was never created.
		Exec(tb, cfg.DSN,
			`DROP TABLE IF EXISTS `+pgx.Identifier{cfg.Table}.Sanitize(),
			`DROP SEQUENCE IF EXISTS `+pgx.Identifier{cfg.Table + "_version_seq"}.Sanitize())
	})
	return cfg
}

// NewPostgresStore returns a store on a table of its own, closed and dropped
// when the test ends.
func NewPostgresStore(tb testing.TB) blob.Store {
	tb.Helper()
	cfg := PostgresConfig(tb)
	s, err := postgres.New(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("open PostgreSQL store: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Exec runs statements on one connection to dsn, reporting failures with
// tb.Errorf. Tests use it for setup (roles, grants) and cleanups use it
// after the test's context has ended.
func Exec(tb testing.TB, dsn string, stmts ...string) {
	tb.Helper()
	ctx, cancel := cleanupContext()
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Errorf("connect to PostgreSQL: %v", err)
		return
	}
	defer conn.Close(ctx)
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			tb.Errorf("%s: %v", stmt, err)
			return
		}
	}
}
