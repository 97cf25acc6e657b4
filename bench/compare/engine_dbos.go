package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"

	"github.com/dexzd/dexzd/internal/bench"
)

// dbosEngine runs the chain as a DBOS workflow of K steps (RunAsStep)
// in this process, on the PostgreSQL scripts/testenv.sh starts. The server
// processes measured are the postmaster and all its backends.
type dbosEngine struct{}

func (*dbosEngine) name() string { return "dbos" }

// dbosChain is the chain workflow: Steps steps, each a durable step
// returning its input + 1. DBOS records every step's output in PostgreSQL
// before the next one runs.
func dbosChain(ctx dbos.Context, in dbosInput) (int64, error) {
	v := in.Value
	for range in.Steps {
		cur := v
		next, err := dbos.RunAsStep(ctx, func(context.Context) (int64, error) { return cur + 1, nil })
		if err != nil {
			return 0, err
		}
		v = next
	}
	return v, nil
}

type dbosInput struct {
	Value int64 `json:"value"`
	Steps int   `json:"steps"`
}

func (*dbosEngine) round(ctx context.Context, r roundConfig) (Measurement, error) {
	if r.PostgresDSN == "" {
		return Measurement{}, errors.New("no PostgreSQL: set DEX_TEST_POSTGRES_DSN (run under scripts/testenv.sh run --) or pass --postgres")
	}
	postmaster, err := checkPostgres(ctx, r.PostgresDSN)
	if err != nil {
		return Measurement{}, err
	}
	// A fresh schema per round keeps rounds independent.
	schema := "dbos_bench_" + randomHex(4)
	dsn, err := withPoolSize(r.PostgresDSN, r.Callers+8)
	if err != nil {
		return Measurement{}, err
	}
	dctx, err := dbos.NewContext(ctx, dbos.Config{
		AppName: "dex-bench-compare", DatabaseURL: dsn, DatabaseSchema: schema,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return Measurement{}, fmt.Errorf("dbos: new context: %w", err)
	}
	dbos.RegisterWorkflow(dctx, dbosChain)
	if err := dbos.Launch(dctx); err != nil {
		return Measurement{}, fmt.Errorf("dbos: launch: %w", err)
	}
	prefix := fmt.Sprintf("chain-r%d-%s-", r.Round, randomHex(4))
	m, runErr := closedLoop(ctx, loopConfig{
		Flows: r.Flows, Warmup: r.Warmup, Callers: r.Callers,
		ServerCPU: func() (bench.CPUTime, error) { return treeCPU(postmaster) },
		Flow: func(ctx context.Context, i int) error {
			start := chainStart(i)
			h, err := dbos.RunWorkflow(dctx, dbosChain, dbosInput{Value: start, Steps: r.Steps},
				dbos.WithWorkflowID(prefix+strconv.Itoa(i)))
			if err != nil {
				return err
			}
			v, err := h.GetResult()
			if err != nil {
				return err
			}
			if want := start + int64(r.Steps); v != want {
				return fmt.Errorf("wrong output %d, want %d", v, want)
			}
			return nil
		},
	})
	shutErr := dbos.Shutdown(dctx, 30*time.Second)
	// Flush PostgreSQL's dirty pages now rather than during the next
	// engine's round, and drop the round's schema.
	cleanErr := cleanPostgres(context.WithoutCancel(ctx), r.PostgresDSN, schema)
	return m, errors.Join(runErr, shutErr, cleanErr)
}

// checkPostgres refuses a PostgreSQL that does not fsync its commits and
// returns the postmaster's process ID, which must be on this machine.
func checkPostgres(ctx context.Context, dsn string) (int, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for setting, want := range map[string]string{"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"} {
		var v string
		if err := conn.QueryRow(ctx, "SHOW "+setting).Scan(&v); err != nil {
			return 0, fmt.Errorf("SHOW %s: %w", setting, err)
		}
		if v != want {
			return 0, fmt.Errorf("PostgreSQL has %s = %s, want %s: every engine must fsync its commits", setting, v, want)
		}
	}
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return 0, fmt.Errorf("pg_backend_pid: %w", err)
	}
	st, err := readProcStat(backend)
	if err != nil {
		return 0, fmt.Errorf("PostgreSQL must run on this machine to measure its CPU: %w", err)
	}
	return st.ppid, nil
}

func cleanPostgres(ctx context.Context, dsn, schema string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// withPoolSize sets pgxpool's pool_max_conns in a URL DSN.
func withPoolSize(dsn string, n int) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("parse the PostgreSQL DSN: %w", err)
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(n))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		fmt.Fprintln(os.Stderr, "compare: random:", err)
	}
	return hex.EncodeToString(b)
}
