package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/mem"
	"github.com/dexzd/dexzd/internal/lease"
)

// starts returns the start times of the recorded requests of op.
func starts(calls []call) []time.Duration {
	out := make([]time.Duration, len(calls))
	for i, c := range calls {
		out[i] = c.start
	}
	return out
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Covers: L2
func TestRun_RenewsAfterOneThirdOfTheDuration(t *testing.T) {
	for _, d := range []time.Duration{0, 30 * time.Second, 3 * time.Second} {
		t.Run(fmt.Sprint(d), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newRecorder()
				c := s.clock
				h := mustAcquire(t, config(s, "a", d))
				dur := h.Duration()
				if d == 0 && dur != 10*time.Second {
					t.Fatalf("default duration %v, want 10s", dur)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := run(ctx, h, c)
				time.Sleep(2*dur + dur/6)
				cancel()
				if r := <-done; r.err != nil {
					t.Fatalf("Run: %v", r.err)
				}
				var want []time.Duration
				for k := time.Duration(1); k <= 6; k++ {
					want = append(want, k*(dur/3))
				}
				if got := starts(s.ops(blob.OpPutIfMatch)); !equalDurations(got, want) {
					t.Fatalf("renewals sent at %v, want %v", got, want)
				}
				if rec := mustRead(t, s); rec.Write != 7 || !rec.RenewedAt.Equal(c.at(6*(dur/3))) {
					t.Fatalf("stored %+v", rec)
				}
			})
		})
	}
}

// The renewal schedule counts from the acquisition write, not from when
// Run starts: a Run started within the period renews at once if the
// renewal is overdue, and one started after the renewal cutoff (a holder
// that recovered for longer than its lease before renewing) returns
// ErrRenewalTimeout at once and writes nothing. So a holder starts Run
// right after the acquisition.
//
// Covers: L2, L7
func TestRun_SchedulesFromTheAcquisitionNotFromTheStartOfRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			startAt time.Duration // after the acquisition, d = 10 s
			renewAt time.Duration // -1: no renewal, ErrRenewalTimeout at once
		}{
			{"within the first third", 2 * time.Second, 10 * time.Second / 3},
			{"renewal overdue", 5 * time.Second, 5 * time.Second},
			{"after the cutoff", 30 * time.Second, -1},
		} {
			s := newRecorder()
			c := s.clock
			h := mustAcquire(t, config(s, "a", 10*time.Second))
			c.sleepUntil(tc.startAt)
			ctx, cancel := context.WithCancel(t.Context())
			done := run(ctx, h, c)
			if tc.renewAt < 0 {
				r := <-done
				cancel()
				if !errors.Is(r.err, lease.ErrRenewalTimeout) || r.at != tc.startAt {
					t.Fatalf("%s: Run = %v at %v, want ErrRenewalTimeout at once (%v)", tc.name, r.err, r.at, tc.startAt)
				}
				if n := len(s.ops(blob.OpPutIfMatch)); n != 0 || h.Valid() {
					t.Fatalf("%s: %d renewal writes, valid %v; want none, not valid", tc.name, n, h.Valid())
				}
				continue
			}
			c.sleepUntil(tc.startAt + 5*time.Second)
			cancel()
			if r := <-done; r.err != nil {
				t.Fatalf("%s: Run = %v", tc.name, r.err)
			}
			if got := starts(s.ops(blob.OpPutIfMatch)); len(got) == 0 || got[0] != tc.renewAt {
				t.Fatalf("%s: renewals sent at %v, want the first at %v", tc.name, got, tc.renewAt)
			}
		}
	})
}

// Covers: L2, P2
func TestRun_ValidityCountsFromWhenTheRenewalWasSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRecorder()
		c := s.clock
		h := mustAcquire(t, config(s, "a", 0))
		faultOn(s.Store, c, blob.OpPutIfMatch, func(int, time.Duration) mem.Fault {
			return mem.Fault{Latency: time.Second} // slow but within the cut-off
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := run(ctx, h, c)
		c.sleepUntil(third10 + time.Second + time.Millisecond)
		if got := h.ValidUntil(); !got.Equal(c.at(third10 + 10*time.Second)) {
			t.Fatalf("ValidUntil = %v, want sent time 3.333s + 10s", got.Sub(c.t0))
		}
		c.sleepUntil(7 * time.Second)
		cancel()
		<-done
		if got := starts(s.ops(blob.OpPutIfMatch)); !equalDurations(got, []time.Duration{third10, 2 * third10}) {
			t.Fatalf("renewals sent at %v, want every 3.333s from the send time", got)
		}
	})
}

