package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dexzd/dexzd/internal/bench"
)

// dexzdServeEngine runs "dex-server-zd serve" alone (no standby) on the
// MinIO or the PostgreSQL of scripts/testenv.sh, from a configuration file
// bench.StartServe writes, with bench.RunChain as the driver and worker.
// Every log batch is a conditional PUT (MinIO) or an INSERT committed with
// PostgreSQL's fsync before it is acknowledged. The server CPU counted is
// dex-server-zd's plus the store's: MinIO's process, or the postmaster and
// all its backends (as for DBOS).
type dexzdServeEngine struct {
	backend string // "s3" or "postgres"
}

func (e *dexzdServeEngine) name() string {
	if e.backend == "s3" {
		return "dexzd-s3"
	}
	return "dexzd-pg"
}

func (e *dexzdServeEngine) round(ctx context.Context, r roundConfig) (Measurement, error) {
	var st bench.ServeStorage
	var storePID int
	var cleanup func() error
	switch e.backend {
	case "s3":
		endpoint, bucket := os.Getenv("DEX_TEST_S3_ENDPOINT"), os.Getenv("DEX_TEST_S3_BUCKET")
		if endpoint == "" || bucket == "" {
			return Measurement{}, errors.New("no MinIO: set DEX_TEST_S3_ENDPOINT and DEX_TEST_S3_BUCKET (run under scripts/testenv.sh run --)")
		}
		region := os.Getenv("AWS_REGION")
		if region == "" {
			region = "us-east-1"
		}
		if err := ensureBucket(ctx, endpoint, bucket, region, os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")); err != nil {
			return Measurement{}, err
		}
		pid, err := minioPID(endpoint)
		if err != nil {
			return Measurement{}, err
		}
		storePID = pid
		// A prefix of its own per round; the objects stay in the test
		// MinIO, whose directory scripts/testenv.sh removes at the end.
		st.S3 = &bench.ServeS3{Endpoint: endpoint, Bucket: bucket, Region: region,
			Prefix: fmt.Sprintf("bench-compare/%s-r%d/", randomHex(4), r.Round)}
	case "postgres":
		if r.PostgresDSN == "" {
			return Measurement{}, errors.New("no PostgreSQL: set DEX_TEST_POSTGRES_DSN (run under scripts/testenv.sh run --) or pass --postgres")
		}
		postmaster, err := checkPostgres(ctx, r.PostgresDSN)
		if err != nil {
			return Measurement{}, err
		}
		storePID = postmaster
		table := fmt.Sprintf("bench_compare_%s_r%d", randomHex(4), r.Round)
		st.Postgres = &bench.ServePostgres{DSN: r.PostgresDSN, Table: table}
		cleanup = func() error { return dropTable(context.WithoutCancel(ctx), r.PostgresDSN, table) }
	default:
		return Measurement{}, fmt.Errorf("unknown backend %q", e.backend)
	}
	srv, err := bench.StartServe(ctx, bench.ServeOptions{Binary: r.DexBinary, Dir: filepath.Join(r.Dir, "serve"), Storage: st})
	if err != nil {
		if cleanup != nil {
			err = errors.Join(err, cleanup())
		}
		return Measurement{}, err
	}
	res, runErr := bench.RunChain(ctx, bench.ChainConfig{
		Addresses: []string{srv.Addr},
		FlowType:  fmt.Sprintf("compare-r%d", r.Round),
		Flows:     r.Flows, Steps: r.Steps, Callers: r.Callers,
		WorkerConcurrency: r.Callers, Warmup: r.Warmup,
		ServerPID: srv.PID(), MetricsURL: srv.MetricsURL,
		StoreCPU: func() (bench.CPUTime, error) { return treeCPU(storePID) },
	})
	stopErr := srv.Stop(30 * time.Second)
	var server bench.CPUTime
	if res.ServerCPU != nil {
		server = *res.ServerCPU
	}
	if res.StoreCPU != nil {
		server = bench.CPUTime{User: server.User + res.StoreCPU.User, System: server.System + res.StoreCPU.System}
	} else if runErr == nil {
		runErr = errors.New("the store's CPU time was not measured")
	}
	m := measurement(res.Completed, res.Failures, res.Elapsed, res.Latency, res.CPU, server)
	m.storeFigures(res)
	if runErr == nil && res.ServerCPU == nil {
		runErr = errors.New("the server's CPU time was not measured")
	}
	if cleanup != nil {
		stopErr = errors.Join(stopErr, cleanup())
	}
	return m, errors.Join(runErr, stopErr)
}

// dropTable drops a PostgreSQL store's table and its sequence.
func dropTable(ctx context.Context, dsn, table string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	for _, stmt := range []string{
		"DROP TABLE IF EXISTS " + pgx.Identifier{table}.Sanitize(),
		"DROP SEQUENCE IF EXISTS " + pgx.Identifier{table + "_version_seq"}.Sanitize(),
		"CHECKPOINT",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// minioPID finds the MinIO server serving endpoint on this machine: a
// process named minio whose command line has "--address HOST:PORT" with the
// endpoint's port, as scripts/testenv.sh starts it.
func minioPID(endpoint string) (int, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Port() == "" {
		return 0, fmt.Errorf("MinIO endpoint %q has no port", endpoint)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("find the MinIO process: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if isMinIO(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), u.Port()) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no MinIO process with --address ...:%s on this machine: its CPU time cannot be measured", u.Port())
}

// isMinIO reports whether argv is "minio server ... --address HOST:port".
func isMinIO(argv []string, port string) bool {
	if len(argv) < 2 || filepath.Base(argv[0]) != "minio" || argv[1] != "server" {
		return false
	}
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, "--address="); ok && strings.HasSuffix(v, ":"+port) {
			return true
		}
		if a == "--address" && i+1 < len(argv) && strings.HasSuffix(argv[i+1], ":"+port) {
			return true
		}
	}
	return false
}
