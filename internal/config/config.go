// Package config is the server's configuration: one YAML file (--config)
// with the keys of the requirements, every default in Defaults, unknown keys
// rejected by their full path, durations as Go duration strings ("250ms",
// "1m30s"), and validation messages that name the offending keys.
//
// Parse and Load start from Defaults, overlay the file, apply the mode's
// defaults (D1: `dev` and `local` default lease.duration to 30s unless the
// file sets it) and validate for the mode (D10: `dev` and `local` accept only
// standby.mode cold; S5 for hot standbys). Command-line flags that override a
// key (--durability, --listen) are applied by the caller after Parse, then
// Validate runs again.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.yaml.in/yaml/v3"
)

// Mode is how the server runs: which subcommand started it.
type Mode string

// Modes.
const (
	// ModeDev is `dex-server-zd dev`: one process on a local data directory.
	ModeDev Mode = "dev"
	// ModeLocal is `dex-server-zd local`: a single node on local disk, with
	// the lease default, lock, takeover and durability modes of dev (D9).
	ModeLocal Mode = "local"
	// ModeServe is `dex-server-zd serve`: a node on its durable store, with
	// optional standbys.
	ModeServe Mode = "serve"
)

// OnLocalDisk reports whether the mode keeps everything in one local data
// directory (dev and local).
func (m Mode) OnLocalDisk() bool { return m == ModeDev || m == ModeLocal }

// Standby modes (S2, S3).
const (
	StandbyCold = "cold"
	StandbyHot  = "hot"
)

// Durability modes of dev and local (D5-D7).
const (
	DurabilityStrict           = "strict"
	DurabilityProcessCrashSafe = "processCrashSafe"
	DurabilityRelaxed          = "relaxed"
)

// Storage backends.
const (
	BackendFS       = "fs"
	BackendS3       = "s3"
	BackendPostgres = "postgres"
)

// Config is the whole configuration. The yaml tags are the keys.
type Config struct {
	// NodeID names the node; every process of one node uses the same ID.
	NodeID    string    `yaml:"nodeId"`
	Lease     Lease     `yaml:"lease"`
	Standby   Standby   `yaml:"standby"`
	Dev       Dev       `yaml:"dev"`
	Lifecycle Lifecycle `yaml:"lifecycle"`
	API       API       `yaml:"api"`
	Metrics   Metrics   `yaml:"metrics"`
	// LocalStore is the materialised state on local disk.
	LocalStore LocalStore `yaml:"localStore"`
	Storage    Storage    `yaml:"storage"`
	Admin      Admin      `yaml:"admin"`
	// Auth turns authentication on (security.go); without the section the
	// API is open.
	Auth      Auth      `yaml:"auth,omitempty"`
	Limits    Limits    `yaml:"limits"`
	Snapshots Snapshots `yaml:"snapshots"`
	Tracing   Tracing   `yaml:"tracing"`
	Log       Log       `yaml:"log"`
	Web       Web       `yaml:"web"`

	// set holds the dotted paths of the keys the file set.
	set map[string]bool
}

// Lease configures the node lease (L1-L16).
type Lease struct {
	// Duration is the lease duration (L2; D1 for dev and local).
	Duration time.Duration `yaml:"duration"`
	// FailIfHeld fails startup while another process holds the lease (L14).
	FailIfHeld bool `yaml:"failIfHeld"`
}

// Standby configures what a process does while another one is active
// (S1-S9).
type Standby struct {
	Mode                  string        `yaml:"mode"`
	HeldLeasePollInterval time.Duration `yaml:"heldLeasePollInterval"`
	StepDownHoldOff       time.Duration `yaml:"stepDownHoldOff"`
	LaggingTakeoverDelay  time.Duration `yaml:"laggingTakeoverDelay"`
	BehindLagThreshold    time.Duration `yaml:"behindLagThreshold"`
}

// Dev configures dev and local mode.
type Dev struct {
	// DurabilityMode is strict, processCrashSafe or relaxed (D5-D7).
	DurabilityMode string `yaml:"durabilityMode"`
}

// Lifecycle configures draining (A3, K2).
type Lifecycle struct {
	// AttemptDrainTimeout bounds the wait for running attempts' results on
	// a graceful shutdown or step down.
	AttemptDrainTimeout time.Duration `yaml:"attemptDrainTimeout"`
}

