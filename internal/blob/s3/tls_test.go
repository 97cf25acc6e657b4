package s3_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/blobtest"
	"github.com/dexzd/dexzd/internal/blob/s3"
	"github.com/dexzd/dexzd/internal/testcerts"
	"github.com/dexzd/dexzd/internal/testenv"
	"github.com/dexzd/dexzd/internal/testproc"
)

// kmsKeyID is the key MinIO's built-in KMS holds in the HTTPS MinIO.
const kmsKeyID = "dex-test-key"

// tlsMinIO is a MinIO of this test binary over HTTPS, with a certificate
// for 127.0.0.1 that a CA made here issued (MinIO reads it from its certs
// dir), and a KMS key so that it honours server-side encryption.
type tlsMinIO struct {
	endpoint string
	pool     *x509.CertPool
	bucket   string
}

// startTLSMinIO starts the HTTPS MinIO with the credentials of the
// environment (those of scripts/testenv.sh's MinIO), so that s3.New finds
// them as usual, and creates its bucket.
func startTLSMinIO(t *testing.T) *tlsMinIO {
	t.Helper()
	bin := testenv.MinIOBinary(t)
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if err := os.Mkdir(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	ca := testcerts.NewCA(t, "minio CA")
	leaf := ca.Issue(t, testcerts.Spec{CommonName: "127.0.0.1", Server: true})
	testcerts.WriteFile(t, filepath.Join(certs, "public.crt"), leaf.CertPEM)
	testcerts.WriteFile(t, filepath.Join(certs, "private.key"), leaf.KeyPEM)

	addr, console := testproc.FreeAddr(t), testproc.FreeAddr(t)
	cmd := exec.Command(bin, "server", "--quiet", "--certs-dir", certs, "--address", addr, "--console-address", console, filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+os.Getenv("AWS_ACCESS_KEY_ID"), "MINIO_ROOT_PASSWORD="+os.Getenv("AWS_SECRET_ACCESS_KEY"),
		"MINIO_UPDATE=off", "MINIO_BROWSER=off",
		"MINIO_KMS_SECRET_KEY="+kmsKeyID+":"+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32)))
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var exited atomic.Bool
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); exited.Store(true); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("HTTPS MinIO log:\n%s", logs.String())
		}
	})
	m := &tlsMinIO{endpoint: "https://" + addr, pool: ca.Pool(), bucket: "dex-tls"}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: m.pool, MinVersion: tls.VersionTLS12}}, Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get(m.endpoint + "/minio/health/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if exited.Load() || time.Now().After(deadline) {
			t.Fatalf("the HTTPS MinIO is not ready (last: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c, closeClient := m.client(t)
	defer closeClient()
	if _, err := c.CreateBucket(t.Context(), &s3api.CreateBucketInput{Bucket: aws.String(m.bucket)}); err != nil {
		t.Fatal(err)
	}
	return m
}

// client is a plain SDK client of the HTTPS MinIO, to look at objects.
func (m *tlsMinIO) client(t *testing.T) (*s3api.Client, func()) {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(t.Context(), config.WithRegion("us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: m.pool, MinVersion: tls.VersionTLS12}}
	return s3api.NewFromConfig(cfg, func(o *s3api.Options) {
		o.BaseEndpoint = aws.String(m.endpoint)
		o.UsePathStyle = true
		o.HTTPClient = &http.Client{Transport: tr}
	}), tr.CloseIdleConnections
}

var prefixes atomic.Int64

func (m *tlsMinIO) config(sse, kms string) s3.Config {
	return s3.Config{Bucket: m.bucket, Prefix: fmt.Sprintf("p%d/", prefixes.Add(1)), Endpoint: m.endpoint, Region: "us-east-1",
		PathStyle: true, RootCAs: m.pool, SSE: sse, KMSKeyID: kms}
}

func (m *tlsMinIO) store(t *testing.T, cfg s3.Config) *s3.Store {
	t.Helper()
	s, err := s3.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The S3 store over HTTPS with storage.s3.caFile's pool: it passes the
// conformance suite with SSE-KMS, every object it writes (PutIfAbsent and
// PutIfMatch) carries the server-side encryption it was configured with,
// and without the CA (the system's roots, or another CA) every call fails
// as a permanent error naming the certificate.
func TestStore_HTTPSWithCAFileAndServerSideEncryption(t *testing.T) {
	t.Parallel()
	m := startTLSMinIO(t)
	t.Run("Conformance", func(t *testing.T) {
		blobtest.Run(t, func(t *testing.T) blob.Store { return m.store(t, m.config("aws:kms", kmsKeyID)) })
	})

	raw, closeRaw := m.client(t)
	defer closeRaw()
	for _, tc := range []struct{ sse, kms, wantKey string }{
		{"", "", ""},
		{"AES256", "", ""},
		{"aws:kms", kmsKeyID, kmsKeyID},
	} {
		t.Run("sse="+tc.sse, func(t *testing.T) {
			cfg := m.config(tc.sse, tc.kms)
			s := m.store(t, cfg)
			ctx := t.Context()
			// Both kinds of PutObject: a create, and a conditional update.
			v, err := s.PutIfAbsent(ctx, "a", []byte("1"))
			if err == nil {
				_, err = s.PutIfMatch(ctx, "a", []byte("2"), v)
			}
			if err == nil {
				_, err = s.PutIfAbsent(ctx, "b", []byte("3"))
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"a", "b"} {
				h, err := raw.HeadObject(ctx, &s3api.HeadObjectInput{Bucket: aws.String(m.bucket), Key: aws.String(cfg.Prefix + k)})
				if err != nil {
					t.Fatal(err)
				}
				if string(h.ServerSideEncryption) != tc.sse {
					t.Errorf("object %q: server-side encryption %q, want %q", k, h.ServerSideEncryption, tc.sse)
				}
				if got := aws.ToString(h.SSEKMSKeyId); !strings.Contains(got, tc.wantKey) || tc.wantKey == "" && got != "" {
					t.Errorf("object %q: KMS key %q, want %q", k, got, tc.wantKey)
				}
			}
			if data, _, err := s.Get(ctx, "a"); err != nil || string(data) != "2" {
				t.Errorf("Get = %q, %v", data, err)
			}
		})
	}

	for name, pool := range map[string]*x509.CertPool{"system roots": nil, "another CA": testcerts.NewCA(t, "another CA").Pool()} {
		cfg := m.config("", "")
		cfg.RootCAs = pool
		s := m.store(t, cfg)
		_, _, err := s.Get(t.Context(), "a")
		if !errors.Is(err, blob.ErrPermanent) || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: Get = %v; want a permanent error naming the certificate", name, err)
		}
	}
}
