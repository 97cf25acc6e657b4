package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ServeOptions configure StartServe: one "dex-server-zd serve" process (no
// standby runs beside it) on a durable store.
type ServeOptions struct {
	// Binary is the dex-server-zd executable (BuildServer makes one).
	Binary string
	// Dir holds the configuration file and the local store; it should be
	// empty.
	Dir string
	// Storage is the durable store: S3 or Postgres.
	Storage ServeStorage
	// ReadyTimeout bounds the wait for dex.FlowService SERVING; default
	// 30 s.
	ReadyTimeout time.Duration
}

// ServeStorage is the storage section of the configuration StartServe
// writes. Set S3 or Postgres.
type ServeStorage struct {
	// S3 is an S3-compatible store (path-style addressing). Credentials
	// come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
	S3 *ServeS3
	// Postgres is a PostgreSQL store.
	Postgres *ServePostgres
}

// ServeS3 is storage.s3 of the configuration.
type ServeS3 struct {
	Endpoint, Bucket, Prefix, Region string
}

// ServePostgres is storage.postgres of the configuration.
type ServePostgres struct {
	DSN, Table string
}

// ServeConfigYAML renders the configuration file StartServe writes: the API
// and metrics on the given addresses, the local store in localDir, the
// durable store of st.
func ServeConfigYAML(apiAddr, metricsAddr, localDir string, st ServeStorage) (string, error) {
	q := strconv.Quote
	var b strings.Builder
	fmt.Fprintf(&b, "nodeId: bench\napi:\n  listen: %s\nmetrics:\n  listen: %s\nlocalStore:\n  dir: %s\nstorage:\n",
		q(apiAddr), q(metricsAddr), q(localDir))
	switch {
	case st.S3 != nil && st.Postgres != nil:
		return "", errors.New("both S3 and Postgres storage set")
	case st.S3 != nil:
		region := st.S3.Region
		if region == "" {
			region = "us-east-1"
		}
		fmt.Fprintf(&b, "  backend: s3\n  s3:\n    endpoint: %s\n    bucket: %s\n    prefix: %s\n    region: %s\n    pathStyle: true\n",
			q(st.S3.Endpoint), q(st.S3.Bucket), q(st.S3.Prefix), q(region))
	case st.Postgres != nil:
		fmt.Fprintf(&b, "  backend: postgres\n  postgres:\n    dsn: %s\n    table: %s\n", q(st.Postgres.DSN), q(st.Postgres.Table))
	default:
		return "", errors.New("no storage: set S3 or Postgres")
	}
	return b.String(), nil
}

// StartServe writes a configuration file into opts.Dir and starts
// "dex-server-zd serve --config FILE" with the API and /metrics on free
// loopback ports; it returns once the process reports dex.FlowService
// SERVING. On an error the process is killed. Stop or Kill it when done.
func StartServe(ctx context.Context, opts ServeOptions) (*DevServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	maddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	local := filepath.Join(opts.Dir, "local")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return nil, fmt.Errorf("make the local store directory: %w", err)
	}
	y, err := ServeConfigYAML(addr, maddr, local, opts.Storage)
	if err != nil {
		return nil, fmt.Errorf("bench: serve configuration: %w", err)
	}
	path := filepath.Join(opts.Dir, "serve.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		return nil, fmt.Errorf("write the configuration: %w", err)
	}
	return startServer(ctx, opts.Binary, []string{"serve", "--config", path}, addr, "http://"+maddr+"/metrics", opts.ReadyTimeout)
}
