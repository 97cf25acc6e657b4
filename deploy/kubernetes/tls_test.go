package kubernetes

import (
	"path"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// tlsConfig is the part of configmap-tls.yaml's config.yaml these tests
// check.
type tlsConfig struct {
	API struct {
		TLS struct{ CertFile, KeyFile string } `json:"tls"`
	} `json:"api"`
	Auth struct {
		TokensFile string `json:"tokensFile"`
	} `json:"auth"`
	Metrics struct {
		Listen     string                             `json:"listen"`
		TLS        struct{ CertFile, KeyFile string } `json:"tls"`
		TokensFile string                             `json:"tokensFile"`
	} `json:"metrics"`
}

func readTLSConfig(t *testing.T) tlsConfig {
	t.Helper()
	cm := decode[corev1.ConfigMap](t, "configmap-tls.yaml")
	if cm.Name != "dex-server-zd-tls" {
		t.Fatalf("ConfigMap name = %q", cm.Name)
	}
	var c tlsConfig
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &c); err != nil {
		t.Fatal(err)
	}
	if c.API.TLS.CertFile == "" || c.API.TLS.KeyFile == "" || c.Auth.TokensFile == "" ||
		c.Metrics.TLS.CertFile == "" || c.Metrics.TokensFile == "" {
		t.Fatalf("the TLS variant's configuration lacks api.tls, auth.tokensFile, metrics.tls or metrics.tokensFile: %+v", c)
	}
	return c
}

// The TLS variant of the HA example: the HA properties, the certificate
// and the tokens mounted from Secrets (as directories, so updates reach
// the files) where the configuration reads them, and readiness over
// HTTPS on /readyz since the kubelet's gRPC probe speaks no TLS.
//
// Covers: K1, H4
func TestHATLSVariant(t *testing.T) {
	s := decode[appsv1.StatefulSet](t, "statefulset-ha-tls.yaml")
	if s.Spec.Replicas == nil || *s.Spec.Replicas != 2 || s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement ||
		s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Fatal("the TLS variant must keep the HA variant's replicas, Parallel and OnDelete")
	}
	cs := s.Spec.Template.Spec.Containers
	if len(cs) != 1 || strings.Join(cs[0].Args, " ") != "serve --config /etc/dex-server-zd/config.yaml" {
		t.Fatal("want the one server container running serve")
	}
	c := cs[0]
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.TCPSocket == nil || p.TCPSocket.Port.IntValue() != 8801 {
			t.Fatalf("%s probe must be a tcpSocket probe on 8801", name)
		}
	}
	r := c.ReadinessProbe
	if r == nil || r.HTTPGet == nil || r.HTTPGet.Path != "/readyz" || r.HTTPGet.Port.IntValue() != 9090 || r.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Fatal("readiness must be GET /readyz over HTTPS on the metrics port")
	}

	cfg := readTLSConfig(t)
	secrets := map[string]string{} // volume name -> Secret
	configMap := ""
	for _, v := range s.Spec.Template.Spec.Volumes {
		switch {
		case v.Secret != nil:
			secrets[v.Name] = v.Secret.SecretName
		case v.ConfigMap != nil:
			configMap = v.ConfigMap.Name
		}
	}
	if configMap != "dex-server-zd-tls" {
		t.Fatalf("the config volume is ConfigMap %q, want dex-server-zd-tls", configMap)
	}
	mounted := map[string]string{} // mount path -> Secret
	for _, m := range c.VolumeMounts {
		if sec, ok := secrets[m.Name]; ok {
			if m.SubPath != "" {
				t.Fatalf("Secret %s is mounted with subPath: its updates would never reach the file", sec)
			}
			mounted[m.MountPath] = sec
		}
	}
	for key, file := range map[string]string{"api.tls.certFile": cfg.API.TLS.CertFile, "api.tls.keyFile": cfg.API.TLS.KeyFile,
		"auth.tokensFile": cfg.Auth.TokensFile, "metrics.tls.certFile": cfg.Metrics.TLS.CertFile, "metrics.tokensFile": cfg.Metrics.TokensFile} {
		if _, ok := mounted[path.Dir(file)]; !ok {
			t.Errorf("%s %s is not in a mounted Secret (mounts: %v)", key, file, mounted)
		}
	}
	if mounted[path.Dir(cfg.API.TLS.CertFile)] != certificateSecret(t) {
		t.Errorf("the certificate is read from Secret %q, cert-manager writes %q", mounted[path.Dir(cfg.API.TLS.CertFile)], certificateSecret(t))
	}
}

// certificate is the part of cert-manager's Certificate the example uses.
type certificate struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		SecretName     string `json:"secretName"`
		SecretTemplate struct {
			Annotations map[string]string `json:"annotations"`
			Labels      map[string]string `json:"labels"`
		} `json:"secretTemplate"`
		Duration    string `json:"duration"`
		RenewBefore string `json:"renewBefore"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
		Usages    []string `json:"usages"`
		DNSNames  []string `json:"dnsNames"`
		IssuerRef struct {
			Name, Kind, Group string
		} `json:"issuerRef"`
	} `json:"spec"`
}

func certificateSecret(t *testing.T) string {
	t.Helper()
	c := decode[certificate](t, "certificate.yaml")
	if c.APIVersion != "cert-manager.io/v1" || c.Kind != "Certificate" || c.Spec.SecretName == "" ||
		len(c.Spec.DNSNames) == 0 || c.Spec.IssuerRef.Name == "" {
		t.Fatalf("certificate.yaml is not a complete cert-manager Certificate: %+v", c)
	}
	found := false
	for _, u := range c.Spec.Usages {
		found = found || u == "server auth"
	}
	if !found {
		t.Fatal("the certificate must be usable for server auth")
	}
	return c.Spec.SecretName
}

// Only workers and clients reach the API port; only the monitoring
// namespace reaches the metrics port; nothing else is allowed in.
func TestNetworkPolicy(t *testing.T) {
	np := decode[networkingv1.NetworkPolicy](t, "networkpolicy.yaml")
	if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "dex-server-zd" {
		t.Fatal("the policy must select the server's pods")
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Fatal("the policy must restrict ingress")
	}
	apiRoles := map[string]bool{}
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) != 1 || rule.Ports[0].Port == nil {
			t.Fatal("each rule must name one port")
		}
		switch port := rule.Ports[0].Port.IntValue(); port {
		case 8801:
			for _, from := range rule.From {
				if from.PodSelector == nil || from.NamespaceSelector == nil || from.IPBlock != nil {
					t.Fatal("the API port must be reached only from selected pods of selected namespaces")
				}
				apiRoles[from.PodSelector.MatchLabels["dex-zd.io/role"]] = true
			}
		case 9090:
			for _, from := range rule.From {
				if from.NamespaceSelector == nil || from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
					t.Fatal("the metrics port must be reached only from the monitoring namespace")
				}
			}
		default:
			t.Fatalf("a rule opens port %d", port)
		}
	}
	if len(apiRoles) != 2 || !apiRoles["worker"] || !apiRoles["client"] {
		t.Fatalf("the API port is open to roles %v, want worker and client", apiRoles)
	}
}
