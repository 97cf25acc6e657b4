// Package open opens the durable store a configuration names
// (storage.backend: s3, postgres or fs), so that the process lifecycle
// (package node) gets a blob.Store without knowing the backends.
package open

import (
	"context"
	"fmt"

	"github.com/dexzd/dexzd/internal/auth"
	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/blob/postgres"
	"github.com/dexzd/dexzd/internal/blob/s3"
	"github.com/dexzd/dexzd/internal/config"
)

// Store opens the durable store storage.backend names. S3 credentials come
// from the standard AWS sources (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// shared files, roles); PostgreSQL creates its table if it is missing; fs
// uses strict durability and is safe for several processes on one host.
// The node's keys in it start with Prefix(st).
func Store(ctx context.Context, st config.Storage) (blob.Store, error) {
	switch st.Backend {
	case config.BackendS3:
		cfg := s3.Config{Bucket: st.S3.Bucket, Endpoint: st.S3.Endpoint, Region: st.S3.Region,
			PathStyle: st.S3.PathStyle, SSE: st.S3.SSE, KMSKeyID: st.S3.KMSKeyID}
		if st.S3.CAFile != "" {
			pool, err := auth.LoadCertPool(st.S3.CAFile)
			if err != nil {
				return nil, fmt.Errorf("storage.s3.caFile: %w", err)
			}
			cfg.RootCAs = pool
		}
		s, err := s3.New(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("storage.s3: %w", err)
		}
		return s, nil
	case config.BackendPostgres:
		s, err := postgres.New(ctx, postgres.Config{DSN: st.Postgres.DSN, Table: st.Postgres.Table})
		if err != nil {
			return nil, fmt.Errorf("storage.postgres: %w", err)
		}
		return s, nil
	case config.BackendFS:
		s, err := fs.Open(st.FS.Dir, fs.Strict)
		if err != nil {
			return nil, fmt.Errorf("storage.fs.dir: %w", err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("storage.backend: unknown backend %q", st.Backend)
}

// Prefix is the key prefix of the node's layout (wal.NewLayout) in the
// store st names: storage.s3.prefix for s3, none otherwise.
func Prefix(st config.Storage) string {
	if st.Backend == config.BackendS3 {
		return st.S3.Prefix
	}
	return ""
}

// CheckPostgres reports, without connecting, a PostgreSQL DSN that does
// not parse or a table name the backend does not accept; nil for the other
// backends.
func CheckPostgres(st config.Storage) error {
	if st.Backend != config.BackendPostgres {
		return nil
	}
	if err := postgres.CheckConfig(postgres.Config{DSN: st.Postgres.DSN, Table: st.Postgres.Table}); err != nil {
		return fmt.Errorf("storage.postgres: %w", err)
	}
	return nil
}
