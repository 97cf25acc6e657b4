// Package ha holds process tests of `dex-server-zd serve` with a cold
// standby: real processes on MinIO (S3), PostgreSQL or a shared directory,
// the Go SDK's worker and client with both addresses, signals, and checks
// of what survived and how fast the standby took over.
//
// Run them with the services: scripts/testenv.sh run -- go test ./test/ha/...
// Without the services the MinIO and PostgreSQL cases skip (or fail under
// DEX_TEST_REQUIRE); the shared-directory cases always run.
package ha

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/fs"
	"github.com/dexzd/dexzd/internal/blob/postgres"
	"github.com/dexzd/dexzd/internal/blob/s3"
	"github.com/dexzd/dexzd/internal/testenv"
	"github.com/dexzd/dexzd/internal/testproc"
	"github.com/dexzd/dexzd/internal/wal"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testproc.Cleanup()
	os.Exit(code)
}

// leaseDuration is lease.duration in these tests: short, for speed.
const leaseDuration = 3 * time.Second

// The chain flow: three sequential steps, each adds one to its input.
type (
	First  struct{ dex.Step[int] }
	Second struct{ dex.Step[int] }
	Third  struct{ dex.Step[int] }
)

func (First) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.Move(dex.To[Second](n + 1)), nil
}
func (Second) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.Move(dex.To[Third](n + 1)), nil
}
func (Third) Execute(_ dex.Context, n int) (dex.Decision, error) {
	return dex.GracefulComplete(n + 1), nil
}

var chainFlow = dex.NewFlow("chain3").Start(First{}).Steps(Second{}, Third{})

// The nap flow waits for a durable timer, then completes with its input
// plus one. napsWaiting records the flows whose WaitFor ran.
type Nap struct{ dex.Step[int] }

const napTimer = time.Second

var napsWaiting sync.Map // flow ID -> true

func (Nap) WaitFor(ctx dex.Context, _ int) (dex.Wait, error) {
	napsWaiting.Store(ctx.Info().FlowID, true)
	return dex.Timer(napTimer), nil
}

func (Nap) Execute(_ dex.Context, n int, _ dex.Results) (dex.Decision, error) {
	return dex.GracefulComplete(n + 1), nil
}

var napFlow = dex.NewFlow("nap").Start(Nap{})

// The hold flow's first attempt never finishes on its own (it runs until
// its context ends); a later attempt completes with its attempt number.
// Starts are logged before the task is sent (SYNC), so a takeover must fail
// attempt 1 and run attempt 2. holdsRunning records the flows whose attempt
// 1 runs.
type Hold struct{ dex.Step[int] }

var holdsRunning sync.Map // flow ID -> true

func (Hold) Options() dex.StepOptions {
	return dex.StepOptions{Execute: dex.MethodOptions{Durability: dex.DurabilitySync,
		Retry: &dex.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 5}}}
}

func (Hold) Execute(ctx dex.Context, _ int) (dex.Decision, error) {
	if ctx.Info().Attempt == 1 {
		holdsRunning.Store(ctx.Info().FlowID, true)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return dex.GracefulComplete(ctx.Info().Attempt), nil
}

var holdFlow = dex.NewFlow("hold").Start(Hold{})

// The later flow has no worker until after the takeover: its first attempt
// is never handed out by the old active and must run as attempt 1.
type Later struct{ dex.Step[int] }

func (Later) Execute(ctx dex.Context, _ int) (dex.Decision, error) {
	return dex.GracefulComplete(ctx.Info().Attempt), nil
}

var laterFlow = dex.NewFlow("later").Start(Later{})

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var fastBackoff = dex.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}

// storage returns the storage section of a configuration for a backend:
// "s3" (MinIO), "postgres" or "fs" (a shared directory). The namespace (a
// prefix, a table, a directory) is the test's own.
func storage(t *testing.T, backend string) string {
	t.Helper()
	yaml, _ := storageWithStore(t, backend)
	return yaml
}