// Covers: P2
func TestHolder_ValidUntilSentPlusDurationOnItsOwnClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		c := newClock()
		faultOn(s, c, blob.OpPutIfAbsent, func(int, time.Duration) mem.Fault {
			return mem.Fault{Latency: 700 * time.Millisecond}
		})
		h := mustAcquire(t, config(s, "a", 0))
		if c.now() != 700*time.Millisecond {
			t.Fatalf("acquired at %v", c.now())
		}
		// The store is now unreachable and nothing renews.
		s.SetFaults(func(string, string) mem.Fault { return stall })
		if !h.ValidUntil().Equal(c.at(10 * time.Second)) {
			t.Fatalf("ValidUntil %v, want 10s (acquisition sent at 0)", h.ValidUntil().Sub(c.t0))
		}
		c.sleepUntil(10*time.Second - time.Nanosecond)
		if !h.Valid() {
			t.Fatal("not valid 1ns before sent + duration")
		}
		time.Sleep(time.Nanosecond)
		if h.Valid() {
			t.Fatal("still valid at sent + duration")
		}
		if err := h.Check(t.Context()); !errors.Is(err, lease.ErrNotValid) {
			t.Fatalf("Check: %v, want ErrNotValid", err)
		}
	})
}

// Covers: L5
func TestRun_TransientErrorRetriedAfterBackoff(t *testing.T) {
	for name, err := range map[string]error{
		"5xx":          mem.ErrServer,
		"throttled":    mem.ErrThrottled,
		"409 conflict": mem.ErrConflict,
		"reset":        errors.New("read tcp 10.0.0.1:4711: connection reset by peer"),
		"classified":   blob.Transient(blob.OpPutIfMatch, testKey, errors.New("EOF")),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newRecorder()
				c := s.clock
				h := mustAcquire(t, config(s, "a", 0))
				faultOn(s.Store, c, blob.OpPutIfMatch, func(n int, _ time.Duration) mem.Fault {
					if n <= 2 {
						return mem.Fault{Err: err}
					}
					return mem.Fault{}
				})
				ctx, cancel := context.WithCancel(t.Context())
				done := run(ctx, h, c)
				c.sleepUntil(5 * time.Second)
				cancel()
				if r := <-done; r.err != nil {
					t.Fatalf("Run: %v", r.err)
				}
				sent := third10 + 300*time.Millisecond
				want := []time.Duration{third10, third10 + 100*time.Millisecond, sent}
				if got := starts(s.ops(blob.OpPutIfMatch)); !equalDurations(got, want) {
					t.Fatalf("attempts at %v, want %v (backoff 100ms, 200ms)", got, want)
				}
				if !h.ValidUntil().Equal(c.at(sent + 10*time.Second)) {
					t.Fatalf("ValidUntil %v", h.ValidUntil().Sub(c.t0))
				}
			})
		})
	}
	t.Run("timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newRecorder()
			c := s.clock
			h := mustAcquire(t, config(s, "a", 0))
			faultOn(s.Store, c, blob.OpPutIfMatch, func(n int, _ time.Duration) mem.Fault {
				if n == 1 {
					return stall
				}
				return mem.Fault{}
			})
			ctx, cancel := context.WithCancel(t.Context())
			done := run(ctx, h, c)
			c.sleepUntil(6 * time.Second)
			cancel()
			if r := <-done; r.err != nil {
				t.Fatalf("Run: %v", r.err)
			}
			cut := third10 + 10*time.Second/6
			got := s.ops(blob.OpPutIfMatch)
			if len(got) != 2 || got[0].start != third10 || got[0].end != cut || got[1].start != cut+100*time.Millisecond || got[1].err != nil {
				t.Fatalf("attempts %+v, want one cut off at %v and a retry 100ms later", got, cut)
			}
		})
	})
}