// API configures the gRPC listener.
type API struct {
	Listen string `yaml:"listen"`
	// Reflection serves the gRPC server reflection service, so that tools
	// such as grpcurl list and call the API without the proto files.
	// Default true.
	Reflection bool `yaml:"reflection"`
	// TLS serves the API over TLS (security.go); empty means plaintext.
	TLS TLS `yaml:"tls"`
}

// Metrics configures the metrics listener; empty disables it.
type Metrics struct {
	Listen string `yaml:"listen"`
	// TLS serves the metrics listener over TLS, like api.tls.
	TLS TLS `yaml:"tls"`
	// TokensFile, when set, is a tokens file (the format of
	// auth.tokensFile) whose tokens with role reader, client or admin may
	// GET /metrics (and /readyz unless ReadyzOpen); others get 401.
	// /livez is always open, for liveness probes.
	TokensFile string `yaml:"tokensFile"`
	// ReadyzOpen serves /readyz without a token even when TokensFile is
	// set, for readiness probes. Default true.
	ReadyzOpen bool `yaml:"readyzOpen"`
}

// LocalStore configures the local store directory. Empty means a directory
// under the data directory (dev, local).
type LocalStore struct {
	Dir string `yaml:"dir"`
}

// Storage configures the durable store.
type Storage struct {
	Backend  string   `yaml:"backend"`
	FS       FS       `yaml:"fs"`
	S3       S3       `yaml:"s3"`
	Postgres Postgres `yaml:"postgres"`
}

// FS is the directory backend. In dev and local the data directory's log
// directory is used and Dir is ignored.
type FS struct {
	Dir string `yaml:"dir"`
}

// S3 is the S3-compatible object storage backend.
type S3 struct {
	Bucket    string `yaml:"bucket"`
	Prefix    string `yaml:"prefix"`
	Endpoint  string `yaml:"endpoint"`
	Region    string `yaml:"region"`
	PathStyle bool   `yaml:"pathStyle"`
	// CAFile is a PEM bundle of the certificate authorities that an https
	// endpoint's certificate must chain to, instead of the system's.
	CAFile string `yaml:"caFile"`
	// SSE is the server-side encryption every PutObject asks for:
	// "AES256" (SSE-S3) or "aws:kms" (SSE-KMS); empty: the bucket's
	// default.
	SSE string `yaml:"sse"`
	// KMSKeyID is the KMS key of SSE "aws:kms"; empty: the account's
	// default key.
	KMSKeyID string `yaml:"kmsKeyId"`
}

// The values of storage.s3.sse.
const (
	SSES3  = "AES256"
	SSEKMS = "aws:kms"
)

// Postgres is the PostgreSQL backend.
type Postgres struct {
	DSN   string `yaml:"dsn"`
	Table string `yaml:"table"`
}

// Admin configures AdminService (A9).
type Admin struct {
	// CredentialFile holds the admin credential; empty means none. A file
	// that is empty, holds only whitespace or cannot be read fails
	// validation: it never means "no credential".
	CredentialFile string `yaml:"credentialFile"`
}

