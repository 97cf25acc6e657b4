package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dexzd/dexzd/internal/config"
)

func TestParse_UnknownKeysNameTheirPath(t *testing.T) {
	t.Parallel()
	cases := []struct{ doc, want string }{
		{"nodeid: a\n", `unknown configuration key "nodeid" (did you mean "nodeId"?)`},
		{"lease:\n  duratoin: 10s\n", `unknown configuration key "lease.duratoin"`},
		{"storage:\n  s3:\n    bukket: b\n", `unknown configuration key "storage.s3.bukket"`},
		{"tracing:\n  endpiont: http://c:4317\n", `unknown configuration key "tracing.endpiont"`},
		{"log:\n  fromat: json\n", `unknown configuration key "log.fromat"`},
		{"standby:\n  mode: cold\n  holdOff: 1s\n", `"standby.holdOff"`},
		{"extra: 1\n", `line 1: unknown configuration key "extra"`},
	}
	for _, c := range cases {
		_, err := config.Parse([]byte(c.doc), config.ModeDev)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %s", c.doc, err, c.want)
		}
	}
}

func TestParse_DurationsAreGoDurationStrings(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("standby:\n  heldLeasePollInterval: 1m30s\nlimits:\n  waitForFlowMax: 250ms\n"), config.ModeServe+"")
	if err == nil {
		t.Fatalf("serve without storage dirs must fail validation, got %+v", c)
	}
	c, err = config.Parse([]byte("standby:\n  heldLeasePollInterval: 1m30s\nlimits:\n  waitForFlowMax: 250ms\n"), config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	if c.Standby.HeldLeasePollInterval != 90*time.Second || c.Limits.WaitForFlowMax != 250*time.Millisecond {
		t.Fatalf("durations = %v, %v", c.Standby.HeldLeasePollInterval, c.Limits.WaitForFlowMax)
	}
	for _, doc := range []string{"lease:\n  duration: 10\n", "lease:\n  duration: ten\n", "lease:\n  duration:\n"} {
		_, err := config.Parse([]byte(doc), config.ModeDev)
		if err == nil || !strings.Contains(err.Error(), "lease.duration") {
			t.Errorf("Parse(%q) = %v, want an error naming lease.duration", doc, err)
		}
	}
}

// Covers: S4, L2
func TestDefaults_AllInOnePlaceAndPrinted(t *testing.T) {
	t.Parallel()
	d := config.Defaults()
	want := map[string]any{
		"lease.duration":                d.Lease.Duration == 10*time.Second,
		"standby.mode":                  d.Standby.Mode == "cold",
		"standby.heldLeasePollInterval": d.Standby.HeldLeasePollInterval == 250*time.Millisecond,
		"standby.stepDownHoldOff":       d.Standby.StepDownHoldOff == 5*time.Second,
		"standby.laggingTakeoverDelay":  d.Standby.LaggingTakeoverDelay == 1500*time.Millisecond,
		"standby.behindLagThreshold":    d.Standby.BehindLagThreshold == 10*time.Second,
		"dev.durabilityMode":            d.Dev.DurabilityMode == "strict",
		"lifecycle.attemptDrainTimeout": d.Lifecycle.AttemptDrainTimeout == 30*time.Second,
		"api.listen":                    d.API.Listen == "127.0.0.1:8801",
		"storage.backend":               d.Storage.Backend == "fs",
		"limits.maxPayloadBytes":        d.Limits.MaxPayloadBytes == 4<<20,
		"limits.waitForFlowMax":         d.Limits.WaitForFlowMax == 60*time.Second,
		"limits.maxRequestBytes":        d.Limits.MaxRequestBytes == 8<<20,
		"limits.maxFlowAttributeBytes":  d.Limits.MaxFlowAttributeBytes == 4<<20,
		"limits.stateCacheBytes":        d.Limits.StateCacheBytes == 128<<20,
		"lease.failIfHeld":              !d.Lease.FailIfHeld,
		"snapshots.everyBatches":        d.Snapshots.EveryBatches == 10000,
		"snapshots.keep":                d.Snapshots.Keep == 2,
		"tracing.endpoint":              d.Tracing.Endpoint == "",
		"tracing.sampleRatio":           d.Tracing.SampleRatio == 1,
		"log.format":                    d.Log.Format == "text",
	}
	for k, ok := range want {
		if ok != true {
			t.Errorf("default of %s is wrong", k)
		}
	}

	out, err := config.DefaultsYAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"nodeId:", "duration: 10s", "failIfHeld: false", "heldLeasePollInterval: 250ms",
		"laggingTakeoverDelay: 1.5s", "durabilityMode: strict", "attemptDrainTimeout: 30s", "listen: 127.0.0.1:8801",
		"backend: fs", "credentialFile:", "maxPayloadBytes: 4194304", "maxRequestBytes: 8388608", "maxFlowAttributeBytes: 4194304", "stateCacheBytes: 134217728", "waitForFlowMax: 1m0s", "dsn:", "bucket:", "endpoint: \"\"", "sampleRatio: 1", "format: text"} {
		if !strings.Contains(string(out), key) {
			t.Errorf("defaults output lacks %q:\n%s", key, out)
		}
	}
	// The printed defaults parse back to the same configuration (serve
	// needs its storage keys, so check in dev with the printed duration).
	var back config.Config
	if err := yaml.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(out, config.ModeDev)
	if err != nil {
		t.Fatalf("printed defaults do not parse: %v", err)
	}
	if c.Lease.Duration != 10*time.Second {
		t.Errorf("lease.duration printed and parsed = %v", c.Lease.Duration)
	}
}

