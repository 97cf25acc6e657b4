package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"

	"github.com/dexzd/dexzd/internal/testproc"
)

// A service is a process the chaos test owns: MinIO, PostgreSQL or
// toxiproxy. It can be SIGKILLed and restarted with the same arguments, on
// the same data and port.
type service struct {
	name  string
	argv  []string
	env   []string
	cred  *syscall.Credential // PostgreSQL runs as its own user under root
	log   string              // the log file, appended to by every start
	ready func(ctx context.Context) error

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// start starts the process and waits until ready answers.
func (s *service) start(t *testing.T) {
	t.Helper()
	if err := s.startErr(t.Context()); err != nil {
		t.Fatalf("start %s: %v", s.name, err)
	}
}

func (s *service) startErr(ctx context.Context) error {
	f, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a kill takes PostgreSQL's backends with the
	// postmaster, as a crash of its host would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = f.Close(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.ready(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited during startup: %w\n%s", s.name, err, tail(s.log))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within 60 s: %w\n%s", s.name, err, tail(s.log))
		}
	}
}

// kill SIGKILLs the process group and waits for the process to end.
func (s *service) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// tail returns the last lines of a log file.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// binaries are the services' programs, from scripts/testenv.sh.
type binaries struct {
	minio, toxiproxy, pgBin string
}

// Variables scripts/testenv.sh sets for the chaos tests.
const (
	envMinIO     = "DEX_TEST_MINIO_BIN"
	envToxiproxy = "DEX_TEST_TOXIPROXY_BIN"
	envPGBin     = "DEX_TEST_PG_BIN"
)

// findBinaries returns the programs, or skips the test (fails it when
// DEX_TEST_REQUIRE names a service, as under make test) when one is missing.
func findBinaries(t *testing.T) binaries {
	t.Helper()
	testproc.Binary(t) // skips under -short
	b := binaries{minio: os.Getenv(envMinIO), toxiproxy: os.Getenv(envToxiproxy), pgBin: os.Getenv(envPGBin)}
	var missing []string
	for _, v := range []struct{ name, val string }{{envMinIO, b.minio}, {envToxiproxy, b.toxiproxy}, {envPGBin, b.pgBin}} {
		if v.val == "" {
			missing = append(missing, v.name)
		}
	}
	if len(missing) == 0 {
		return b
	}
	msg := strings.Join(missing, ", ") + " not set; run the chaos tests through scripts/testenv.sh run -- go test ./test/chaos"
	if os.Getenv("DEX_TEST_REQUIRE") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return b
}

// startMinIO starts a MinIO server of the test's own on a data directory
// of its own, with the credentials the server processes read from the
// environment, and creates the bucket.
func startMinIO(t *testing.T, bin, bucket string) (*service, string) {
	t.Helper()
	dir := t.TempDir()
	addr, console := testproc.FreeAddr(t), testproc.FreeAddr(t)
	s := &service{
		name: "MinIO",
		argv: []string{bin, "server", "--quiet", "--address", addr, "--console-address", console, filepath.Join(dir, "data")},
		env: []string{"MINIO_ROOT_USER=" + os.Getenv("AWS_ACCESS_KEY_ID"), "MINIO_ROOT_PASSWORD=" + os.Getenv("AWS_SECRET_ACCESS_KEY"),
			"MINIO_UPDATE=off", "MINIO_BROWSER=off"},
		log: filepath.Join(dir, "minio.log"),
		ready: func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/minio/health/ready", nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return errors.New(resp.Status)
			}
			return nil
		},
	}
	s.start(t)
	t.Cleanup(s.kill)
	createBucket(t, "http://"+addr, bucket)
	return s, addr
}

func createBucket(t *testing.T, endpoint, bucket string) {
	t.Helper()
	ctx := t.Context()
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	defer transport.CloseIdleConnections()
	client := s3api.NewFromConfig(awsCfg, func(o *s3api.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
		o.HTTPClient = &http.Client{Transport: transport}
	})
	if _, err := client.CreateBucket(ctx, &s3api.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

// startPostgres starts a PostgreSQL server of the test's own (initdb on a
// fresh directory, trust authentication on loopback) and returns it with
// its address.
func startPostgres(t *testing.T, pgBin string) (*service, string) {
	t.Helper()
	// Not t.TempDir: the postgres user must reach the directory.
	root, err := os.MkdirTemp("", "dex-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("user postgres (initdb refuses to run as root): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(root, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(root, "data")
	initdb := exec.Command(filepath.Join(pgBin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "-N")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	addr := testproc.FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	s := &service{
		name: "PostgreSQL",
		argv: []string{filepath.Join(pgBin, "postgres"), "-D", data, "-c", "listen_addresses=127.0.0.1", "-c", "port=" + port,
			"-c", "unix_socket_directories=" + root, "-c", "max_connections=200"},
		cred: cred,
		log:  filepath.Join(root, "postgres.log"),
		ready: func(ctx context.Context) error {
			conn, err := pgx.Connect(ctx, postgresDSN(addr))
			if err != nil {
				return err
			}
			return conn.Close(ctx)
		},
	}
	s.start(t)
	t.Cleanup(s.kill)
	return s, addr
}

func postgresDSN(addr string) string {
	return "postgres://postgres@" + addr + "/postgres?sslmode=disable"
}

// toxiproxy is a toxiproxy server of the test's own and the client of its
// HTTP API.
type toxiproxy struct {
	api string
}

func startToxiproxy(t *testing.T, bin string) *toxiproxy {
	t.Helper()
	api := testproc.FreeAddr(t)
	host, port, _ := strings.Cut(api, ":")
	tp := &toxiproxy{api: "http://" + api}
	s := &service{
		name: "toxiproxy",
		argv: []string{bin, "-host", host, "-port", port},
		log:  filepath.Join(t.TempDir(), "toxiproxy.log"),
		ready: func(ctx context.Context) error {
			return tp.call(ctx, http.MethodGet, "/version", nil)
		},
	}
	s.start(t)
	t.Cleanup(s.kill)
	return tp
}

func (tp *toxiproxy) call(ctx context.Context, method, path string, body any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, tp.api+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("toxiproxy %s %s: %s %s", method, path, resp.Status, msg)
	}
	return nil
}

// proxy creates a proxy to upstream and returns the address it listens on.
func (tp *toxiproxy) proxy(t *testing.T, name, upstream string) string {
	t.Helper()
	listen := testproc.FreeAddr(t)
	if err := tp.call(t.Context(), http.MethodPost, "/proxies",
		map[string]any{"name": name, "listen": listen, "upstream": upstream, "enabled": true}); err != nil {
		t.Fatal(err)
	}
	return listen
}

// A toxic is one toxiproxy toxic, applied to both directions.
type toxic struct {
	kind     string // latency, bandwidth, reset_peer, timeout, ...
	toxicity float64
	attrs    map[string]int
}

// add adds the toxic to both streams of the proxy.
func (tp *toxiproxy) add(t *testing.T, proxy string, tx toxic) {
	t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		if err := tp.call(t.Context(), http.MethodPost, "/proxies/"+proxy+"/toxics", map[string]any{
			"name": tx.kind + "_" + stream, "type": tx.kind, "stream": stream, "toxicity": tx.toxicity, "attributes": tx.attrs,
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// clear removes every toxic and enables every proxy.
func (tp *toxiproxy) clear(t *testing.T) {
	t.Helper()
	if err := tp.call(t.Context(), http.MethodPost, "/reset", nil); err != nil {
		t.Fatal(err)
	}
}