// Limits bounds requests (E25, E28).
type Limits struct {
	// MaxPayloadBytes limits every user value (E28).
	MaxPayloadBytes int `yaml:"maxPayloadBytes"`
	// MaxRequestBytes limits the sum of the user values of one request: a
	// StartFlow's input and attributes, a worker result's output, staged
	// attributes and messages and movement inputs, an RPC's input and
	// result, a SetAttributes, a Publish. At least MaxPayloadBytes. It also
	// sizes the largest gRPC message the server accepts.
	MaxRequestBytes int `yaml:"maxRequestBytes"`
	// MaxFlowAttributeBytes limits a run's attribute values in total after a
	// write (a write that replaces an attribute counts its new size only).
	// At least MaxPayloadBytes.
	MaxFlowAttributeBytes int `yaml:"maxFlowAttributeBytes"`
	// StateCacheBytes bounds the memory of the active process's cache of
	// decoded flow states (estimated from their values and history); a
	// state above a quarter of it is not cached but read from the local
	// store when used.
	StateCacheBytes int `yaml:"stateCacheBytes"`
	// WaitForFlowMax caps a WaitForFlow long poll (E25).
	WaitForFlowMax time.Duration `yaml:"waitForFlowMax"`

	// Bounded load (issue 11; node doc: Bounded load). Beyond these, calls
	// that ask for new work are refused with RESOURCE_EXHAUSTED and a retry
	// hint, before anything is done; worker results and timers are never
	// refused.
	//
	// MaxPendingRequests bounds the client calls asking for new work that
	// are admitted and not answered yet (and the sequencer's queue when one
	// is admitted).
	MaxPendingRequests int `yaml:"maxPendingRequests"`
	// MaxPendingBytes bounds those calls' request bytes (a call alone is
	// admitted whatever its size) and the log writer's queued bytes when
	// one is admitted.
	MaxPendingBytes int64 `yaml:"maxPendingBytes"`
	// MaxQueuedTasks refuses a StartFlow while its flow type has this many
	// tasks waiting for a worker.
	MaxQueuedTasks int `yaml:"maxQueuedTasks"`
	// MaxConcurrentStreams bounds the calls and streams one connection may
	// have open at once; a client's further calls wait in the client.
	MaxConcurrentStreams uint32 `yaml:"maxConcurrentStreams"`
	// MaxFlowWaiters bounds the WaitForFlow calls that wait at once; one
	// more that would wait is refused as overloaded (retry hint 1 s).
	MaxFlowWaiters int `yaml:"maxFlowWaiters"`
	// ContinueAsNewHistoryEvents: a run whose history reaches this many
	// events continues as a new run of the same flow ID, carrying its
	// live state (E37). At least 10.
	ContinueAsNewHistoryEvents int `yaml:"continueAsNewHistoryEvents"`
	// ValueObjectBytes: a user value of at least this many bytes is
	// written to the durable store as an object of its own, beside the
	// log, before its request is decided; the log and the local store keep
	// a reference to it (serving: Value objects). 0 keeps every value in
	// the log.
	ValueObjectBytes int `yaml:"valueObjectBytes"`
	// ValueCacheBytes bounds the memory of the bytes of the value objects
	// the process wrote or read last, which it reuses instead of reading
	// or writing them again (wal.ValueCache). 0 keeps none.
	ValueCacheBytes int `yaml:"valueCacheBytes"`
}

// Snapshots configures the snapshots the active process writes of its
// local store, after which it deletes the log below them: restore = newest
// snapshot + log tail, so replay and standby bootstrap stay bounded.
type Snapshots struct {
	// EveryBatches is the most log batches the active writes between
	// snapshots (sooner, after 1000, when the log since the last snapshot
	// holds half its size); 0 disables snapshots (and truncation: the log
	// grows without bound).
	EveryBatches int `yaml:"everyBatches"`
	// Keep is how many snapshots the node keeps (at least 1); the log is
	// kept from the newest one on.
	Keep int `yaml:"keep"`
}

// Tracing configures OpenTelemetry tracing (README: Tracing). It is off
// unless Endpoint is set or the standard OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT environment variable is;
// OTEL_SDK_DISABLED=true turns it off whatever is set. The other OTEL_*
// variables of the OTLP exporter and the SDK apply (headers, timeouts,
// compression, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER).
type Tracing struct {
	// Endpoint is the OTLP/gRPC receiver the spans are sent to, as a URL:
	// http://HOST:PORT for plaintext, https://HOST:PORT for TLS (port 4317
	// by convention). It wins over the OTEL_EXPORTER_OTLP_* endpoints.
	Endpoint string `yaml:"endpoint"`
	// SampleRatio is the fraction of new traces recorded, from 0 to 1; a
	// call that arrives with a trace context follows its caller's
	// decision. Unset, OTEL_TRACES_SAMPLER applies, and without it every
	// trace is recorded (1).
	SampleRatio float64 `yaml:"sampleRatio"`
}

