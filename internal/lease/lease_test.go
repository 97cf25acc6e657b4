package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testKey = "nodes/n1/lease"

// third10 is one third of a 10 s lease: the renewal interval.
const third10 = 10 * time.Second / 3

func config(s blob.Store, pid string, d time.Duration) lease.Config {
	return lease.Config{Store: s, Key: testKey, NodeID: "n1", ProcessID: pid, Duration: d}
}

// clock reads the bubble's fake time relative to the test's start.
type clock struct{ t0 time.Time }

func newClock() clock                        { return clock{t0: time.Now()} }
func (c clock) now() time.Duration           { return time.Since(c.t0) }
func (c clock) at(d time.Duration) time.Time { return c.t0.Add(d) }

// sleepUntil sleeps until the fake time since the start is d.
func (c clock) sleepUntil(d time.Duration) { time.Sleep(d - c.now()) }

// call is one store request seen by recorder.
type call struct {
	op         string
	start, end time.Duration
	err        error
}

// recorder wraps the memory store and records when each request started
// and ended, in fake time since the test's start.
type recorder struct {
	*mem.Store
	clock clock

	mu    sync.Mutex
	calls []call
}

func newRecorder() *recorder { return &recorder{Store: mem.New(), clock: newClock()} }

func (r *recorder) add(op string, start time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{op: op, start: start, end: r.clock.now(), err: err})
}

// ops returns the recorded requests of op, in the order they ended.
func (r *recorder) ops(op string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.calls {
		if c.op == op {
			out = append(out, c)
		}
	}
	return out
}

func (r *recorder) Get(ctx context.Context, key string) ([]byte, blob.Version, error) {
	start := r.clock.now()
	data, v, err := r.Store.Get(ctx, key)
	r.add(blob.OpGet, start, err)
	return data, v, err
}

func (r *recorder) PutIfAbsent(ctx context.Context, key string, data []byte) (blob.Version, error) {
	start := r.clock.now()
	v, err := r.Store.PutIfAbsent(ctx, key, data)
	r.add(blob.OpPutIfAbsent, start, err)
	return v, err
}

func (r *recorder) PutIfMatch(ctx context.Context, key string, data []byte, v blob.Version) (blob.Version, error) {
	start := r.clock.now()
	nv, err := r.Store.PutIfMatch(ctx, key, data, v)
	r.add(blob.OpPutIfMatch, start, err)
	return nv, err
}

// faultAfter installs a fault function that gives the n-th request of op
// (counting from 1) the fault f(n, now) and other requests none.
func faultOn(s *mem.Store, c clock, op string, f func(n int, now time.Duration) mem.Fault) {
	var mu sync.Mutex
	n := 0
	s.SetFaults(func(o, key string) mem.Fault {
		if o != op {
			return mem.Fault{}
		}
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		return f(i, c.now())
	})
}

// stall is a fault that outlasts every test.
var stall = mem.Fault{Latency: 24 * time.Hour}

type result struct {
	err error
	at  time.Duration
}

// run starts h.Run in a goroutine; the result arrives on the channel.
func run(ctx context.Context, h *lease.Holder, c clock) <-chan result {
	ch := make(chan result, 1)
	go func() {
		err := h.Run(ctx)
		ch <- result{err: err, at: c.now()}
	}()
	return ch
}

func mustAcquire(t *testing.T, cfg lease.Config) *lease.Holder {
	t.Helper()
	h, err := lease.Acquire(t.Context(), cfg)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return h
}

func mustRead(t *testing.T, s blob.Store) lease.Record {
	t.Helper()
	rec, _, err := lease.Read(t.Context(), s, testKey)
	if err != nil {
		t.Fatalf("read lease: %v", err)
	}
	return rec
}

