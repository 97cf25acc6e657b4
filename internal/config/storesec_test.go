package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/testcerts"
)

func TestParse_S3TLSAndServerSideEncryption(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "s3 CA").WriteCA(t, t.TempDir(), "ca")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "nodeId: n\nlocalStore:\n  dir: /tmp/x\nstorage:\n  backend: s3\n  s3:\n    bucket: b\n"
	ok := []string{
		base + "    endpoint: https://minio:9000\n    caFile: " + ca + "\n",
		base + "    caFile: " + ca + "\n", // AWS: https
		base + "    sse: AES256\n",
		base + "    sse: aws:kms\n",
		base + "    sse: aws:kms\n    kmsKeyId: arn:aws:kms:eu-west-1:1:key/k\n",
	}
	for _, doc := range ok {
		c, err := config.Parse([]byte(doc), config.ModeServe)
		if err != nil {
			t.Errorf("Parse(%q) = %v", doc, err)
			continue
		}
		if strings.Contains(doc, "kmsKeyId") && (c.Storage.S3.SSE != "aws:kms" || c.Storage.S3.KMSKeyID != "arn:aws:kms:eu-west-1:1:key/k") {
			t.Errorf("parsed %+v", c.Storage.S3)
		}
	}
	bad := []struct{ doc, want string }{
		{base + "    caFile: /nonexistent/ca.pem\n", "storage.s3.caFile: open /nonexistent/ca.pem: no such file"},
		{base + "    caFile: " + notPEM + "\n", "storage.s3.caFile: " + notPEM + " holds no PEM certificate"},
		{base + "    endpoint: http://minio:9000\n    caFile: " + ca + "\n", `storage.s3.caFile: is set but storage.s3.endpoint "http://minio:9000" is not https`},
		{base + "    sse: aes256\n", `storage.s3.sse: must be "AES256" (SSE-S3) or "aws:kms" (SSE-KMS), got "aes256"`},
		{base + "    kmsKeyId: k\n", `storage.s3.kmsKeyId: is set but storage.s3.sse is ""`},
		{base + "    sse: AES256\n    kmsKeyId: k\n", `storage.s3.kmsKeyId: is set but storage.s3.sse is "AES256"`},
		{base + "    kmsKeyID: k\n", `unknown configuration key "storage.s3.kmsKeyID" (did you mean "kmsKeyId"?)`},
	}
	for _, b := range bad {
		_, err := config.Parse([]byte(b.doc), config.ModeServe)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", b.doc, err, b.want)
		}
	}
}
