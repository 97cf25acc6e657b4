package config

import (
	"os"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The configuration shipped in the Kubernetes example must be one the
// server accepts in serve mode: a typo there would fail every pod.
func TestKubernetesExampleConfigIsValid(t *testing.T) {
	data, err := os.ReadFile("../../deploy/kubernetes/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse([]byte(cm.Data["config.yaml"]), ModeServe)
	if err != nil {
		t.Fatalf("the example configuration is rejected: %v", err)
	}
	if cfg.Storage.Backend != "s3" || cfg.LocalStore.Dir == "" {
		t.Fatalf("unexpected example configuration: %+v", cfg)
	}
}
