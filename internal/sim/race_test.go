//go:build race

package sim

// raceEnabled: the race detector slows a run about sevenfold, so the
// default seed count is smaller.
const raceEnabled = true