// storageWithStore is storage plus a function that opens the same durable
// store from the test, with the node's key layout, to look at what the
// processes wrote.
func storageWithStore(t *testing.T, backend string) (string, func(t *testing.T) (blob.Store, wal.Layout)) {
	t.Helper()
	switch backend {
	case "s3":
		c := testenv.S3Config(t)
		return fmt.Sprintf("storage:\n  backend: s3\n  s3:\n    bucket: %q\n    prefix: %q\n    endpoint: %q\n    region: %q\n    pathStyle: true\n",
				c.Bucket, c.Prefix, c.Endpoint, c.Region), func(t *testing.T) (blob.Store, wal.Layout) {
				t.Helper()
				noPrefix := c
				noPrefix.Prefix = "" // the layout carries the prefix
				st, err := s3.New(t.Context(), noPrefix)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st, wal.MustLayout(c.Prefix, nodeID)
			}
	case "postgres":
		c := testenv.PostgresConfig(t)
		return fmt.Sprintf("storage:\n  backend: postgres\n  postgres:\n    dsn: %q\n    table: %q\n", c.DSN, c.Table),
			func(t *testing.T) (blob.Store, wal.Layout) {
				t.Helper()
				st, err := postgres.New(t.Context(), c)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st, wal.MustLayout("", nodeID)
			}
	case "fs":
		dir := t.TempDir()
		return fmt.Sprintf("storage:\n  backend: fs\n  fs:\n    dir: %q\n", dir), func(t *testing.T) (blob.Store, wal.Layout) {
			t.Helper()
			st, err := fs.Open(dir, fs.Strict)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st, wal.MustLayout("", nodeID)
		}
	}
	t.Fatalf("unknown backend %q", backend)
	return "", nil
}

// nodeID is the node every test process runs.
const nodeID = "ha"

// server is one serve process's configuration.
type server struct {
	cfg     string // the configuration file
	addr    string // api.listen
	metrics string // metrics.listen
	dir     string // localStore.dir
}

// newServer writes the configuration of a process of node "ha" with its
// own local store, API and metrics addresses; extra is appended (YAML).
func newServer(t *testing.T, storageYAML, extra string) server {
	t.Helper()
	return newServerOn(t, storageYAML, extra, "")
}

// newServerOn is newServer with localStore.dir set to localDir (empty: a
// directory of its own).
func newServerOn(t *testing.T, storageYAML, extra, localDir string) server {
	t.Helper()
	return newServerWith(t, storageYAML, extra, localDir, leaseDuration)
}

// newServerWith is newServerOn with lease.duration set to lease.
func newServerWith(t *testing.T, storageYAML, extra, localDir string, lease time.Duration) server {
	t.Helper()
	dir := t.TempDir()
	if localDir == "" {
		localDir = filepath.Join(dir, "local")
	}
	s := server{addr: testproc.FreeAddr(t), metrics: testproc.FreeAddr(t), dir: localDir}
	s.cfg = filepath.Join(dir, "serve.yaml")
	yaml := fmt.Sprintf("nodeId: %s\nlease:\n  duration: %v\napi:\n  listen: %q\nmetrics:\n  listen: %q\nlocalStore:\n  dir: %q\n%s%s",
		nodeID, lease, s.addr, s.metrics, s.dir, storageYAML, extra)
	if err := os.WriteFile(s.cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s server) start(t *testing.T) *testproc.Proc {
	t.Helper()
	return testproc.Start(t, "serve", "--config", s.cfg)
}

// waitLog waits until the process's log contains substr.
func waitLog(t *testing.T, p *testproc.Proc, substr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.Log(), substr) {
		select {
		case <-p.Exited():
			t.Fatalf("process exited with %d before logging %q:\n%s", p.ExitCode(), substr, p.Log())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log within %v:\n%s", substr, timeout, p.Log())
		}
	}
}

// waitingLine is what a standby logs while another process holds the
// lease.
const waitingLine = "lease held by another process; waiting"

