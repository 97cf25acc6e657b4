// Package kubernetes checks the deployment examples: each manifest decodes
// strictly (unknown fields are errors) into the Kubernetes API types, and
// the HA variant has every property the high-availability requirements ask
// for. It is its own module so the main module does not depend on the
// Kubernetes API packages; `make test` runs it.
package kubernetes

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func decode[T any](t *testing.T, file string) *T {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		t.Fatalf("%s does not decode strictly: %v", file, err)
	}
	return &v
}

func server(t *testing.T, s *appsv1.StatefulSet) corev1.Container {
	t.Helper()
	cs := s.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "server" {
		t.Fatalf("want one container named server, got %d", len(cs))
	}
	c := cs[0]
	if strings.Join(c.Args, " ") != "serve --config /etc/dex-server-zd/config.yaml" {
		t.Fatalf("args = %q", c.Args)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.GRPC == nil || c.ReadinessProbe.GRPC.Port != 8801 {
		t.Fatal("readiness must be a gRPC health probe on the API port")
	}
	if s.Spec.Template.Spec.TerminationGracePeriodSeconds == nil || *s.Spec.Template.Spec.TerminationGracePeriodSeconds <= 30 {
		t.Fatal("the grace period must exceed the 30 s attempt drain so SIGTERM can release the lease")
	}
	if len(s.Spec.VolumeClaimTemplates) != 1 {
		t.Fatal("each pod needs its own volume for its local store")
	}
	// H4: a standby never passes a gRPC health check, and neither does a
	// process waiting for its durable store at startup, so startup and
	// liveness must not use one.
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.TCPSocket == nil || p.TCPSocket.Port.IntValue() != 8801 || p.GRPC != nil {
			t.Fatalf("%s probe must be a tcpSocket probe on 8801", name)
		}
	}
	return c
}

func TestSingleReplica(t *testing.T) {
	s := decode[appsv1.StatefulSet](t, "statefulset.yaml")
	if s.Spec.Replicas == nil || *s.Spec.Replicas != 1 {
		t.Fatal("the single-replica example must have 1 replica")
	}
	server(t, s)
}

// Covers: K1, H4
func TestHAVariant(t *testing.T) {
	s := decode[appsv1.StatefulSet](t, "statefulset-ha.yaml")
	if s.Spec.Replicas == nil || *s.Spec.Replicas != 2 {
		t.Fatal("the HA variant must have 2 replicas")
	}
	if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Fatalf("podManagementPolicy = %q, want Parallel", s.Spec.PodManagementPolicy)
	}
	if s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Fatalf("updateStrategy = %q, want OnDelete", s.Spec.UpdateStrategy.Type)
	}
	server(t, s)
}

func TestConfigMap(t *testing.T) {
	cm := decode[corev1.ConfigMap](t, "configmap.yaml")
	cfg := cm.Data["config.yaml"]
	var parsed map[string]any
	if err := yaml.UnmarshalStrict([]byte(cfg), &parsed); err != nil {
		t.Fatalf("config.yaml is not YAML: %v", err)
	}
	for _, want := range []string{"nodeId:", "localStore:", "storage:", "listen: 0.0.0.0:8801"} {
		if !strings.Contains(cfg, want) {
			t.Fatalf("config.yaml lacks %q", want)
		}
	}
}
