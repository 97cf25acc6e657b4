package bench

import (
	"math"
	"slices"
	"time"
)

// Latency summarises the latencies of a run's completed flows.
type Latency struct {
	Count                         int
	Min, Mean, P50, P95, P99, Max time.Duration
}

// Summarize sorts lat in place and summarises it; the zero Latency when lat
// is empty.
func Summarize(lat []time.Duration) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	return Latency{
		Count: len(lat),
		Min:   lat[0],
		Mean:  sum / time.Duration(len(lat)),
		P50:   Percentile(lat, 50),
		P95:   Percentile(lat, 95),
		P99:   Percentile(lat, 99),
		Max:   lat[len(lat)-1],
	}
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted, which
// must be in ascending order, by the nearest-rank method: the smallest
// value that at least p percent of the values do not exceed, so always one
// of the values. It returns 0 for an empty slice.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// p*n/100 rather than p/100*n: 95*100/100 is exactly 95, while
	// 0.95*100 is not, and Ceil would round it up to 96.
	rank := int(math.Ceil(p * float64(n) / 100))
	return sorted[min(max(rank, 1), n)-1]
}

// rate is count per second over d; 0 when d is 0.
func rate(count int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(count) / d.Seconds()
}

// CPUTime is the processor time a process used.
type CPUTime struct {
	User, System time.Duration
}

// Total is user plus system time.
func (c CPUTime) Total() time.Duration { return c.User + c.System }

// Sub is the time used between an earlier reading o and c.
func (c CPUTime) Sub(o CPUTime) CPUTime {
	return CPUTime{User: c.User - o.User, System: c.System - o.System}
}

// Per is the total time divided among n flows; 0 when n is 0.
func (c CPUTime) Per(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return c.Total() / time.Duration(n)
}
