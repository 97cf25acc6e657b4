package ha

import (
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/testenv"
	"github.com/dexzd/dexzd/internal/testproc"
)

// The store's credentials never reach the server's output: with the
// password in the DSN (PostgreSQL) or the secret key in the environment
// (S3), every line serve writes while the store is unreachable (the wait
// lines, /readyz) or refuses the credentials (the exit), and the error of a
// DSN that does not parse, is free of the secret. The secrets are long
// random strings, so a hit is no accident.
func TestServe_StoreCredentialsNeverLogged(t *testing.T) {
	secret := func() string { return "pw" + rand.Text() }
	for _, tc := range []struct {
		name string
		// setup returns the storage YAML, the environment to add, the
		// secret, and whether serve waits (unreachable) or exits.
		setup func(t *testing.T) (yaml string, env []string, secret string, waits bool)
		// want is in the output: serve said what went wrong.
		want string
	}{
		{"postgres unreachable", func(t *testing.T) (string, []string, string, bool) {
			pw := secret()
			dsn := fmt.Sprintf("postgres://dex:%s@%s/dex?sslmode=disable", pw, testproc.FreeAddr(t))
			return postgresYAML(dsn), nil, pw, true
		}, "refused"},
		{"postgres refuses the password", func(t *testing.T) (string, []string, string, bool) {
			c := testenv.PostgresConfig(t)
			u, err := url.Parse(c.DSN)
			if err != nil {
				t.Fatal(err)
			}
			pw := secret()
			u.User = url.UserPassword(u.User.Username(), pw)
			return postgresYAML(u.String()), nil, pw, false
		}, "28P01"},
		{"postgres DSN that does not parse", func(t *testing.T) (string, []string, string, bool) {
			pw := secret()
			return postgresYAML(fmt.Sprintf("postgres://dex:%s@127.0.0.1:notaport/dex", pw)), nil, pw, false
		}, "invalid port"},
		{"s3 unreachable", func(t *testing.T) (string, []string, string, bool) {
			sk := secret()
			yaml := fmt.Sprintf("storage:\n  backend: s3\n  s3:\n    bucket: b\n    endpoint: http://%s\n    region: us-east-1\n    pathStyle: true\n", testproc.FreeAddr(t))
			return yaml, []string{"AWS_ACCESS_KEY_ID=dex-redact", "AWS_SECRET_ACCESS_KEY=" + sk}, sk, true
		}, "refused"},
		{"s3 refuses the secret key", func(t *testing.T) (string, []string, string, bool) {
			c := testenv.S3Config(t)
			sk := secret()
			yaml := fmt.Sprintf("storage:\n  backend: s3\n  s3:\n    bucket: %q\n    prefix: %q\n    endpoint: %q\n    region: %q\n    pathStyle: true\n",
				c.Bucket, c.Prefix, c.Endpoint, c.Region)
			return yaml, []string{"AWS_ACCESS_KEY_ID=" + os.Getenv("AWS_ACCESS_KEY_ID"), "AWS_SECRET_ACCESS_KEY=" + sk}, sk, false
		}, "SignatureDoesNotMatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			yaml, env, sec, waits := tc.setup(t)
			s := newServer(t, yaml, "")
			p := testproc.StartEnv(t, env, "serve", "--config", s.cfg)
			var readyz string
			if waits {
				waitLog(t, p, storeWaitLine, 15*time.Second)
				deadline := time.Now().Add(15 * time.Second)
				for strings.Count(p.Log(), storeWaitLine) < 2 && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				_, readyz = httpGet(t, "http://"+s.metrics+"/readyz")
				p.Signal(t, syscall.SIGTERM)
			}
			code := p.Wait(t, 30*time.Second)
			out := p.Log()
			if !waits && code == 0 {
				t.Fatalf("serve exited 0 with refused credentials:\n%s", out)
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("serve did not say %q; the test would not see a leak:\n%s", tc.want, out)
			}
			for _, where := range []struct{ name, text string }{{"log", out}, {"/readyz", readyz}} {
				if strings.Contains(where.text, sec) {
					t.Errorf("the secret appears in the %s:\n%s", where.name, where.text)
				}
			}
		})
	}
}

func postgresYAML(dsn string) string {
	return fmt.Sprintf("storage:\n  backend: postgres\n  postgres:\n    dsn: %q\n", dsn)
}
