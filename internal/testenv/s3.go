package testenv

import (
	"errors"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/s3"
)

var (
	bucketsMu sync.Mutex
	buckets   = map[string]bool{} // endpoint + " " + bucket, created or found
)

// S3Config returns the configuration of a store on the test bucket under a
// prefix of its own, which is emptied when the test ends. It creates the
// bucket at first use.
func S3Config(tb testing.TB) s3.Config {
	tb.Helper()
	vals := lookup(tb, ServiceS3, EnvS3Endpoint, EnvS3Bucket)
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	cfg := s3.Config{
		Bucket:    vals[1],
		Prefix:    "test/" + uniqueName(tb, 80) + "/",
		Endpoint:  vals[0],
		Region:    region,
		PathStyle: true,
	}
	ensureBucket(tb, cfg)
	tb.Cleanup(func() { emptyPrefix(tb, cfg) })
	return cfg
}

// MinIOBinary returns the MinIO binary scripts/testenv.sh installed, for a
// test that starts a MinIO of its own, or skips the test.
func MinIOBinary(tb testing.TB) string {
	tb.Helper()
	return lookup(tb, ServiceS3, EnvMinIOBin)[0]
}

// NewS3Store returns a store on a prefix of its own, closed and emptied when
// the test ends.
func NewS3Store(tb testing.TB) blob.Store {
	tb.Helper()
	cfg := S3Config(tb)
	s, err := s3.New(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("open S3 store: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// ensureBucket creates cfg.Bucket unless this process did so already.
// Creation is idempotent, so test processes may race on it.
func ensureBucket(tb testing.TB, cfg s3.Config) {
	tb.Helper()
	bucketsMu.Lock()
	defer bucketsMu.Unlock()
	id := cfg.Endpoint + " " + cfg.Bucket
	if buckets[id] {
		return
	}
	ctx := tb.Context()
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(cfg.Region))
	if err != nil {
		tb.Fatalf("load AWS config: %v", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	defer transport.CloseIdleConnections() // leave no goroutines behind
	client := s3api.NewFromConfig(awsCfg, func(o *s3api.Options) {
		o.BaseEndpoint = aws.String(cfg.Endpoint)
		o.UsePathStyle = cfg.PathStyle
		o.HTTPClient = &http.Client{Transport: transport}
	})
	_, err = client.CreateBucket(ctx, &s3api.CreateBucketInput{Bucket: aws.String(cfg.Bucket)})
	var ae smithy.APIError
	if err != nil && (!errors.As(err, &ae) || (ae.ErrorCode() != "BucketAlreadyOwnedByYou" && ae.ErrorCode() != "BucketAlreadyExists")) {
		tb.Fatalf("create bucket %q at %s: %v", cfg.Bucket, cfg.Endpoint, err)
	}
	buckets[id] = true
}

// emptyPrefix deletes every object under cfg.Prefix.
func emptyPrefix(tb testing.TB, cfg s3.Config) {
	ctx, cancel := cleanupContext()
	defer cancel()
	s, err := s3.New(ctx, cfg)
	if err != nil {
		tb.Errorf("clean up prefix %q: %v", cfg.Prefix, err)
		return
	}
	defer s.Close()
	keys, err := s.List(ctx, "", "", 0)
	if err != nil {
		tb.Errorf("clean up prefix %q: %v", cfg.Prefix, err)
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.Delete(ctx, k); err != nil {
				tb.Errorf("clean up prefix %q: %v", cfg.Prefix, err)
			}
		})
	}
	wg.Wait()
}
