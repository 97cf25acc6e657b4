package web

import (
	"testing"
	"time"
)

// A session holds its token until it expires; IDs are random and long;
// the table never holds more than its bound, dropping the oldest.
func TestSessions(t *testing.T) {
	ss := newSessions(time.Hour)
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	a, err := ss.add("tok-a", t0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ss.add("tok-b", t0)
	if a == b || len(a) != 64 {
		t.Fatalf("session IDs %q, %q: want two different 32-byte hex IDs", a, b)
	}
	if got := ss.token(a, t0.Add(59*time.Minute)); got != "tok-a" {
		t.Fatalf("token before expiry = %q", got)
	}
	if got := ss.token(a, t0.Add(time.Hour)); got != "" {
		t.Fatalf("token at expiry = %q, want none", got)
	}
	ss.remove(b)
	if got := ss.token(b, t0); got != "" {
		t.Fatalf("token after sign out = %q", got)
	}
	ss.max = 8
	var ids []string
	for i := range ss.max + 5 {
		id, err := ss.add("t", t0.Add(time.Duration(i)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if n := len(ss.m); n != ss.max {
		t.Fatalf("%d sessions kept, want at most %d", n, ss.max)
	}
	if ss.token(ids[0], t0) != "" || ss.token(ids[len(ids)-1], t0) != "t" {
		t.Fatal("the bound drops the newest sessions, not the oldest")
	}
}
