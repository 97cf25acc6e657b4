package s3_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/blobtest"
	"github.com/dexzd/dexzd/internal/blob/s3"
	"github.com/dexzd/dexzd/internal/testenv"
)

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store { return testenv.NewS3Store(t) })
}

func TestStats_CountsRequests(t *testing.T) {
	t.Parallel()
	s := testenv.NewS3Store(t).(*s3.Store)
	ctx := t.Context()
	v, err := s.PutIfAbsent(ctx, "a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfMatch(ctx, "a", []byte("2"), v); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, "", "", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Stats(), (s3.Stats{Get: 1, Put: 2, List: 1, Delete: 1}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

func TestPrefix_IsolatesStores(t *testing.T) {
	t.Parallel()
	cfg := testenv.S3Config(t)
	// Without its trailing '/' the prefix means the same.
	cfg.Prefix = strings.TrimSuffix(cfg.Prefix, "/")
	a, err := s3.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.PutIfAbsent(t.Context(), "x/1", []byte("a")); err != nil {
		t.Fatal(err)
	}
	// A store on the parent prefix sees the key under a longer name.
	i := strings.LastIndex(cfg.Prefix, "/")
	if i < 0 {
		t.Fatalf("prefix %q has no parent", cfg.Prefix)
	}
	parent := cfg
	parent.Prefix = cfg.Prefix[:i]
	leaf := cfg.Prefix[i+1:] + "/"
	p, err := s3.New(t.Context(), parent)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	keys, err := p.List(t.Context(), leaf, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := leaf + "x/1"; len(keys) != 1 || keys[0] != want {
		t.Fatalf("parent store lists %q, want [%q]", keys, want)
	}
	if data, _, err := p.Get(t.Context(), leaf+"x/1"); err != nil || string(data) != "a" {
		t.Fatalf("parent store Get = %q, %v", data, err)
	}
}

// Covers: a missing bucket is a permanent error for every operation.
func TestErrors_MissingBucketIsPermanent(t *testing.T) {
	t.Parallel()
	cfg := testenv.S3Config(t)
	cfg.Bucket = "dex-missing-bucket"
	s, err := s3.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantAll(t, s, blob.ErrPermanent)
}

// Covers: wrong credentials are a permanent error for every operation.
func TestErrors_WrongCredentialsArePermanent(t *testing.T) {
	cfg := testenv.S3Config(t)
	for _, env := range []string{"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "wrong-"+env)
			s, err := s3.New(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			wantAll(t, s, blob.ErrPermanent)
		})
	}
}

// Covers: a request that gets no answer is transient.
func TestErrors_UnreachableEndpointIsTransient(t *testing.T) {
	fakeCredentials(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s, err := s3.New(t.Context(), s3.Config{Bucket: "b", Endpoint: "http://" + addr, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantAll(t, s, blob.ErrTransient)
}

// Covers: a connection the server drops mid-request is transient.
func TestErrors_ConnectionResetIsTransient(t *testing.T) {
	fakeCredentials(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 512)
			_, _ = c.Read(buf)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST rather than FIN
			}
			c.Close()
		}
	}()
	s, err := s3.New(t.Context(), s3.Config{Bucket: "b", Endpoint: "http://" + l.Addr().String(), PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantAll(t, s, blob.ErrTransient)
}

// Covers: the classification of real SDK errors parsed from S3 error
// answers, for every operation.
func TestErrors_ServerAnswers(t *testing.T) {
	fakeCredentials(t)
	cases := []struct {
		status int
		code   string
		want   map[string]error // by op; ops not named want def
		def    error
	}{
		{503, "SlowDown", nil, blob.ErrTransient},
		{500, "InternalError", nil, blob.ErrTransient},
		{429, "TooManyRequests", nil, blob.ErrTransient},
		{409, "ConditionalRequestConflict", nil, blob.ErrTransient},
		{403, "AccessDenied", nil, blob.ErrPermanent},
		{400, "InvalidRequest", nil, blob.ErrPermanent},
		{404, "NoSuchBucket", nil, blob.ErrPermanent},
		{404, "NoSuchKey", map[string]error{
			blob.OpGet:        blob.ErrNotFound,
			blob.OpPutIfMatch: blob.ErrPrecondition,
			blob.OpDelete:     nil, // deleting a missing key succeeds
		}, blob.ErrPermanent},
		{412, "PreconditionFailed", map[string]error{
			blob.OpPutIfAbsent: blob.ErrPrecondition,
			blob.OpPutIfMatch:  blob.ErrPrecondition,
		}, blob.ErrPermanent},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d_%s", c.status, c.code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(c.status)
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
					`<Error><Code>%s</Code><Message>synthetic</Message><RequestId>1</RequestId></Error>`, c.code)
			}))
			defer srv.Close()
			s, err := s3.New(t.Context(), s3.Config{Bucket: "b", Endpoint: srv.URL, PathStyle: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for op, err := range callAll(t.Context(), s) {
				want, ok := c.want[op]
				if !ok {
					want = c.def
				}
				if want == nil {
					if err != nil {
						t.Errorf("%s: got %v, want success", op, err)
					}
					continue
				}
				if !errors.Is(err, want) || blob.Classify(err) != want {
					t.Errorf("%s: got %v, want one matching %v", op, err, want)
				}
			}
		})
	}
}

func TestNew_RejectsBadConfig(t *testing.T) {
	fakeCredentials(t)
	for _, cfg := range []s3.Config{
		{},
		{Bucket: "b", Prefix: "/abs"},
		{Bucket: "b", Prefix: "a//b"},
		{Bucket: "b", Prefix: ".hidden/"},
	} {
		if _, err := s3.New(t.Context(), cfg); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", cfg)
		}
	}
}

// fakeCredentials makes the SDK sign with test keys and never ask the
// instance metadata service.
func fakeCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test-access-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret-key")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
}

// callAll calls every operation once and returns the errors by op.
func callAll(ctx context.Context, s blob.Store) map[string]error {
	errs := map[string]error{}
	_, _, errs[blob.OpGet] = s.Get(ctx, "k")
	_, errs[blob.OpPutIfAbsent] = s.PutIfAbsent(ctx, "k", []byte("x"))
	_, errs[blob.OpPutIfMatch] = s.PutIfMatch(ctx, "k", []byte("x"), `"0123"`)
	_, errs[blob.OpList] = s.List(ctx, "", "", 0)
	errs[blob.OpDelete] = s.Delete(ctx, "k")
	return errs
}

// wantAll checks that every operation fails with an error of kind.
func wantAll(t *testing.T, s blob.Store, kind error) {
	t.Helper()
	for op, err := range callAll(t.Context(), s) {
		if !errors.Is(err, kind) || blob.Classify(err) != kind {
			t.Errorf("%s: got %v, want one matching %v", op, err, kind)
		}
	}
}