// startPair starts an active process and a cold standby on the same
// storage and returns them once the active serves and the standby waits.
func startPair(t *testing.T, storageYAML string) (a, b server, pa, pb *testproc.Proc) {
	t.Helper()
	return startPairWith(t, storageYAML, leaseDuration)
}

// startPairWith is startPair with lease.duration set to lease.
func startPairWith(t *testing.T, storageYAML string, lease time.Duration) (a, b server, pa, pb *testproc.Proc) {
	t.Helper()
	return startPairMode(t, storageYAML, lease, false)
}

// hotYAML configures a hot standby.
const hotYAML = "standby:\n  mode: hot\n"

// startPairMode is startPairWith with both processes in standby.mode hot
// when hot is set; it then also waits until the standby follows the log.
func startPairMode(t *testing.T, storageYAML string, lease time.Duration, hot bool) (a, b server, pa, pb *testproc.Proc) {
	t.Helper()
	extra := ""
	if hot {
		extra = hotYAML
	}
	a, b = newServerWith(t, storageYAML, extra, "", lease), newServerWith(t, storageYAML, extra, "", lease)
	pa = a.start(t)
	pa.Serving(t, 30*time.Second)
	pb = b.start(t)
	waitLog(t, pb, waitingLine, 30*time.Second)
	if hot {
		waitFollowing(t, b, 30*time.Second)
	}
	return a, b, pa, pb
}

// followingState is the sample that is 1 while a hot standby follows the
// log within behindLagThreshold.
const followingState = `dexzd_hot_standby_state{state="following"}`

// waitFollowing waits until the process's metrics report it following.
func waitFollowing(t *testing.T, s server, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for scrape(t, s.metrics)[followingState] != "1" {
		if time.Now().After(deadline) {
			t.Fatalf("the hot standby is not following within %v: %v", timeout, scrape(t, s.metrics))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var replayedLine = regexp.MustCompile(`msg="log replayed and fenced".* from=(\d+) fence=(\d+)`)

// replayed returns the from and fence sequence numbers of the process's
// "log replayed and fenced" line: it replayed fence-from batches.
func replayed(t *testing.T, p *testproc.Proc) (from, fence uint64) {
	t.Helper()
	m := replayedLine.FindStringSubmatch(p.Log())
	if m == nil {
		t.Fatalf("no replay line in the log:\n%s", p.Log())
	}
	from, _ = strconv.ParseUint(m[1], 10, 64)
	fence, _ = strconv.ParseUint(m[2], 10, 64)
	return from, fence
}

// scrape reads the metrics at addr: the value of each sample by its name
// with labels ("dexzd_leader", `dexzd_hot_standby_state{state="cold"}`).
func scrape(t *testing.T, addr string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if name, val, ok := strings.Cut(line, " "); ok {
			out[name] = val
		}
	}
	return out
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// waitStored waits until every id is in m.
func waitStored(t *testing.T, m *sync.Map, ids []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, id := range ids {
		for {
			if _, ok := m.Load(id); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not start within %v", id, timeout)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// runWorker runs a worker of flows on addrs (maxTasks concurrent tasks,
// 0 for the SDK's default) until the returned function is called (it may
// be called more than once) or the test ends.
func runWorker(t *testing.T, ctx context.Context, addrs []string, maxTasks int, flows ...*dex.Flow) func() {
	t.Helper()
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: addrs, MaxConcurrentTasks: maxTasks, Logger: quietLogger(),
		ReconnectBackoff: fastBackoff, DrainTimeout: time.Second}, flows...)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	var once sync.Once
	stopAndWait := func() { once.Do(func() { stop(); <-done }) }
	t.Cleanup(stopAndWait)
	return stopAndWait
}

// dialClient dials a client on addrs, closed when the test ends.
func dialClient(t *testing.T, ctx context.Context, addrs []string) *dex.Client {
	t.Helper()
	c, err := dex.NewClient(dex.ClientOptions{Addresses: addrs, Logger: quietLogger(), RetryBackoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