// Web configures the web UI (package web): pages and same-origin JSON
// endpoints that call the process in-process, served over HTTP on Listen.
// Empty Listen serves nothing (the default); `dex-server-zd dev` serves it
// on DevWebListen unless the file or --web-listen says otherwise
// (ApplyWebFlag).
type Web struct {
	Listen string `yaml:"listen"`
	// ActiveURL, when set, is the UI's address that reaches the active
	// process (a load balancer that routes by /readyz, say): a standby's
	// node page links to it.
	ActiveURL string `yaml:"activeURL"`
	// DevDefault is set when Listen is dev's default rather than asked
	// for: an address in use then leaves the UI off with a warning
	// instead of failing the start (several dev servers side by side).
	DevDefault bool `yaml:"-"`
}

// DevWebListen is web.listen of `dex-server-zd dev` unless set.
const DevWebListen = "127.0.0.1:8802"

// ApplyWebFlag applies the --web-listen flag of mode's command: "off"
// turns the UI off, another non-empty value replaces web.listen, and
// without it dev serves on DevWebListen unless the file set web.listen.
func (c *Config) ApplyWebFlag(mode Mode, flag string) {
	switch {
	case flag == "off":
		c.Web.Listen, c.Web.DevDefault = "", false
	case flag != "":
		c.Web.Listen, c.Web.DevDefault = flag, false
	case mode == ModeDev && !c.IsSet("web.listen"):
		c.Web.Listen, c.Web.DevDefault = DevWebListen, true
	}
}

// Log configures the process's log lines on standard error.
type Log struct {
	// Format is "text" (slog's key=value lines, the default) or "json"
	// (one JSON object per line). Inside a traced call each line carries
	// trace_id and span_id.
	Format string `yaml:"format"`
}

// Log formats.
const (
	LogText = "text"
	LogJSON = "json"
)

// Limits on the size of requests and flows (issue 11).
const (
	// DefaultMaxRequestBytes is limits.maxRequestBytes: two values of the
	// default 4 MiB limit per request.
	DefaultMaxRequestBytes = 8 << 20
	// DefaultMaxFlowAttributeBytes is limits.maxFlowAttributeBytes: every
	// task carries all of its run's attributes beside its input, so with
	// the defaults a task (an input of at most 4 MiB and 4 MiB of
	// attributes) fits in the same message limit as a request
	// (maxRequestBytes plus overhead), and each dispatch of a flow copies
	// at most 4 MiB of attributes.
	DefaultMaxFlowAttributeBytes = 4 << 20
	// DefaultStateCacheBytes is limits.stateCacheBytes.
	DefaultStateCacheBytes = 128 << 20
)

// Defaults that depend on the mode.
const (
	// DefaultLeaseDuration is lease.duration for serve (L2).
	DefaultLeaseDuration = 10 * time.Second
	// DevLeaseDuration is lease.duration for dev and local unless the file
	// sets it (D1, D9).
	DevLeaseDuration = 30 * time.Second
)

// Defaults returns every default, in one place. lease.duration is the serve
// default; dev and local use DevLeaseDuration unless the file sets it.
func Defaults() Config {
	c := Config{
		NodeID: "node-1",
		Lease:  Lease{Duration: DefaultLeaseDuration},
		Standby: Standby{
			Mode:                  StandbyCold,
			HeldLeasePollInterval: 250 * time.Millisecond,
			StepDownHoldOff:       5 * time.Second,
			LaggingTakeoverDelay:  1500 * time.Millisecond,
			BehindLagThreshold:    10 * time.Second,
		},
		Dev:       Dev{DurabilityMode: DurabilityStrict},
		Lifecycle: Lifecycle{AttemptDrainTimeout: 30 * time.Second},
		API:       API{Listen: "127.0.0.1:8801", Reflection: true},
		Metrics:   Metrics{ReadyzOpen: true},
		Storage:   Storage{Backend: BackendFS},
		Limits: Limits{MaxPayloadBytes: 4 << 20, WaitForFlowMax: 60 * time.Second,
			MaxRequestBytes: DefaultMaxRequestBytes, MaxFlowAttributeBytes: DefaultMaxFlowAttributeBytes,
			StateCacheBytes: DefaultStateCacheBytes},
		Snapshots: Snapshots{EveryBatches: 10000, Keep: 2},
		Tracing:   Tracing{SampleRatio: 1},
		Log:       Log{Format: LogText},
	}
	c.Limits.MaxPendingRequests = DefaultMaxPendingRequests
	c.Limits.MaxPendingBytes = DefaultMaxPendingBytes
	c.Limits.MaxQueuedTasks = DefaultMaxQueuedTasks
	c.Limits.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	c.Limits.MaxFlowWaiters = DefaultMaxFlowWaiters
	c.Limits.ContinueAsNewHistoryEvents = DefaultContinueAsNewHistoryEvents
	c.Limits.ValueObjectBytes = DefaultValueObjectBytes
	c.Limits.ValueCacheBytes = DefaultValueCacheBytes
	return c
}

