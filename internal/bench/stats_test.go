package bench

import (
	"math/rand/v2"
	"testing"
	"time"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentile_NearestRank(t *testing.T) {
	t.Parallel()
	one := ms(7)
	ten := ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value p50", one, 50, 7 * time.Millisecond},
		{"one value p99", one, 99, 7 * time.Millisecond},
		{"ten p50", ten, 50, 5 * time.Millisecond},
		{"ten p95 rounds up", ten, 95, 10 * time.Millisecond},
		{"ten p10", ten, 10, 1 * time.Millisecond},
		{"ten p11 rounds up", ten, 11, 2 * time.Millisecond},
		{"ten p100", ten, 100, 10 * time.Millisecond},
		{"tiny p is the minimum", ten, 0.001, 1 * time.Millisecond},
		{"hundred p95 exact rank", hundred, 95, 95 * time.Millisecond},
		{"hundred p99", hundred, 99, 99 * time.Millisecond},
		{"hundred p99.5", hundred, 99.5, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("Percentile(p%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

// At N=2000 the p99 is the 1980th value: 20 values lie above it.
func TestSummarize_2000Shuffled(t *testing.T) {
	t.Parallel()
	lat := make([]time.Duration, 2000)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Microsecond
	}
	rand.Shuffle(len(lat), func(i, j int) { lat[i], lat[j] = lat[j], lat[i] })
	got := Summarize(lat)
	want := Latency{
		Count: 2000,
		Min:   1 * time.Microsecond,
		Mean:  1000500 * time.Nanosecond, // (1+2000)/2 µs
		P50:   1000 * time.Microsecond,
		P95:   1900 * time.Microsecond,
		P99:   1980 * time.Microsecond,
		Max:   2000 * time.Microsecond,
	}
	if got != want {
		t.Errorf("Summarize = %+v\nwant        %+v", got, want)
	}
}

func TestSummarize_Empty(t *testing.T) {
	t.Parallel()
	if got := Summarize(nil); got != (Latency{}) {
		t.Errorf("Summarize(nil) = %+v", got)
	}
}

func TestResult_Rates(t *testing.T) {
	t.Parallel()
	r := Result{Completed: 2000, Steps: 3, StepsPerFlow: 3, Elapsed: 4 * time.Second,
		CPU: CPUTime{User: 3 * time.Second, System: time.Second}}
	if got := r.FlowsPerSecond(); got != 500 {
		t.Errorf("FlowsPerSecond = %v, want 500", got)
	}
	if got := r.StepsPerSecond(); got != 1500 {
		t.Errorf("StepsPerSecond = %v, want 1500", got)
	}
	if got := r.CPU.Per(r.Completed); got != 2*time.Millisecond {
		t.Errorf("CPU per flow = %v, want 2ms", got)
	}
	if got := (Result{Completed: 5}).FlowsPerSecond(); got != 0 {
		t.Errorf("FlowsPerSecond without elapsed time = %v, want 0", got)
	}
	if got := (CPUTime{User: time.Second}).Per(0); got != 0 {
		t.Errorf("Per(0) = %v, want 0", got)
	}
	a, b := CPUTime{User: 5 * time.Second, System: 2 * time.Second}, CPUTime{User: 2 * time.Second, System: time.Second}
	if got := a.Sub(b); got != (CPUTime{User: 3 * time.Second, System: time.Second}) || got.Total() != 4*time.Second {
		t.Errorf("Sub = %+v", got)
	}
}

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	// A command name with spaces and a parenthesis; utime 250, stime 75.
	line := "4242 (dex (server) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 100 0 0\n"
	got, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := (CPUTime{User: 2500 * time.Millisecond, System: 750 * time.Millisecond}); got != want {
		t.Errorf("parseProcStat = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "4242 dex S 1", "4242 (dex) S 1 2 3", "4242 (dex) S 1 4242 4242 0 -1 4194560 1234 0 0 0 x 75 0"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) succeeded", bad)
		}
	}
}

func TestSelfCPU_Grows(t *testing.T) {
	t.Parallel()
	c0, err := SelfCPU()
	if err != nil {
		t.Fatal(err)
	}
	// Burn some CPU time, then read again.
	x := 0
	for i := range 50_000_000 {
		x += i % 7
	}
	_ = x
	c1, err := SelfCPU()
	if err != nil {
		t.Fatal(err)
	}
	if d := c1.Sub(c0); d.Total() <= 0 {
		t.Errorf("CPU time did not grow: %+v then %+v", c0, c1)
	}
}