// Covers: L1
func TestRecord_HoldsEpochHolderDurationAndRenewalTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		c := newClock()
		time.Sleep(1500 * time.Millisecond)
		h := mustAcquire(t, config(s, "host-a/42/beef", 0))

		raw, ok := s.Raw(testKey)
		if !ok {
			t.Fatal("no lease object")
		}
		var got map[string]any
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("lease object is not JSON: %v: %s", err, raw)
		}
		want := map[string]any{
			"version":    1.0,
			"nodeId":     "n1",
			"epoch":      1.0,
			"holder":     "host-a/42/beef",
			"durationMs": 10000.0,
			"renewedAt":  "2000-01-01T00:00:01.5Z",
			"released":   false,
			"write":      1.0,
		}
		if len(got) != len(want) {
			t.Errorf("lease object has fields %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("field %s = %v, want %v", k, got[k], v)
			}
		}

		rec := mustRead(t, s)
		wantRec := lease.Record{NodeID: "n1", Epoch: 1, Holder: "host-a/42/beef", Duration: 10 * time.Second,
			RenewedAt: c.at(1500 * time.Millisecond).UTC(), Write: 1}
		if rec != wantRec {
			t.Errorf("Read = %+v, want %+v", rec, wantRec)
		}
		if hr := h.Record(); hr != wantRec {
			t.Errorf("Holder.Record = %+v, want %+v", hr, wantRec)
		}
		if h.Epoch() != 1 || h.ProcessID() != "host-a/42/beef" || h.Key() != testKey || h.Duration() != 10*time.Second {
			t.Errorf("holder reports epoch %d, process %q, key %q, duration %v",
				h.Epoch(), h.ProcessID(), h.Key(), h.Duration())
		}
		back, err := lease.Decode(rec.Encode())
		if err != nil || back != rec {
			t.Errorf("round trip = %+v, %v; want %+v", back, err, rec)
		}
	})
}

// Covers: L1
func TestNewProcessID_UniquePerCall(t *testing.T) {
	a, b := lease.NewProcessID(), lease.NewProcessID()
	if a == b || strings.Count(a, "/") != 2 {
		t.Fatalf("process IDs %q and %q: want two distinct host/pid/random IDs", a, b)
	}
}

// Covers: L9
func TestRead_MalformedLeaseIsPermanentAndNamesKey(t *testing.T) {
	for name, data := range map[string]string{
		"not json":        "lease!",
		"empty object":    "{}",
		"future version":  `{"version":2,"nodeId":"n1","epoch":1,"holder":"p","durationMs":10000,"renewedAt":"2000-01-01T00:00:00Z"}`,
		"epoch zero":      `{"version":1,"nodeId":"n1","epoch":0,"holder":"p","durationMs":10000,"renewedAt":"2000-01-01T00:00:00Z"}`,
		"no holder":       `{"version":1,"nodeId":"n1","epoch":1,"holder":"","durationMs":10000,"renewedAt":"2000-01-01T00:00:00Z"}`,
		"no duration":     `{"version":1,"nodeId":"n1","epoch":1,"holder":"p","renewedAt":"2000-01-01T00:00:00Z"}`,
		"bad renewedAt":   `{"version":1,"nodeId":"n1","epoch":1,"holder":"p","durationMs":10000,"renewedAt":"yesterday"}`,
		"negative epoch":  `{"version":1,"nodeId":"n1","epoch":-1,"holder":"p","durationMs":10000,"renewedAt":"2000-01-01T00:00:00Z"}`,
		"epoch as string": `{"version":1,"nodeId":"n1","epoch":"1","holder":"p","durationMs":10000,"renewedAt":"2000-01-01T00:00:00Z"}`,
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := mem.New()
				s.SetRaw(testKey, []byte(data))
				_, _, err := lease.Read(t.Context(), s, testKey)
				if blob.Classify(err) != blob.ErrPermanent || !strings.Contains(err.Error(), testKey) {
					t.Fatalf("Read: %v; want a permanent error naming %q", err, testKey)
				}
				start := time.Now()
				_, err = lease.Acquire(t.Context(), config(s, "p2", 0))
				if blob.Classify(err) != blob.ErrPermanent || !strings.Contains(err.Error(), testKey) {
					t.Fatalf("Acquire: %v; want a permanent error naming %q", err, testKey)
				}
				if d := time.Since(start); d != 0 {
					t.Fatalf("Acquire returned after %v, want at once", d)
				}
			})
		})
	}
}