type attempt struct{ start, end time.Duration }

// Covers: L6, L7
func TestRun_AttemptCutOffs(t *testing.T) {
	const ms = time.Millisecond
	t10 := 10 * time.Second / 6 // 1.666666666s
	a10 := []attempt{{third10, third10 + t10}}
	for _, b := range []time.Duration{100 * ms, 200 * ms} {
		s := a10[len(a10)-1].end + b
		a10 = append(a10, attempt{s, s + t10})
	}
	a10 = append(a10, attempt{a10[2].end + 400*ms, 9900 * ms}) // last: up to the cutoff

	for _, tc := range []struct {
		name     string
		d        time.Duration
		fault    func(now time.Duration) mem.Fault
		want     []attempt // the last len(want) attempts
		wantStop time.Duration
	}{
		{
			name: "10s lease: cut at d/6, last attempt to the cutoff",
			d:    10 * time.Second, fault: func(time.Duration) mem.Fault { return stall },
			want: a10, wantStop: 9900 * ms,
		},
		{
			name: "60s lease: cut at the 5s cap",
			d:    60 * time.Second, fault: func(time.Duration) mem.Fault { return stall },
			want: []attempt{
				{20000 * ms, 25000 * ms}, {25100 * ms, 30100 * ms}, {30300 * ms, 35300 * ms},
				{35700 * ms, 40700 * ms}, {41500 * ms, 46500 * ms}, {47500 * ms, 52500 * ms},
				{53500 * ms, 58500 * ms}, {59500 * ms, 59900 * ms},
			},
			wantStop: 59900 * ms,
		},
		{
			name: "60s lease: the last attempt runs longer than 5s",
			d:    60 * time.Second,
			fault: func(now time.Duration) mem.Fault {
				if now < 54500*ms {
					return mem.Fault{Err: mem.ErrServer}
				}
				return stall
			},
			want:     []attempt{{53500 * ms, 53500 * ms}, {54500 * ms, 59900 * ms}},
			wantStop: 59900 * ms,
		},
		{
			name: "3s lease: 1s floor",
			d:    3 * time.Second, fault: func(time.Duration) mem.Fault { return stall },
			want:     []attempt{{1000 * ms, 2000 * ms}, {2100 * ms, 2900 * ms}},
			wantStop: 2900 * ms,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newRecorder()
				c := s.clock
				h := mustAcquire(t, config(s, "a", tc.d))
				faultOn(s.Store, c, blob.OpPutIfMatch, func(_ int, now time.Duration) mem.Fault { return tc.fault(now) })
				r := <-run(t.Context(), h, c)
				if !errors.Is(r.err, lease.ErrRenewalTimeout) || r.at != tc.wantStop {
					t.Fatalf("Run returned %v at %v, want ErrRenewalTimeout at %v", r.err, r.at, tc.wantStop)
				}
				calls := s.ops(blob.OpPutIfMatch)
				if len(calls) < len(tc.want) {
					t.Fatalf("%d attempts, want at least %d", len(calls), len(tc.want))
				}
				calls = calls[len(calls)-len(tc.want):]
				for i, w := range tc.want {
					if calls[i].start != w.start || calls[i].end != w.end {
						t.Errorf("attempt %d ran %v-%v, want %v-%v", i, calls[i].start, calls[i].end, w.start, w.end)
					}
				}
				if r.at > tc.d-100*ms {
					t.Errorf("stopped at %v, after the renewal cutoff", r.at)
				}
			})
		})
	}
}

