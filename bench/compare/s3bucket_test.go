package main

import (
	"context"
	"os"
	"testing"
)

// The example of the AWS Signature Version 4 documentation (IAM
// ListUsers, 2015-08-30, the documentation's example keys).
func TestSigV4_DocumentationExample(t *testing.T) {
	t.Parallel()
	h := map[string]string{
		"content-type": "application/x-www-form-urlencoded; charset=utf-8",
		"host":         "iam.amazonaws.com",
		"x-amz-date":   "20150830T123600Z",
	}
	got := sigV4("GET", "/", "Action=ListUsers&Version=2010-05-08", h, emptySHA256, "us-east-1", "iam",
		"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	want := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, " +
		"SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
	if got != want {
		t.Errorf("sigV4 =\n%s\nwant\n%s", got, want)
	}
}

// Against the MinIO of scripts/testenv.sh: creating the bucket twice
// succeeds both times.
func TestEnsureBucket_MinIO(t *testing.T) {
	t.Parallel()
	endpoint := os.Getenv("DEX_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Skip("no MinIO: run under scripts/testenv.sh run --")
	}
	bucket := "compare-test-" + randomHex(4)
	for range 2 {
		if err := ensureBucket(context.Background(), endpoint, bucket, "us-east-1",
			os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")); err != nil {
			t.Fatal(err)
		}
	}
}
