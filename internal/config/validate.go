package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// MinLeaseDuration is the shortest lease.duration accepted.
const MinLeaseDuration = time.Second

// MaxRequestBytesCeiling is the largest limits.maxRequestBytes accepted:
// the server holds a whole request in memory, and the gRPC message limit
// derived from it must stay far below 2 GiB.
const MaxRequestBytesCeiling = 256 << 20

// Validate checks c for mode and returns every problem found, each naming
// its keys.
func (c *Config) Validate(mode Mode) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	switch {
	case c.NodeID == "":
		bad("nodeId: must not be empty")
	case strings.ContainsAny(c.NodeID, "/\\\x00") || strings.HasPrefix(c.NodeID, ".") || len(c.NodeID) > 200:
		bad("nodeId: %q must be at most 200 bytes, must not start with '.' and must not contain '/', '\\' or NUL", c.NodeID)
	}

	switch d := c.Lease.Duration; {
	case d < MinLeaseDuration:
		bad("lease.duration: %v is shorter than the minimum %v", d, MinLeaseDuration)
	case d%time.Millisecond != 0:
		bad("lease.duration: %v is not a whole number of milliseconds", d)
	}

	positive := func(key string, d time.Duration) {
		if d <= 0 {
			bad("%s: must be positive, got %v", key, d)
		}
	}
	positive("standby.heldLeasePollInterval", c.Standby.HeldLeasePollInterval)
	positive("standby.stepDownHoldOff", c.Standby.StepDownHoldOff)
	positive("standby.laggingTakeoverDelay", c.Standby.LaggingTakeoverDelay)
	positive("standby.behindLagThreshold", c.Standby.BehindLagThreshold)
	switch c.Standby.Mode {
	case StandbyCold:
	case StandbyHot:
		if mode.OnLocalDisk() {
			// D10: a dev or local node has no standby.
			bad("standby.mode: %s accepts only %q, got %q", mode, StandbyCold, c.Standby.Mode)
			break
		}
		// S5.
		if c.Lease.FailIfHeld {
			bad("standby.mode: %q needs lease.failIfHeld: false", StandbyHot)
		}
		if s := c.Standby; s.StepDownHoldOff <= s.LaggingTakeoverDelay+s.HeldLeasePollInterval {
			bad("standby.stepDownHoldOff: in hot mode it must be longer than standby.laggingTakeoverDelay + standby.heldLeasePollInterval (%v + %v), got %v",
				s.LaggingTakeoverDelay, s.HeldLeasePollInterval, s.StepDownHoldOff)
		}
	default:
		bad("standby.mode: must be %q or %q, got %q", StandbyCold, StandbyHot, c.Standby.Mode)
	}

	switch c.Dev.DurabilityMode {
	case DurabilityStrict, DurabilityProcessCrashSafe, DurabilityRelaxed:
	default:
		bad("dev.durabilityMode: must be %q, %q or %q, got %q",
			DurabilityStrict, DurabilityProcessCrashSafe, DurabilityRelaxed, c.Dev.DurabilityMode)
	}

	if c.Lifecycle.AttemptDrainTimeout < 0 {
		bad("lifecycle.attemptDrainTimeout: must not be negative, got %v", c.Lifecycle.AttemptDrainTimeout)
	}

	if err := checkListen(c.API.Listen); err != nil {
		bad("api.listen: %v", err)
	}
	if c.Metrics.Listen != "" {
		if err := checkListen(c.Metrics.Listen); err != nil {
			bad("metrics.listen: %v", err)
		}
	}

	if c.Web.Listen != "" {
		if err := checkListen(c.Web.Listen); err != nil {
			bad("web.listen: %v", err)
		}
	}
	if c.Web.ActiveURL != "" {
		if u, err := url.Parse(c.Web.ActiveURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("web.activeURL: must be an http:// or https:// URL, got %q", c.Web.ActiveURL)
		}
	}

	switch c.Storage.Backend {
	case BackendFS:
		if !mode.OnLocalDisk() && c.Storage.FS.Dir == "" {
			bad("storage.fs.dir: must be set with storage.backend: fs")
		}
	case BackendS3:
		if mode.OnLocalDisk() {
			bad("storage.backend: %s keeps its log in the data directory; only %q is accepted, got %q", mode, BackendFS, BackendS3)
		} else if c.Storage.S3.Bucket == "" {
			bad("storage.s3.bucket: must be set with storage.backend: s3")
		}
		checkS3Security(c.Storage.S3, bad)
	case BackendPostgres:
		if mode.OnLocalDisk() {
			bad("storage.backend: %s keeps its log in the data directory; only %q is accepted, got %q", mode, BackendFS, BackendPostgres)
		} else if c.Storage.Postgres.DSN == "" {
			bad("storage.postgres.dsn: must be set with storage.backend: postgres")
		}
	default:
		bad("storage.backend: must be %q, %q or %q, got %q", BackendFS, BackendS3, BackendPostgres, c.Storage.Backend)
	}
	if !mode.OnLocalDisk() && c.LocalStore.Dir == "" {
		bad("localStore.dir: must be set in %s mode", mode)
	}

	if c.Admin.CredentialFile != "" {
		if err := checkCredentialFile(c.Admin.CredentialFile); err != nil {
			bad("admin.credentialFile: %v", err)
		}
	}

	errs = append(errs, c.validateSecurity()...)

	if c.Limits.MaxPayloadBytes <= 0 {
		bad("limits.maxPayloadBytes: must be positive, got %d", c.Limits.MaxPayloadBytes)
	} else if c.Limits.MaxPayloadBytes > 64<<20 {
		bad("limits.maxPayloadBytes: at most %d (64 MiB), got %d", 64<<20, c.Limits.MaxPayloadBytes)
	}
	switch r := c.Limits.MaxRequestBytes; {
	case r <= 0:
		bad("limits.maxRequestBytes: must be positive, got %d", r)
	case r < c.Limits.MaxPayloadBytes:
		bad("limits.maxRequestBytes: must be at least limits.maxPayloadBytes (%d), got %d", c.Limits.MaxPayloadBytes, r)
	case r > MaxRequestBytesCeiling:
		bad("limits.maxRequestBytes: at most %d (256 MiB), got %d", MaxRequestBytesCeiling, r)
	}
	if c.Limits.MaxFlowAttributeBytes <= 0 {
		bad("limits.maxFlowAttributeBytes: must be positive, got %d", c.Limits.MaxFlowAttributeBytes)
	} else if c.Limits.MaxFlowAttributeBytes < c.Limits.MaxPayloadBytes {
		bad("limits.maxFlowAttributeBytes: must be at least limits.maxPayloadBytes (%d), got %d", c.Limits.MaxPayloadBytes, c.Limits.MaxFlowAttributeBytes)
	}
	if c.Limits.StateCacheBytes < 1<<20 {
		bad("limits.stateCacheBytes: must be at least %d (1 MiB), got %d", 1<<20, c.Limits.StateCacheBytes)
	}
	positive("limits.waitForFlowMax", c.Limits.WaitForFlowMax)
	if c.Limits.MaxPendingRequests < 1 {
		bad("limits.maxPendingRequests: must be at least 1, got %d", c.Limits.MaxPendingRequests)
	}
	if c.Limits.MaxPendingBytes < 1<<20 {
		bad("limits.maxPendingBytes: must be at least %d (1 MiB), got %d", 1<<20, c.Limits.MaxPendingBytes)
	}
	if c.Limits.ValueObjectBytes < 0 {
		bad("limits.valueObjectBytes: must not be negative (0 keeps every value in the log), got %d", c.Limits.ValueObjectBytes)
	}
	if c.Limits.ValueCacheBytes < 0 {
		bad("limits.valueCacheBytes: must not be negative (0 keeps no value in memory), got %d", c.Limits.ValueCacheBytes)
	}
	if c.Limits.ContinueAsNewHistoryEvents < MinContinueAsNewHistoryEvents {
		bad("limits.continueAsNewHistoryEvents: must be at least %d, got %d", MinContinueAsNewHistoryEvents, c.Limits.ContinueAsNewHistoryEvents)
	}
	if c.Limits.MaxFlowWaiters < 1 {
		bad("limits.maxFlowWaiters: must be at least 1, got %d", c.Limits.MaxFlowWaiters)
	}
	if c.Limits.MaxQueuedTasks < 1 {
		bad("limits.maxQueuedTasks: must be at least 1, got %d", c.Limits.MaxQueuedTasks)
	}
	if c.Limits.MaxConcurrentStreams < 16 {
		bad("limits.maxConcurrentStreams: must be at least 16, got %d", c.Limits.MaxConcurrentStreams)
	}
	if c.Snapshots.EveryBatches < 0 {
		bad("snapshots.everyBatches: must be 0 (no snapshots) or positive, got %d", c.Snapshots.EveryBatches)
	}
	if c.Snapshots.Keep < 1 {
		bad("snapshots.keep: must be at least 1, got %d", c.Snapshots.Keep)
	}
	if c.Tracing.Endpoint != "" {
		if err := checkEndpoint(c.Tracing.Endpoint); err != nil {
			bad("tracing.endpoint: %v", err)
		}
	}
	if r := c.Tracing.SampleRatio; !(r >= 0 && r <= 1) {
		bad("tracing.sampleRatio: must be from 0 to 1, got %v", r)
	}
	switch c.Log.Format {
	case LogText, LogJSON:
	default:
		bad("log.format: must be %q or %q, got %q", LogText, LogJSON, c.Log.Format)
	}
	return errors.Join(errs...)
}

// checkCredentialFile checks that the admin credential file can be read and
// holds a credential (A9). The server trims the file's content; an empty
// credential would turn admin authentication off and leave StepDown open to
// anyone who reaches api.listen, so an empty, whitespace-only or unreadable
// file (a mis-mounted secret) is a configuration error, never "no
// credential". Only an unset key means no credential.
func checkCredentialFile(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("cannot read %s: %w", path, err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return fmt.Errorf("%s is empty or holds only whitespace; it must hold the admin credential (remove the key to run without one)", path)
	}
	return nil
}

// checkEndpoint checks an OTLP/gRPC endpoint URL: http or https, a host
// and nothing else (the gRPC exporter has no path).
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q must be a URL such as http://127.0.0.1:4317 (plaintext) or https://collector:4317 (TLS)", raw)
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", raw)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%q must be scheme://host:port only (OTLP/gRPC has no path, query or user)", raw)
	}
	return nil
}

func checkListen(addr string) error {
	if addr == "" {
		return errors.New("must not be empty")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	return nil
}
