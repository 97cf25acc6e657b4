package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/dexzd/dexzd/internal/testcerts"
)

// exampleConfig is the config.yaml of a ConfigMap of deploy/kubernetes.
func exampleConfig(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile("../../deploy/kubernetes/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["config.yaml"]
}

// The configuration shipped in the Kubernetes example must be one the
// server accepts in serve mode: a typo there would fail every pod.
func TestKubernetesExampleConfigIsValid(t *testing.T) {
	cfg, err := Parse([]byte(exampleConfig(t, "configmap.yaml")), ModeServe)
	if err != nil {
		t.Fatalf("the example configuration is rejected: %v", err)
	}
	if cfg.Storage.Backend != "s3" || cfg.LocalStore.Dir == "" {
		t.Fatalf("unexpected example configuration: %+v", cfg)
	}
}

// The TLS variant's configuration is one the server accepts in serve
// mode once its Secrets are mounted (here: real files in their place).
func TestKubernetesTLSExampleConfigIsValid(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	ca.Issue(t, testcerts.Spec{CommonName: "dex-server-zd", Server: true}).Write(t, dir, "tls")
	tokens := "0123456789abcdef0123456789abcdef client app\n"
	testcerts.WriteFile(t, filepath.Join(dir, "tokens"), []byte(tokens))
	testcerts.WriteFile(t, filepath.Join(dir, "metrics-tokens"), []byte(tokens))
	doc := strings.NewReplacer("/etc/dex-server-zd-tls/", dir+"/", "/etc/dex-server-zd-tokens/", dir+"/").Replace(exampleConfig(t, "configmap-tls.yaml"))
	cfg, err := Parse([]byte(doc), ModeServe)
	if err != nil {
		t.Fatalf("the TLS example configuration is rejected: %v", err)
	}
	if !cfg.API.TLS.Enabled() || !cfg.Metrics.TLS.Enabled() || !cfg.AuthEnabled() || cfg.Metrics.TokensFile == "" {
		t.Fatalf("the TLS example does not turn TLS and tokens on: %+v", cfg)
	}
}