// Covers: L7, P2
func TestRun_StalledStoreStopsAtTheCutoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		c := newClock()
		h := mustAcquire(t, config(s, "a", 0))
		s.SetFaults(func(string, string) mem.Fault { return stall })
		done := run(t.Context(), h, c)
		c.sleepUntil(9900*time.Millisecond - time.Nanosecond)
		if !h.Valid() {
			t.Fatal("invalid before the renewal cutoff")
		}
		select {
		case <-h.Lost():
			t.Fatal("lost before the renewal cutoff")
		default:
		}
		r := <-done
		if !errors.Is(r.err, lease.ErrRenewalTimeout) || r.at != 9900*time.Millisecond {
			t.Fatalf("Run returned %v at %v, want ErrRenewalTimeout at 9.9s", r.err, r.at)
		}
		if !errors.Is(r.err, blob.ErrTransient) {
			t.Errorf("%v does not carry the last attempt's error", r.err)
		}
		stop := errorsAsStop(t, r.err)
		if !errors.Is(stop.Reason, lease.ErrRenewalTimeout) || stop.Epoch != 1 || stop.Key != testKey {
			t.Errorf("StopError %+v", stop)
		}
		if h.Valid() {
			t.Error("still valid after Run stopped")
		}
		select {
		case <-h.Lost():
		default:
			t.Error("Lost not closed")
		}
		if !errors.Is(h.Err(), r.err) {
			t.Errorf("Err() = %v, want %v", h.Err(), r.err)
		}
	})
}

// Covers: L7
func TestRun_StopsWhenTheNextBackoffWouldEndAfterTheCutoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRecorder()
		c := s.clock
		h := mustAcquire(t, config(s, "a", 0))
		s.SetFaults(func(string, string) mem.Fault { return mem.Fault{Err: mem.ErrServer} })
		r := <-run(t.Context(), h, c)
		// Backoffs 0.1, 0.2, 0.4, 0.8 and then 1s each: the attempt at
		// 9.833s fails, and a 1s backoff would end after 9.9s.
		want := []time.Duration{third10}
		for _, b := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000, 1000, 1000} {
			want = append(want, want[len(want)-1]+b*time.Millisecond)
		}
		if got := starts(s.ops(blob.OpPutIfMatch)); !equalDurations(got, want) {
			t.Fatalf("attempts at %v, want %v", got, want)
		}
		if !errors.Is(r.err, lease.ErrRenewalTimeout) || r.at != want[len(want)-1] {
			t.Fatalf("Run returned %v at %v, want ErrRenewalTimeout at %v", r.err, r.at, want[len(want)-1])
		}
	})
}

// Covers: L8
func TestRun_LateRenewalAdoptedByTheNextAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRecorder()
		c := s.clock
		h := mustAcquire(t, config(s, "a", 0))
		// Attempt 1 is cut off at 5.0s; its write lands at 5.033s.
		faultOn(s.Store, c, blob.OpPutIfMatch, func(n int, _ time.Duration) mem.Fault {
			if n == 1 {
				return mem.Fault{Latency: 1700 * time.Millisecond, Lands: true}
			}
			return mem.Fault{}
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := run(ctx, h, c)
		c.sleepUntil(6 * time.Second)
		// Attempt 2 (5.1s) lost its precondition, read the lease and found
		// attempt 1's write: validity counts from attempt 1's send time.
		if !h.Valid() || !h.ValidUntil().Equal(c.at(third10+10*time.Second)) {
			t.Fatalf("valid %t until %v, want until 13.333s", h.Valid(), h.ValidUntil().Sub(c.t0))
		}
		if rec := h.Record(); rec.Write != 2 || !rec.RenewedAt.Equal(c.at(third10)) {
			t.Fatalf("adopted %+v, want write 2 sent at 3.333s", rec)
		}
		c.sleepUntil(7 * time.Second)
		cancel()
		if r := <-done; r.err != nil {
			t.Fatalf("Run: %v", r.err)
		}
		calls := s.ops(blob.OpPutIfMatch)
		if len(calls) != 3 || calls[1].start != third10+10*time.Second/6+100*time.Millisecond || !errors.Is(calls[1].err, blob.ErrPrecondition) ||
			calls[2].start != 2*third10 || calls[2].err != nil {
			t.Fatalf("attempts %+v: want the precondition failure at 5.1s and the next renewal at 6.667s", calls)
		}
		if rec := mustRead(t, s); rec.Write != 4 || rec.Epoch != 1 {
			t.Fatalf("stored %+v", rec)
		}
	})
}

// slowGet is a store whose Get, from a fake time on, ignores its context
// and answers only at a later fixed fake time, so that a read can return
// after the renewal cutoff.
type slowGet struct {
	*recorder
	from, until time.Duration
}

