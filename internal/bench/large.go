package bench

import (
	"fmt"
	"math"
	"strings"
)

// Large inputs (Config.LargeFraction, issue 11): a run can give a fraction
// of its flows a payload of LargePayloadBytes instead of PayloadBytes, to
// see what a few large values do to the ordinary flows beside them. The
// payload is the Pad every workload's input carries, so a large flow's
// start, every one of its tasks and results, and its own result each carry
// LargePayloadBytes.
//
// Which flows are large is fixed by their number within the phase: flow j
// (from 0) is large when ⌊(j+1)·F⌋ > ⌊j·F⌋, so the large flows are spread
// evenly (F = 0.01: flows 99, 199, …) and a phase of n flows has exactly
// ⌊n·F⌋ of them; the warmup has its own. Every large flow is checked like
// any other. Result.Latency and OrdinaryFlowsPerSecond cover the ordinary
// flows only, Result.Large the large ones.

const (
	// MaxPayloadBytes is the server's default limits.maxPayloadBytes
	// (engine.DefaultMaxPayloadBytes, 4 MiB): the largest value, counted in
	// encoded bytes, that a server with default limits accepts.
	MaxPayloadBytes = 4 << 20
	// LargeEnvelopeBytes is the room a large payload leaves, within
	// MaxPayloadBytes, for the rest of the encoded input or output (the
	// JSON field names, the value, the quotes).
	LargeEnvelopeBytes = 1 << 10
	// MaxLargePayloadBytes is the largest LargePayloadBytes: a payload of
	// that many bytes keeps every input and output of every workload within
	// MaxPayloadBytes. It is also the default.
	MaxLargePayloadBytes = MaxPayloadBytes - LargeEnvelopeBytes
	// MaxRequestBytes is the server's default limits.maxRequestBytes
	// (engine.DefaultMaxRequestBytes, 8 MiB): the values of one request in
	// total. A fanout flow's first step moves to its F branches in one
	// result, each with the payload, so a large fanout flow needs
	// F × (LargePayloadBytes + LargeEnvelopeBytes) within it.
	MaxRequestBytes = 8 << 20
)

// isLarge reports whether flow j of a phase carries the large payload when
// a fraction f of the flows do.
func isLarge(j int, f float64) bool {
	if f <= 0 {
		return false
	}
	return math.Floor(float64(j+1)*f) > math.Floor(float64(j)*f)
}

// LargeFlows is the number of large flows among n flows of a phase.
func LargeFlows(n int, f float64) int {
	if f <= 0 || n <= 0 {
		return 0
	}
	return int(math.Floor(float64(n) * f))
}

// checkLarge validates the large-input fields of c and applies the default
// size.
func (c *Config) checkLarge() []error {
	var errs []error
	switch {
	case math.IsNaN(c.LargeFraction) || c.LargeFraction < 0 || c.LargeFraction > 1:
		errs = append(errs, fmt.Errorf("LargeFraction is %v, want a fraction in [0, 1]", c.LargeFraction))
	case c.LargeFraction > 0 && c.LargePayloadBytes == 0:
		c.LargePayloadBytes = MaxLargePayloadBytes
	}
	if c.LargePayloadBytes < 0 || c.LargePayloadBytes > MaxLargePayloadBytes {
		errs = append(errs, fmt.Errorf("LargePayloadBytes is %d, want 1 to %d (limits.maxPayloadBytes %d less %d for the rest of the value)",
			c.LargePayloadBytes, MaxLargePayloadBytes, MaxPayloadBytes, LargeEnvelopeBytes))
	}
	if c.Workload == WorkloadFanout && c.LargeFraction > 0 && c.Branches > 0 &&
		c.Branches*(c.LargePayloadBytes+LargeEnvelopeBytes) > MaxRequestBytes {
		errs = append(errs, fmt.Errorf("LargePayloadBytes is %d with %d Branches: the first step's result would carry %d payloads, want them and their envelopes within limits.maxRequestBytes %d",
			c.LargePayloadBytes, c.Branches, c.Branches, MaxRequestBytes))
	}
	if c.LargePayloadBytes > 0 && c.LargeFraction == 0 {
		errs = append(errs, fmt.Errorf("LargePayloadBytes is %d but LargeFraction is 0: want both, or neither", c.LargePayloadBytes))
	}
	return errs
}

// payload returns the payload flow j of a phase carries, and whether it
// is a large one.
func (r *runner) payload(j int) (string, bool) {
	if isLarge(j, r.cfg.LargeFraction) {
		return r.largePad, true
	}
	return r.pad, false
}

// newLargePad is the large flows' payload; "" without large flows.
func newLargePad(cfg Config) string {
	if cfg.LargeFraction <= 0 {
		return ""
	}
	return strings.Repeat("L", cfg.LargePayloadBytes)
}

// OrdinaryCompleted is the number of completed measured flows without a
// large payload.
func (r Result) OrdinaryCompleted() int { return r.Completed - r.Large.Count }

// OrdinaryFlowsPerSecond is OrdinaryCompleted over Elapsed; FlowsPerSecond
// when the run had no large flows.
func (r Result) OrdinaryFlowsPerSecond() float64 { return rate(r.OrdinaryCompleted(), r.Elapsed) }

// LargeFlowsPerSecond is the large flows completed over Elapsed.
func (r Result) LargeFlowsPerSecond() float64 { return rate(r.Large.Count, r.Elapsed) }
