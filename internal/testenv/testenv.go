// Package testenv connects tests to the real services that
// scripts/testenv.sh starts: MinIO (S3) and PostgreSQL. Only tests import it.
//
// Every helper gives its caller a namespace of its own (a key prefix, a
// table) and removes it when the test ends. When a service's variables are
// missing the helpers skip the test, unless DEX_TEST_REQUIRE names the
// service (a comma list of "s3" and "postgres"), in which case they fail it:
// CI sets DEX_TEST_REQUIRE so that a skipped integration test cannot pass
// unnoticed.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// Environment variables read by the helpers; scripts/testenv.sh sets them.
const (
	EnvS3Endpoint  = "DEX_TEST_S3_ENDPOINT"
	EnvS3Bucket    = "DEX_TEST_S3_BUCKET"
	EnvPostgresDSN = "DEX_TEST_POSTGRES_DSN"
	// EnvPostgresCAFile is the CA certificate of the test PostgreSQL's
	// TLS certificate (for sslmode=verify-full).
	EnvPostgresCAFile = "DEX_TEST_POSTGRES_CA_FILE"
	// EnvMinIOBin is the MinIO binary, for tests that start their own.
	EnvMinIOBin = "DEX_TEST_MINIO_BIN"
	EnvRequire  = "DEX_TEST_REQUIRE"
)

// Service names accepted in DEX_TEST_REQUIRE.
const (
	ServiceS3       = "s3"
	ServicePostgres = "postgres"
)

// cleanupTimeout bounds the removal of a test's namespace.
const cleanupTimeout = time.Minute

// Required reports whether DEX_TEST_REQUIRE names service.
func Required(service string) bool {
	for s := range strings.SplitSeq(os.Getenv(EnvRequire), ",") {
		if strings.EqualFold(strings.TrimSpace(s), service) {
			return true
		}
	}
	return false
}

// lookup returns the values of the variables vars, or skips (or, when
// service is required, fails) the test if one is empty.
func lookup(tb testing.TB, service string, vars ...string) []string {
	tb.Helper()
	var vals, missing []string
	for _, v := range vars {
		val := os.Getenv(v)
		if val == "" {
			missing = append(missing, v)
		}
		vals = append(vals, val)
	}
	if len(missing) == 0 {
		return vals
	}
	msg := fmt.Sprintf("%s not set; run the tests through scripts/testenv.sh run -- go test ...", strings.Join(missing, ", "))
	if Required(service) {
		tb.Fatalf("%s is required by %s=%q but %s", service, EnvRequire, os.Getenv(EnvRequire), msg)
		return nil
	}
	tb.Skip(msg)
	return nil
}

// uniqueName returns a name made of the test's name, cut to max bytes of
// lower-case letters, digits and '_', and a random suffix.
func uniqueName(tb testing.TB, max int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(tb.Name()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > max {
		name = name[:max]
	}
	return name + "_" + randomHex(4)
}

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf) // never fails
	return hex.EncodeToString(buf)
}

// cleanupContext is the context for removing a namespace: tb.Context is
// already cancelled when cleanups run.
func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), cleanupTimeout)
}