func (s *slowGet) Get(_ context.Context, key string) ([]byte, blob.Version, error) {
	if s.clock.now() >= s.from {
		s.clock.sleepUntil(s.until)
	}
	return s.recorder.Get(context.Background(), key)
}

// Covers: L8
func TestRun_OwnRenewalNotAdoptedAfterTheCutoff(t *testing.T) {
	lateWrite := func(s *mem.Store, c clock) {
		faultOn(s, c, blob.OpPutIfMatch, func(n int, _ time.Duration) mem.Fault {
			if n == 1 {
				return mem.Fault{Latency: 1700 * time.Millisecond, Lands: true}
			}
			return mem.Fault{}
		})
	}
	t.Run("read answers after the cutoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec := newRecorder()
			s := &slowGet{recorder: rec, from: time.Second, until: 9950 * time.Millisecond}
			c := rec.clock
			h := mustAcquire(t, config(s, "a", 0))
			lateWrite(rec.Store, c)
			r := <-run(t.Context(), h, c)
			if !errors.Is(r.err, lease.ErrRenewalTimeout) || r.at != 9950*time.Millisecond {
				t.Fatalf("Run returned %v at %v, want ErrRenewalTimeout at 9.95s", r.err, r.at)
			}
			if stored := mustRead(t, rec); stored.Holder != "a" || stored.Write != 2 {
				t.Fatalf("stored %+v: the late write should be there", stored)
			}
			if h.Valid() || h.Record().Write != 1 {
				t.Fatalf("valid %t, record %+v: the late write must not be adopted", h.Valid(), h.Record())
			}
		})
	})
	t.Run("reads cut off until the cutoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newRecorder()
			c := s.clock
			h := mustAcquire(t, config(s, "a", 0))
			var n int
			s.SetFaults(func(op, _ string) mem.Fault {
				switch op {
				case blob.OpGet:
					return stall
				case blob.OpPutIfMatch:
					n++
					if n == 1 {
						return mem.Fault{Latency: 1700 * time.Millisecond, Lands: true}
					}
				}
				return mem.Fault{}
			})
			r := <-run(t.Context(), h, c)
			if !errors.Is(r.err, lease.ErrRenewalTimeout) || r.at != 9900*time.Millisecond {
				t.Fatalf("Run returned %v at %v, want ErrRenewalTimeout at 9.9s", r.err, r.at)
			}
			if gets := s.ops(blob.OpGet); len(gets) == 0 || gets[len(gets)-1].end != 9900*time.Millisecond {
				t.Fatalf("reads %+v: want the last one cut off at the cutoff", gets)
			}
		})
	})
}

// Covers: L9
func TestRun_LostToAnotherHolderStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRecorder()
		c := s.clock
		a := mustAcquire(t, config(s, "a", 0))
		done := run(t.Context(), a, c)
		c.sleepUntil(5 * time.Second)
		rec, v, err := lease.Read(t.Context(), s, testKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lease.TryAcquire(t.Context(), config(s, "b", 0), rec, v); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if !errors.Is(r.err, lease.ErrLost) || r.at != 2*third10 {
			t.Fatalf("Run returned %v at %v, want ErrLost at the renewal, 6.667s", r.err, r.at)
		}
		stop := errorsAsStop(t, r.err)
		if stop.Found == nil || stop.Found.Holder != "b" || stop.Found.Epoch != 2 {
			t.Fatalf("StopError %+v, want it to show b's epoch 2", stop)
		}
		if !strings.Contains(r.err.Error(), `"b"`) {
			t.Errorf("message %q does not name the new holder", r.err)
		}
		if n := len(s.ops(blob.OpPutIfMatch)); n != 3 { // a's renewal, b's takeover, a's failed renewal
			t.Fatalf("%d conditional writes, want 3 (no retry after the loss)", n)
		}
		if a.Valid() {
			t.Fatal("still valid after the loss")
		}
		if err := a.Check(t.Context()); !errors.Is(err, lease.ErrNotValid) {
			t.Fatalf("Check after the loss: %v", err)
		}
	})
}

