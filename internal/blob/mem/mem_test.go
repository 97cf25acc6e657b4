package mem_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dexzd/dexzd/internal/blob"
	"github.com/dexzd/dexzd/internal/blob/blobtest"
	"github.com/dexzd/dexzd/internal/blob/mem"
)

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store { return mem.New() })
}

func TestFaults_TransientErrorChangesNothing(t *testing.T) {
	s := mem.New()
	s.SetFaults(func(op, key string) mem.Fault { return mem.Fault{Err: mem.ErrThrottled} })
	_, err := s.PutIfAbsent(t.Context(), "k", []byte("x"))
	if !errors.Is(err, blob.ErrTransient) || !errors.Is(err, mem.ErrThrottled) {
		t.Fatalf("got %v, want a transient error wrapping ErrThrottled", err)
	}
	if _, ok := s.Raw("k"); ok {
		t.Fatal("a failed write landed")
	}
}

func TestFaults_ReplyLostWriteLands(t *testing.T) {
	s := mem.New()
	s.SetFaults(func(op, key string) mem.Fault { return mem.Fault{Err: mem.ErrServer, Lands: true} })
	_, err := s.PutIfAbsent(t.Context(), "k", []byte("x"))
	if !errors.Is(err, blob.ErrTransient) {
		t.Fatalf("got %v, want transient", err)
	}
	if data, ok := s.Raw("k"); !ok || string(data) != "x" {
		t.Fatal("the write whose reply was lost did not land")
	}
}

func TestFaults_PermanentPassesThrough(t *testing.T) {
	s := mem.New()
	s.SetFaults(func(op, key string) mem.Fault {
		return mem.Fault{Err: blob.Permanent(op, key, mem.ErrDenied)}
	})
	_, _, err := s.Get(t.Context(), "k")
	if blob.Classify(err) != blob.ErrPermanent {
		t.Fatalf("got %v, want permanent", err)
	}
}

func TestFaults_LatencyCutOffThenLands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mem.New()
		s.SetFaults(func(op, key string) mem.Fault { return mem.Fault{Latency: 3 * time.Second, Lands: true} })
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := s.PutIfAbsent(ctx, "k", []byte("late"))
		if !errors.Is(err, blob.ErrTransient) {
			t.Fatalf("got %v, want transient", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("cut off after %v, want 1s", d)
		}
		if _, ok := s.Raw("k"); ok {
			t.Fatal("landed before its latency elapsed")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if data, ok := s.Raw("k"); !ok || string(data) != "late" {
			t.Fatal("the cut-off write did not land after its latency")
		}
	})
}

func TestIgnoreConditions(t *testing.T) {
	s := mem.New()
	s.SetIgnoreConditions(true)
	if _, err := s.PutIfAbsent(t.Context(), "k", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfAbsent(t.Context(), "k", []byte("2")); err != nil {
		t.Fatalf("with conditions ignored a second create failed: %v", err)
	}
}