// Covers: D1, D9
func TestParse_DevAndLocalLeaseDefault30sUnlessSet(t *testing.T) {
	t.Parallel()
	for _, mode := range []config.Mode{config.ModeDev, config.ModeLocal} {
		c, err := config.Parse(nil, mode)
		if err != nil {
			t.Fatal(err)
		}
		if c.Lease.Duration != 30*time.Second {
			t.Errorf("%s: lease.duration = %v, want 30s", mode, c.Lease.Duration)
		}
		c, err = config.Parse([]byte("lease:\n  failIfHeld: false\n"), mode)
		if err != nil {
			t.Fatal(err)
		}
		if c.Lease.Duration != 30*time.Second {
			t.Errorf("%s: lease.duration with another lease key = %v, want 30s", mode, c.Lease.Duration)
		}
		c, err = config.Parse([]byte("lease:\n  duration: 12s\n"), mode)
		if err != nil {
			t.Fatal(err)
		}
		if c.Lease.Duration != 12*time.Second || !c.IsSet("lease.duration") {
			t.Errorf("%s: lease.duration set in file = %v, want 12s", mode, c.Lease.Duration)
		}
		// The file may set exactly the serve default; it is kept.
		c, err = config.Parse([]byte("lease:\n  duration: 10s\n"), mode)
		if err != nil {
			t.Fatal(err)
		}
		if c.Lease.Duration != 10*time.Second {
			t.Errorf("%s: lease.duration 10s in file = %v", mode, c.Lease.Duration)
		}
	}
	c, err := config.Parse([]byte("storage:\n  fs:\n    dir: /d\nlocalStore:\n  dir: /s\n"), config.ModeServe)
	if err != nil {
		t.Fatal(err)
	}
	if c.Lease.Duration != 10*time.Second {
		t.Errorf("serve: lease.duration = %v, want 10s", c.Lease.Duration)
	}
}

// Covers: D10
func TestParse_DevAndLocalAcceptOnlyColdStandby(t *testing.T) {
	t.Parallel()
	for _, mode := range []config.Mode{config.ModeDev, config.ModeLocal} {
		_, err := config.Parse([]byte("standby:\n  mode: hot\n"), mode)
		if err == nil || !strings.Contains(err.Error(), "standby.mode") || !strings.Contains(err.Error(), `only "cold"`) {
			t.Errorf("%s with hot standby: %v", mode, err)
		}
		if _, err := config.Parse([]byte("standby:\n  mode: cold\n"), mode); err != nil {
			t.Errorf("%s with cold standby: %v", mode, err)
		}
	}
	serve := "storage:\n  fs:\n    dir: /d\nlocalStore:\n  dir: /s\nstandby:\n  mode: hot\n"
	if _, err := config.Parse([]byte(serve), config.ModeServe); err != nil {
		t.Errorf("serve with hot standby: %v", err)
	}
}