// Bounded load defaults (node.AdmissionLimits and the README's Bounded
// load section say why these values).
const (
	DefaultMaxPendingRequests   = 1024
	DefaultMaxPendingBytes      = 64 << 20
	DefaultMaxQueuedTasks       = 1000
	DefaultMaxConcurrentStreams = 16384
	DefaultMaxFlowWaiters       = 10_000
	// DefaultContinueAsNewHistoryEvents is engine.DefaultContinueAsNewHistoryEvents.
	DefaultContinueAsNewHistoryEvents = 10_000
	// MinContinueAsNewHistoryEvents is engine.MinContinueAsNewHistoryEvents.
	MinContinueAsNewHistoryEvents = 10
	// DefaultValueObjectBytes: values from 256 KiB on travel beside the
	// log. Below it a value costs the single-threaded path less than the
	// store request an object adds to its call.
	DefaultValueObjectBytes = 256 << 10
	// DefaultValueCacheBytes keeps the last eight values of the largest
	// size (4 MiB): a large flow's input, read for each of its tasks and
	// echoed by their results, is read and written once.
	DefaultValueCacheBytes = 32 << 20
)

// DefaultsYAML renders Defaults as YAML, for `dex-server-zd config defaults`.
func DefaultsYAML() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# dex-server-zd configuration defaults.\n")
	fmt.Fprintf(&buf, "# dev and local default lease.duration to %v unless the file sets it.\n", DevLeaseDuration)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	d := Defaults()
	if err := enc.Encode(&d); err != nil {
		return nil, fmt.Errorf("render defaults: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("render defaults: %w", err)
	}
	return buf.Bytes(), nil
}

// IsSet reports whether the configuration file set the key at the dotted
// path (for example "lease.duration").
func (c *Config) IsSet(path string) bool { return c.set[path] }

// Load reads and parses the file at path for mode. An empty path means no
// file: the defaults for mode.
func Load(path string, mode Mode) (*Config, error) {
	if path == "" {
		return Parse(nil, mode)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	c, err := Parse(data, mode)
	if err != nil {
		return nil, fmt.Errorf("configuration %s: %w", path, err)
	}
	return c, nil
}

// Parse parses a YAML document for mode: defaults, then the document, then
// the mode's defaults, then Validate. Unknown keys are errors naming the
// key's full path.
func Parse(data []byte, mode Mode) (*Config, error) {
	switch mode {
	case ModeDev, ModeLocal, ModeServe:
	default:
		return nil, fmt.Errorf("unknown mode %q", mode)
	}
	c := Defaults()
	c.set = map[string]bool{}
	if len(bytes.TrimSpace(data)) > 0 {
		var root yaml.Node
		if err := yaml.Unmarshal(data, &root); err != nil {
			return nil, fmt.Errorf("parse YAML: %w", err)
		}
		if err := checkKeys(&root, &c, c.set); err != nil {
			return nil, err
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("parse YAML: %w", err)
		}
	}
	if mode.OnLocalDisk() && !c.IsSet("lease.duration") {
		c.Lease.Duration = DevLeaseDuration
	}
	// A file that raises maxPayloadBytes above the request and attribute
	// defaults without setting them raises them with it, so that one value
	// of the largest size stays legal.
	if !c.IsSet("limits.maxRequestBytes") {
		c.Limits.MaxRequestBytes = max(c.Limits.MaxRequestBytes, c.Limits.MaxPayloadBytes)
	}
	if !c.IsSet("limits.maxFlowAttributeBytes") {
		c.Limits.MaxFlowAttributeBytes = max(c.Limits.MaxFlowAttributeBytes, c.Limits.MaxPayloadBytes)
	}
	if err := c.Validate(mode); err != nil {
		return nil, err
	}
	return &c, nil
}