// Covers: L9
func TestRun_PermanentErrorStopsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(s *recorder)
		reason error
	}{
		{"permission denied", func(s *recorder) {
			faultOn(s.Store, s.clock, blob.OpPutIfMatch, func(int, time.Duration) mem.Fault {
				return mem.Fault{Err: blob.Permanent(blob.OpPutIfMatch, testKey, mem.ErrDenied)}
			})
		}, blob.ErrPermanent},
		{"bucket missing", func(s *recorder) {
			faultOn(s.Store, s.clock, blob.OpPutIfMatch, func(int, time.Duration) mem.Fault {
				return mem.Fault{Err: blob.Permanent(blob.OpPutIfMatch, testKey, errors.New("NoSuchBucket"))}
			})
		}, blob.ErrPermanent},
		{"malformed lease", func(s *recorder) {
			s.SetRaw(testKey, []byte(`{"version":1,"epoch":`))
		}, blob.ErrPermanent},
		{"lease deleted", func(s *recorder) {
			if err := s.Delete(context.Background(), testKey); err != nil {
				panic(err)
			}
		}, lease.ErrLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newRecorder()
				c := s.clock
				h := mustAcquire(t, config(s, "a", 0))
				time.Sleep(time.Second)
				tc.setup(s)
				r := <-run(t.Context(), h, c)
				if !errors.Is(r.err, tc.reason) || r.at != third10 {
					t.Fatalf("Run returned %v at %v, want %v at once (3.333s)", r.err, r.at, tc.reason)
				}
				if !errors.Is(errorsAsStop(t, r.err).Reason, tc.reason) || !strings.Contains(r.err.Error(), testKey) {
					t.Fatalf("error %v", r.err)
				}
				if n := len(s.ops(blob.OpPutIfMatch)); n != 1 {
					t.Fatalf("%d renewal attempts, want 1", n)
				}
			})
		})
	}
}

// Covers: L16
func TestRun_ConditionalWritesPerHour(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{10 * time.Second, 1080}, {60 * time.Second, 180}} {
		t.Run(fmt.Sprint(tc.d), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := mem.New()
				c := newClock()
				h := mustAcquire(t, config(s, "a", tc.d))
				ctx, cancel := context.WithCancel(t.Context())
				done := run(ctx, h, c)
				time.Sleep(time.Hour + time.Second)
				cancel()
				if r := <-done; r.err != nil {
					t.Fatal(r.err)
				}
				if got := s.Count(blob.OpPutIfMatch); got != tc.want {
					t.Fatalf("%d conditional writes in an hour, want %d", got, tc.want)
				}
				if got := s.Count(blob.OpGet); got != 1 { // Acquire's read
					t.Fatalf("%d reads, want only the acquisition's", got)
				}
			})
		})
	}
}

// The worked timeline of doc.go: a 10 s lease acquired at 0 s, the store
// stalls from 3 s to 6 s and answers the requests it queued at 6 s.
//
// Covers: L6, L7, L8
func TestRun_DocTimelineThreeSecondStall(t *testing.T) {
	const ms = time.Millisecond
	stallFor := func(lands bool) func(n int, now time.Duration) mem.Fault {
		return func(n int, now time.Duration) mem.Fault {
			if now < 3*time.Second || now >= 6*time.Second {
				return mem.Fault{}
			}
			f := mem.Fault{Latency: 6*time.Second - now, Lands: lands && n == 1}
			if n > 1 {
				f.Latency += ms // queued behind the first request
			}
			return f
		}
	}
	retry := third10 + 10*time.Second/6 + 100*ms // attempt 2: 5.1 s
	for _, tc := range []struct {
		name       string
		lands      bool
		sent       time.Duration // the send time validity counts from
		next       time.Duration // the next renewal
		attempt2   error
		storeWrite uint64
	}{
		{"queued write lost", false, retry, retry + third10, nil, 3},
		{"queued write lands", true, third10, 2 * third10, blob.ErrPrecondition, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newRecorder()
				c := s.clock
				h := mustAcquire(t, config(s, "a", 0))
				faultOn(s.Store, c, blob.OpPutIfMatch, stallFor(tc.lands))
				ctx, cancel := context.WithCancel(t.Context())
				done := run(ctx, h, c)
				c.sleepUntil(6500 * ms)
				if !h.Valid() || !h.ValidUntil().Equal(c.at(tc.sent+10*time.Second)) {
					t.Fatalf("valid %t until %v, want until %v", h.Valid(), h.ValidUntil().Sub(c.t0), tc.sent+10*time.Second)
				}
				if rec := mustRead(t, s); rec.Write != tc.storeWrite {
					t.Fatalf("stored write %d, want %d", rec.Write, tc.storeWrite)
				}
				c.sleepUntil(tc.next + ms)
				cancel()
				if r := <-done; r.err != nil {
					t.Fatalf("Run: %v", r.err)
				}
				calls := s.ops(blob.OpPutIfMatch)
				if len(calls) != 3 ||
					calls[0].start != third10 || calls[0].end != third10+10*time.Second/6 ||
					calls[1].start != retry || !errors.Is(calls[1].err, tc.attempt2) ||
					calls[2].start != tc.next {
					t.Fatalf("attempts %+v", calls)
				}
			})
		})
	}
}

