package postgres_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/postgres"
	"github.com/dexzd/dexzd/internal/testcerts"
	"github.com/dexzd/dexzd/internal/testenv"
)

// withSSL returns dsn with its sslmode set to mode and sslrootcert to ca.
func withSSL(t *testing.T, dsn, mode, ca string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslmode", mode)
	q.Set("sslrootcert", ca)
	u.RawQuery = q.Encode()
	return u.String()
}

// The store connects with sslmode=verify-full to the test server, whose
// certificate scripts/testenv.sh issued for 127.0.0.1 with a CA of its
// own: the connection is TLS and the store works. With another CA in
// sslrootcert the connection is refused, as a permanent error naming the
// certificate.
func TestStore_VerifyFullTLS(t *testing.T) {
	t.Parallel()
	cfg := testenv.PostgresConfig(t)
	caFile := testenv.PostgresCAFile(t)
	cfg.DSN = withSSL(t, cfg.DSN, "verify-full", caFile)
	s, err := postgres.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("verify-full with the server's CA: %v", err)
	}
	defer s.Close()
	ctx := t.Context()
	if _, err := s.PutIfAbsent(ctx, "k", []byte("over TLS")); err != nil {
		t.Fatal(err)
	}
	if data, _, err := s.Get(ctx, "k"); err != nil || string(data) != "over TLS" {
		t.Fatalf("Get = %q, %v", data, err)
	}
	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var ssl bool
	var version string
	if err := conn.QueryRow(ctx, "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl, &version); err != nil {
		t.Fatal(err)
	}
	if !ssl || !strings.HasPrefix(version, "TLSv1.") {
		t.Fatalf("the connection is not TLS: ssl=%v version=%q", ssl, version)
	}

	wrong := withSSL(t, testenv.PostgresConfig(t).DSN, "verify-full", testcerts.NewCA(t, "another CA").WriteCA(t, t.TempDir(), "ca"))
	_, err = postgres.New(ctx, postgres.Config{DSN: wrong, Table: cfg.Table + "_w"})
	if err == nil {
		t.Fatal("verify-full with another CA connected")
	}
	if !errors.Is(err, blob.ErrPermanent) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("verify-full with another CA: %v; want a permanent error naming the certificate", err)
	}
}
