package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The harness creates the S3 bucket of "serve" on MinIO itself, with one
// signed request, so that this module does not depend on the AWS SDK (the
// tests' helper in internal/testenv needs a testing.TB and the SDK).

// emptySHA256 is the SHA-256 of an empty payload, hex-encoded.
var emptySHA256 = func() string {
	sum := sha256.Sum256(nil)
	return hex.EncodeToString(sum[:])
}()

// sigV4 signs a request without a body by AWS Signature Version 4 and
// returns the Authorization header. headers must hold host and x-amz-date
// (lower-case names); every header in it is signed.
func sigV4(method, path, query string, headers map[string]string, payloadHash, region, service, accessKey, secretKey string) string {
	names := make([]string, 0, len(headers))
	for n := range headers {
		names = append(names, n)
	}
	slices.Sort(names)
	var canonHeaders strings.Builder
	for _, n := range names {
		canonHeaders.WriteString(n + ":" + strings.TrimSpace(headers[n]) + "\n")
	}
	signed := strings.Join(names, ";")
	canonical := strings.Join([]string{method, path, query, canonHeaders.String(), signed, payloadHash}, "\n")
	amzDate := headers["x-amz-date"]
	scope := amzDate[:8] + "/" + region + "/" + service + "/aws4_request"
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := []byte("AWS4" + secretKey)
	for _, part := range []string{amzDate[:8], region, service, "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	return fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
		accessKey, scope, signed, hex.EncodeToString(hmacSHA256(key, toSign)))
}

func hmacSHA256(key []byte, s string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(s))
	return h.Sum(nil)
}

// ensureBucket creates bucket on the S3-compatible endpoint (path-style)
// unless it exists; a bucket this account already owns is not an error.
func ensureBucket(ctx context.Context, endpoint, bucket, region, accessKey, secretKey string) error {
	u, err := url.Parse(strings.TrimRight(endpoint, "/") + "/" + bucket)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u.String(), http.NoBody)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	amzDate := time.Now().UTC().Format("20060102T150405Z")
	h := map[string]string{"host": u.Host, "x-amz-date": amzDate, "x-amz-content-sha256": emptySHA256}
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	req.Header.Set("Authorization", sigV4(http.MethodPut, u.EscapedPath(), "", h, emptySHA256, region, "s3", accessKey, secretKey))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusOK || (resp.StatusCode == http.StatusConflict && strings.Contains(string(body), "BucketAlreadyOwnedByYou")) {
		return nil
	}
	return fmt.Errorf("create bucket %s: %s: %s", bucket, resp.Status, body)
}
