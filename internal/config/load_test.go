package config_test

import (
	"strings"
	"testing"

	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/engine"
)

// The bounded-load keys have their defaults in Defaults, are printed, can
// be set, and bad values are refused naming the key.
//
// Covers: S4, E28
func TestLimits_BoundedLoadKeys(t *testing.T) {
	t.Parallel()
	d := config.Defaults()
	if l := d.Limits; l.MaxPendingRequests != 1024 || l.MaxPendingBytes != 64<<20 || l.MaxQueuedTasks != 1000 || l.MaxConcurrentStreams != 16384 {
		t.Errorf("defaults: %+v", l)
	}
	out, err := config.DefaultsYAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"maxPendingRequests: 1024", "maxPendingBytes: 67108864", "maxQueuedTasks: 1000", "maxConcurrentStreams: 16384", "maxFlowWaiters: 10000"} {
		if !strings.Contains(string(out), k) {
			t.Errorf("defaults output lacks %q", k)
		}
	}
	c, err := config.Parse([]byte("limits:\n  maxPendingRequests: 10\n  maxPendingBytes: 2097152\n  maxQueuedTasks: 7\n  maxConcurrentStreams: 64\n  maxFlowWaiters: 5\n"), config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Limits; l.MaxPendingRequests != 10 || l.MaxPendingBytes != 2<<20 || l.MaxQueuedTasks != 7 || l.MaxConcurrentStreams != 64 || l.MaxFlowWaiters != 5 {
		t.Errorf("parsed: %+v", l)
	}
	for doc, want := range map[string]string{
		"limits:\n  maxPendingRequests: 0\n":   "limits.maxPendingRequests: must be at least 1",
		"limits:\n  maxPendingBytes: 1000\n":   "limits.maxPendingBytes: must be at least",
		"limits:\n  maxQueuedTasks: -1\n":      "limits.maxQueuedTasks: must be at least 1",
		"limits:\n  maxConcurrentStreams: 8\n": "limits.maxConcurrentStreams: must be at least 16",
		"limits:\n  maxFlowWaiters: 0\n":       "limits.maxFlowWaiters: must be at least 1",
	} {
		if _, err := config.Parse([]byte(doc), config.ModeDev); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", doc, err, want)
		}
	}
}

// limits.continueAsNewHistoryEvents (E37): the engine's default, printed by
// config defaults, at least the engine's minimum.
//
// Covers: E37
func TestLimits_ContinueAsNewHistoryEvents(t *testing.T) {
	t.Parallel()
	if config.DefaultContinueAsNewHistoryEvents != engine.DefaultContinueAsNewHistoryEvents ||
		config.MinContinueAsNewHistoryEvents != engine.MinContinueAsNewHistoryEvents {
		t.Fatal("the config's continue-as-new default or minimum differs from the engine's")
	}
	out, err := config.DefaultsYAML()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "continueAsNewHistoryEvents: 10000") {
		t.Errorf("defaults output lacks continueAsNewHistoryEvents: 10000")
	}
	c, err := config.Parse([]byte("limits:\n  continueAsNewHistoryEvents: 50\n"), config.ModeDev)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.ContinueAsNewHistoryEvents != 50 {
		t.Errorf("parsed %d, want 50", c.Limits.ContinueAsNewHistoryEvents)
	}
	_, err = config.Parse([]byte("limits:\n  continueAsNewHistoryEvents: 9\n"), config.ModeDev)
	if err == nil || !strings.Contains(err.Error(), "limits.continueAsNewHistoryEvents: must be at least 10") {
		t.Errorf("9: error %v, want limits.continueAsNewHistoryEvents: must be at least 10", err)
	}
}
