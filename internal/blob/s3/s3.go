// Package s3 is a blob.Store on S3-compatible object storage (AWS S3, MinIO)
// through aws-sdk-go-v2.
//
// Conditional writes use the standard HTTP preconditions: PutIfAbsent sends
// If-None-Match: * and PutIfMatch sends If-Match with the version, which is
// the object's ETag. The SDK's own retries are off: the lease and the log own
// the retry policy, so every call is exactly one request (List: one per page)
// and every failure is reported, classified, to the caller.
package s3

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dexzd/dexzd/internal/blob"
)

// Config selects the bucket and how to reach it. Credentials come from the
// standard AWS sources (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, shared
// config and credentials files, roles).
type Config struct {
	// Bucket must exist; the store never creates it.
	Bucket string
	// Prefix is prepended to every key, so that several stores can share a
	// bucket. A missing trailing '/' is added. Empty means the bucket root.
	Prefix string
	// Endpoint is the base URL of an S3-compatible service, such as
	// http://127.0.0.1:9000 for MinIO. Empty means AWS.
	Endpoint string
	// Region overrides the region from the environment. When neither is set
	// us-east-1 is used.
	Region string
	// PathStyle addresses the bucket as a path (http://host/bucket/key)
	// rather than a virtual host; MinIO needs it.
	PathStyle bool
	// RootCAs, when set, are the certificate authorities an https
	// endpoint's certificate must chain to, instead of the system's
	// (storage.s3.caFile).
	RootCAs *x509.CertPool
	// SSE is the server-side encryption every PutObject asks for
	// ("AES256" or "aws:kms"); empty leaves it to the bucket's default.
	SSE string
	// KMSKeyID is the KMS key of SSE "aws:kms"; empty: the default key.
	KMSKeyID string
}

// Stats counts the requests a Store has sent, by kind. Every call of Get,
// PutIfAbsent, PutIfMatch and Delete is one request; List is one per page.
type Stats struct {
	Get    int64
	Put    int64
	List   int64
	Delete int64
}

// Store is a blob.Store on one bucket and prefix. It is safe for concurrent
// use.
type Store struct {
	client    *s3api.Client
	transport *http.Transport
	bucket    string
	prefix    string
	sse       types.ServerSideEncryption // asked of every PutObject; empty: none
	kmsKeyID  string

	gets, puts, lists, deletes atomic.Int64
}

var _ blob.Store = (*Store)(nil)

// listPage is the largest page ListObjectsV2 returns.
const listPage = 1000

// New loads the AWS configuration and returns a store. It sends no request:
// a missing bucket or bad credentials surface as permanent errors on the
// first call.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3 store: bucket is empty")
	}
	prefix := cfg.Prefix
	if prefix != "" {
		if err := blob.CheckKey(strings.TrimSuffix(prefix, "/")); err != nil {
			return nil, fmt.Errorf("s3 store: prefix: %w", err)
		}
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
	}

	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3 store: load AWS config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}

	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns = 256
	transport.MaxIdleConnsPerHost = 64
	if cfg.RootCAs != nil {
		transport.TLSClientConfig = &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12}
	}
	client := s3api.NewFromConfig(awsCfg, func(o *s3api.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		o.HTTPClient = &http.Client{Transport: transport}
		// One attempt per call: retry policy belongs to the caller.
		o.Retryer = aws.NopRetryer{}
		o.RetryMaxAttempts = 0
		// Checksums only where the API demands them: S3-compatible servers
		// differ in their support for the newer trailing checksums.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &Store{client: client, transport: transport, bucket: cfg.Bucket, prefix: prefix,
		sse: types.ServerSideEncryption(cfg.SSE), kmsKeyID: cfg.KMSKeyID}, nil
}

// Stats returns the number of requests sent so far.
func (s *Store) Stats() Stats {
	return Stats{Get: s.gets.Load(), Put: s.puts.Load(), List: s.lists.Load(), Delete: s.deletes.Load()}
}

// Get implements blob.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, blob.Version, error) {
	if err := blob.CheckedKey(blob.OpGet, key); err != nil {
		return nil, "", err
	}
	s.gets.Add(1)
	out, err := s.client.GetObject(ctx, &s3api.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		return nil, "", classify(blob.OpGet, key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", blob.Transient(blob.OpGet, key, fmt.Errorf("read body: %w", err))
	}
	v, err := version(blob.OpGet, key, out.ETag)
	if err != nil {
		return nil, "", err
	}
	return data, v, nil
}

// PutIfAbsent implements blob.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) (blob.Version, error) {
	if err := blob.CheckedKey(blob.OpPutIfAbsent, key); err != nil {
		return "", err
	}
	return s.put(ctx, blob.OpPutIfAbsent, key, data, func(in *s3api.PutObjectInput) {
		in.IfNoneMatch = aws.String("*")
	})
}

// PutIfMatch implements blob.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, v blob.Version) (blob.Version, error) {
	if err := blob.CheckedKey(blob.OpPutIfMatch, key); err != nil {
		return "", err
	}
	if v == "" {
		// No object has an empty ETag.
		return "", blob.Precondition(blob.OpPutIfMatch, key)
	}
	return s.put(ctx, blob.OpPutIfMatch, key, data, func(in *s3api.PutObjectInput) {
		in.IfMatch = aws.String(string(v))
	})
}

func (s *Store) put(ctx context.Context, op, key string, data []byte, cond func(*s3api.PutObjectInput)) (blob.Version, error) {
	in := &s3api.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
	if s.sse != "" {
		in.ServerSideEncryption = s.sse
		if s.kmsKeyID != "" {
			in.SSEKMSKeyId = aws.String(s.kmsKeyID)
		}
	}
	cond(in)
	s.puts.Add(1)
	out, err := s.client.PutObject(ctx, in)
	if err != nil {
		return "", classify(op, key, err)
	}
	return version(op, key, out.ETag)
}

// version turns an ETag into a Version. ETags are kept as sent, quotes
// included, so that they can be sent back in If-Match unchanged.
func version(op, key string, etag *string) (blob.Version, error) {
	if etag == nil || *etag == "" {
		return "", blob.Permanent(op, key, errors.New("the server returned no ETag"))
	}
	return blob.Version(*etag), nil
}

// List implements blob.Store.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]string, error) {
	var keys []string
	in := &s3api.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(s.prefix + prefix),
	}
	if startAfter != "" {
		in.StartAfter = aws.String(s.prefix + startAfter)
	}
	for {
		page := listPage
		if limit > 0 {
			page = min(page, limit-len(keys))
		}
		in.MaxKeys = aws.Int32(int32(page))
		s.lists.Add(1)
		out, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, classify(blob.OpList, prefix, err)
		}
		for _, obj := range out.Contents {
			k, ok := strings.CutPrefix(aws.ToString(obj.Key), s.prefix)
			if !ok {
				continue
			}
			keys = append(keys, k)
		}
		if limit > 0 && len(keys) >= limit {
			return keys[:limit], nil
		}
		if !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextContinuationToken) == "" {
			return keys, nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := blob.CheckedKey(blob.OpDelete, key); err != nil {
		return err
	}
	s.deletes.Add(1)
	_, err := s.client.DeleteObject(ctx, &s3api.DeleteObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		err = classify(blob.OpDelete, key, err)
		if errors.Is(err, blob.ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// Close implements blob.Store: it closes idle connections.
func (s *Store) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}