// Covers: S5
func TestValidate_NamesTheOffendingKeys(t *testing.T) {
	t.Parallel()
	base := "storage:\n  fs:\n    dir: /d\nlocalStore:\n  dir: /s\n"
	cases := []struct {
		mode config.Mode
		doc  string
		want []string
	}{
		{config.ModeServe, base + "standby:\n  mode: hot\nlease:\n  failIfHeld: true\n", []string{"standby.mode", "lease.failIfHeld: false"}},
		{config.ModeServe, base + "standby:\n  mode: hot\n  stepDownHoldOff: 1s\n", []string{"standby.stepDownHoldOff", "standby.laggingTakeoverDelay + standby.heldLeasePollInterval"}},
		{config.ModeServe, base + "standby:\n  mode: warm\n", []string{"standby.mode", `"warm"`}},
		{config.ModeDev, "lease:\n  duration: 500ms\n", []string{"lease.duration", "shorter than the minimum 1s"}},
		{config.ModeDev, "lease:\n  duration: 1500us\n", []string{"lease.duration"}},
		{config.ModeDev, "dev:\n  durabilityMode: fast\n", []string{"dev.durabilityMode", `"fast"`}},
		{config.ModeDev, "api:\n  listen: nohost\n", []string{"api.listen"}},
		{config.ModeDev, "metrics:\n  listen: bad\n", []string{"metrics.listen"}},
		{config.ModeDev, "nodeId: a/b\n", []string{"nodeId"}},
		{config.ModeDev, "nodeId: ''\n", []string{"nodeId: must not be empty"}},
		{config.ModeDev, "limits:\n  maxPayloadBytes: 0\n", []string{"limits.maxPayloadBytes"}},
		{config.ModeDev, "limits:\n  maxRequestBytes: 0\n  maxFlowAttributeBytes: -1\n", []string{"limits.maxRequestBytes: must be positive", "limits.maxFlowAttributeBytes: must be positive"}},
		{config.ModeDev, "limits:\n  maxRequestBytes: 1048576\n", []string{"limits.maxRequestBytes: must be at least limits.maxPayloadBytes (4194304)"}},
		{config.ModeDev, "limits:\n  maxFlowAttributeBytes: 1048575\n", []string{"limits.maxFlowAttributeBytes: must be at least limits.maxPayloadBytes"}},
		{config.ModeDev, "limits:\n  maxRequestBytes: 536870912\n", []string{"limits.maxRequestBytes: at most"}},
		{config.ModeDev, "limits:\n  stateCacheBytes: 1000\n", []string{"limits.stateCacheBytes: must be at least"}},
		{config.ModeServe, "snapshots:\n  everyBatches: -1\n  keep: 0\n", []string{"snapshots.everyBatches", "snapshots.keep"}},
		{config.ModeDev, "limits:\n  waitForFlowMax: 0s\n", []string{"limits.waitForFlowMax"}},
		{config.ModeDev, "lifecycle:\n  attemptDrainTimeout: -1s\n", []string{"lifecycle.attemptDrainTimeout"}},
		{config.ModeDev, "standby:\n  heldLeasePollInterval: 0s\n", []string{"standby.heldLeasePollInterval"}},
		{config.ModeDev, "storage:\n  backend: s3\n", []string{"storage.backend"}},
		{config.ModeDev, "storage:\n  backend: tape\n", []string{"storage.backend", `"tape"`}},
		{config.ModeServe, "localStore:\n  dir: /s\nstorage:\n  backend: s3\n", []string{"storage.s3.bucket"}},
		{config.ModeServe, "localStore:\n  dir: /s\nstorage:\n  backend: postgres\n", []string{"storage.postgres.dsn"}},
		{config.ModeServe, "localStore:\n  dir: /s\n", []string{"storage.fs.dir"}},
		{config.ModeServe, "storage:\n  fs:\n    dir: /d\n", []string{"localStore.dir"}},
		{config.ModeDev, "tracing:\n  endpoint: collector:4317\n", []string{"tracing.endpoint", "http://127.0.0.1:4317"}},
		{config.ModeDev, "tracing:\n  endpoint: grpc://collector:4317\n", []string{"tracing.endpoint"}},
		{config.ModeDev, "tracing:\n  endpoint: http://collector:4317/v1/traces\n", []string{"tracing.endpoint", "no path"}},
		{config.ModeDev, "tracing:\n  endpoint: 'http://'\n", []string{"tracing.endpoint", "no host"}},
		{config.ModeDev, "tracing:\n  sampleRatio: 1.5\n", []string{"tracing.sampleRatio"}},
		{config.ModeDev, "tracing:\n  sampleRatio: -0.1\n", []string{"tracing.sampleRatio"}},
		{config.ModeDev, "log:\n  format: xml\n", []string{"log.format", `"xml"`}},
	}
	for _, c := range cases {
		_, err := config.Parse([]byte(c.doc), c.mode)
		if err == nil {
			t.Errorf("%s %q: no error", c.mode, c.doc)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %q: error %q lacks %q", c.mode, c.doc, err, w)
			}
		}
	}
	// Every valid combination passes.
	ok := base + "standby:\n  mode: hot\n  stepDownHoldOff: 2s\n  laggingTakeoverDelay: 1s\n  heldLeasePollInterval: 500ms\n"
	if _, err := config.Parse([]byte(ok), config.ModeServe); err != nil {
		t.Errorf("valid hot configuration: %v", err)
	}
}