// gatedStore holds every request while closed, whatever its context says,
// as a suspended host sends nothing; on open they go on.
type gatedStore struct {
	blob.Store
	mu   sync.Mutex
	gate chan struct{} // nil: open
}

func (g *gatedStore) close() { g.mu.Lock(); g.gate = make(chan struct{}); g.mu.Unlock() }

func (g *gatedStore) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gate)
	g.gate = nil
}

func (g *gatedStore) wait() {
	g.mu.Lock()
	ch := g.gate
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (g *gatedStore) Get(ctx context.Context, key string) ([]byte, blob.Version, error) {
	g.wait()
	return g.Store.Get(ctx, key)
}

func (g *gatedStore) PutIfMatch(ctx context.Context, key string, data []byte, v blob.Version) (blob.Version, error) {
	g.wait()
	return g.Store.PutIfMatch(context.WithoutCancel(ctx), key, data, v)
}

// A host suspended for longer than the lease (its monotonic clock stood
// still, its wall clock did not) resumes with a renewal that was on its
// way: it lands, since no other process took the lease. The holder must
// not count its lease valid again (the serving core dropped tasks and
// timers while it was not valid and never picks them up again: sim seed
// 890, a timer flow that never completed): Run stops with
// ErrRenewalTimeout. Before the fix the renewal cutoff was on the
// monotonic clock only, and Run renewed on with Valid true again.
//
// Covers: L15
func TestRun_StopsAfterAHostSuspendPastTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gatedStore{Store: mem.New()}
		var (
			mu    sync.Mutex
			lag   time.Duration
			since time.Time
		)
		cfg := config(st, "a", 3*time.Second)
		cfg.Clock = func() (mono, wall time.Time) {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if !since.IsZero() {
				return since.Add(-lag), now
			}
			return now.Add(-lag), now
		}
		h := mustAcquire(t, cfg)
		c := newClock()
		done := run(t.Context(), h, c)
		time.Sleep(1500 * time.Millisecond) // renewed at 1 s
		mu.Lock()
		since = time.Now()
		mu.Unlock()
		st.close()
		time.Sleep(5 * time.Second) // the host is suspended
		mu.Lock()
		lag += time.Since(since)
		since = time.Time{}
		mu.Unlock()
		st.open()
		if h.Valid() {
			t.Fatal("valid right after a 5 s suspend of a 3 s lease")
		}
		for deadline := c.now() + 10*time.Second; ; {
			select {
			case r := <-done:
				if !errors.Is(r.err, lease.ErrRenewalTimeout) {
					t.Fatalf("Run ended with %v, want ErrRenewalTimeout", r.err)
				}
				if h.Valid() {
					t.Fatal("valid after Run stopped")
				}
				return
			case <-time.After(100 * time.Millisecond):
			}
			if h.Valid() {
				t.Fatalf("valid again %v after a 5 s suspend of a 3 s lease", c.now()-6500*time.Millisecond)
			}
			if c.now() > deadline {
				t.Fatal("Run still renewing 10 s after a suspend past the lease")
			}
		}
	})
}