// Covers: L13
func TestRecord_ExpiryIsRenewalPlusRecordedDurationPlusOneSecond(t *testing.T) {
	renewed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	r := lease.Record{NodeID: "n1", Epoch: 3, Holder: "p", Duration: 60 * time.Second, RenewedAt: renewed}
	expiry := renewed.Add(61 * time.Second)
	if !r.ExpiresAt().Equal(expiry) {
		t.Fatalf("ExpiresAt = %v, want %v", r.ExpiresAt(), expiry)
	}
	for _, tc := range []struct {
		now     time.Time
		expired bool
		state   lease.State
	}{
		{renewed, false, lease.StateHeld},
		{renewed.Add(60 * time.Second), false, lease.StateHeld},
		{expiry.Add(-time.Nanosecond), false, lease.StateHeld},
		{expiry, true, lease.StateExpired},
		{expiry.Add(time.Hour), true, lease.StateExpired},
	} {
		if got := r.ExpiredAt(tc.now); got != tc.expired {
			t.Errorf("ExpiredAt(renewed+%v) = %t, want %t", tc.now.Sub(renewed), got, tc.expired)
		}
		if got := r.StateAt(tc.now); got != tc.state {
			t.Errorf("StateAt(renewed+%v) = %v, want %v", tc.now.Sub(renewed), got, tc.state)
		}
		if got := r.AvailableAt(tc.now); got != tc.expired {
			t.Errorf("AvailableAt(renewed+%v) = %t, want %t", tc.now.Sub(renewed), got, tc.expired)
		}
	}
	r.Released = true
	if r.StateAt(renewed) != lease.StateReleased || !r.AvailableAt(renewed) || r.ExpiredAt(renewed) {
		t.Errorf("released lease: state %v, available %t, expired %t", r.StateAt(renewed), r.AvailableAt(renewed), r.ExpiredAt(renewed))
	}
}

// Covers: L6
func TestAttemptTimeout_OneSixthClampedToOneAndFiveSeconds(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{
		time.Second:       time.Second,
		3 * time.Second:   time.Second,
		6 * time.Second:   time.Second,
		10 * time.Second:  10 * time.Second / 6,
		30 * time.Second:  5 * time.Second,
		60 * time.Second:  5 * time.Second,
		120 * time.Second: 5 * time.Second,
	} {
		if got := lease.AttemptTimeout(d); got != want {
			t.Errorf("AttemptTimeout(%v) = %v, want %v", d, got, want)
		}
	}
}

// Covers: L2
func TestConfig_Validation(t *testing.T) {
	s := mem.New()
	for name, cfg := range map[string]lease.Config{
		"no store":           {Key: testKey, NodeID: "n1", ProcessID: "p"},
		"no node":            {Store: s, Key: testKey, ProcessID: "p"},
		"no process":         {Store: s, Key: testKey, NodeID: "n1"},
		"bad key":            {Store: s, Key: "nodes//lease", NodeID: "n1", ProcessID: "p"},
		"too short":          {Store: s, Key: testKey, NodeID: "n1", ProcessID: "p", Duration: 500 * time.Millisecond},
		"sub-millisecond":    {Store: s, Key: testKey, NodeID: "n1", ProcessID: "p", Duration: 10*time.Second + 1},
		"negative poll time": {Store: s, Key: testKey, NodeID: "n1", ProcessID: "p", PollInterval: -1},
	} {
		if _, err := lease.Acquire(t.Context(), cfg); err == nil || !strings.HasPrefix(err.Error(), "lease config") {
			t.Errorf("%s: Acquire = %v, want a config error", name, err)
		}
	}
	if _, err := lease.Acquire(t.Context(), config(s, "p", 0)); err != nil {
		t.Fatal(err)
	}
	if rec := mustRead(t, s); rec.Duration != lease.DefaultDuration || lease.DefaultDuration != 10*time.Second {
		t.Fatalf("default duration: record says %v, DefaultDuration %v; want 10s", rec.Duration, lease.DefaultDuration)
	}
}

// errorsAsStop returns the *StopError in err, failing the test if none.
func errorsAsStop(t *testing.T, err error) *lease.StopError {
	t.Helper()
	var stop *lease.StopError
	if !errors.As(err, &stop) {
		t.Fatalf("error %v is not a *lease.StopError", err)
	}
	return stop
}