func TestLoad_FileAndNoFile(t *testing.T) {
	t.Parallel()
	c, err := config.Load("", config.ModeDev)
	if err != nil || c.API.Listen != "127.0.0.1:8801" {
		t.Fatalf("Load without a file = %+v, %v", c, err)
	}
	p := filepath.Join(t.TempDir(), "dex.yaml")
	if err := os.WriteFile(p, []byte("# comment only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(p, config.ModeDev); err != nil {
		t.Fatalf("comment-only file: %v", err)
	}
	if err := os.WriteFile(p, []byte("nodeId: n7\ndev:\n  durabilityMode: relaxed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = config.Load(p, config.ModeLocal)
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != "n7" || c.Dev.DurabilityMode != "relaxed" || c.Lifecycle.AttemptDrainTimeout != 30*time.Second {
		t.Fatalf("loaded %+v", c)
	}
	if _, err := config.Load(filepath.Join(t.TempDir(), "missing.yaml"), config.ModeDev); err == nil {
		t.Fatal("a missing file must be an error")
	}
	if err := os.WriteFile(p, []byte("lease: [1, 2]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(p, config.ModeDev); err == nil || !strings.Contains(err.Error(), "lease must be a mapping") {
		t.Fatalf("a list for a section: %v", err)
	}
	if err := os.WriteFile(p, []byte("lease:\n  failIfHeld: maybe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(p, config.ModeDev); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a bad bool: %v", err)
	}
}

// A file that raises limits.maxPayloadBytes above the request and flow
// attribute defaults raises those with it unless it sets them; one that
// sets them below the value limit is refused (issue 11).
//
// Covers: E28, S5
func TestParse_RequestAndAttributeLimitsFollowARaisedValueLimit(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("limits:\n  maxPayloadBytes: 67108864\n"), config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxRequestBytes != 64<<20 || c.Limits.MaxFlowAttributeBytes != 64<<20 {
		t.Errorf("raised value limit: request %d, attributes %d; want both 64 MiB", c.Limits.MaxRequestBytes, c.Limits.MaxFlowAttributeBytes)
	}
	c, err = config.Parse([]byte("limits:\n  maxPayloadBytes: 1048576\n  maxRequestBytes: 2097152\n  maxFlowAttributeBytes: 3145728\n"), config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxRequestBytes != 2<<20 || c.Limits.MaxFlowAttributeBytes != 3<<20 {
		t.Errorf("set limits: request %d, attributes %d", c.Limits.MaxRequestBytes, c.Limits.MaxFlowAttributeBytes)
	}
}

func TestParse_TracingAndLog(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("tracing:\n  endpoint: http://127.0.0.1:4317\n  sampleRatio: 0.25\nlog:\n  format: json\n"), config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing.Endpoint != "http://127.0.0.1:4317" || c.Tracing.SampleRatio != 0.25 || c.Log.Format != config.LogJSON {
		t.Fatalf("tracing, log = %+v, %+v", c.Tracing, c.Log)
	}
	if !c.IsSet("tracing.sampleRatio") {
		t.Error("tracing.sampleRatio not recorded as set")
	}
}
