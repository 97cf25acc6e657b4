package wal

import (
	"errors"
	"reflect"
	"testing"
)

// Covers: G7
func TestManifest_With(t *testing.T) {
	t.Parallel()
	var m manifest
	for _, step := range []struct {
		seq  uint64
		keep int
		want manifest
	}{
		{10, 2, manifest{Version: 2, LogStart: 10, Snapshots: []uint64{10}}},
		{20, 2, manifest{Version: 2, LogStart: 20, Snapshots: []uint64{10, 20}}},
		{30, 2, manifest{Version: 2, LogStart: 30, Snapshots: []uint64{20, 30}}},
		{25, 2, manifest{Version: 2, LogStart: 30, Snapshots: []uint64{25, 30}}}, // an older one displaces the oldest
		{5, 2, manifest{Version: 2, LogStart: 30, Snapshots: []uint64{25, 30}}},  // too old to keep
		{30, 3, manifest{Version: 2, LogStart: 30, Snapshots: []uint64{25, 30}}}, // already there
	} {
		m = m.with(step.seq, step.keep)
		if !reflect.DeepEqual(m, step.want) {
			t.Fatalf("with(%d, %d) = %+v, want %+v", step.seq, step.keep, m, step.want)
		}
		if _, err := decodeManifest("k", m.encode()); err != nil {
			t.Fatal(err)
		}
	}
}

// Fence positions survive snapshots, are kept sorted and unique, and
// truncation spares exactly them.
//
// Covers: G4, G7
func TestManifest_WithFence(t *testing.T) {
	t.Parallel()
	var m manifest
	m = m.withFence(7)
	m = m.with(10, 2)
	m = m.withFence(3)
	m = m.withFence(12)
	m = m.withFence(7)
	m = m.with(20, 2)
	want := manifest{Version: 2, LogStart: 20, Snapshots: []uint64{10, 20}, Fences: []uint64{3, 7, 12}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %+v, want %+v", m, want)
	}
	for seq, keep := range map[uint64]bool{3: true, 7: true, 12: true, 0: false, 8: false, 20: false} {
		if m.isFence(seq) != keep {
			t.Errorf("isFence(%d) = %v", seq, !keep)
		}
	}
	if _, err := decodeManifest("k", m.encode()); err != nil {
		t.Fatal(err)
	}
	// A manifest with fences but no snapshot yet (a node that never took one).
	only := manifest{}.withFence(0)
	if _, err := decodeManifest("k", only.encode()); err != nil {
		t.Fatalf("%s: %v", only.encode(), err)
	}
	for name, bad := range map[string]string{
		"v1 with fences":  `{"version":1,"logStart":0,"snapshots":[],"fences":[1]}`,
		"fences unsorted": `{"version":2,"logStart":0,"snapshots":[],"fences":[4,1]}`,
		"fences repeated": `{"version":2,"logStart":0,"snapshots":[],"fences":[4,4]}`,
		"version 3":       `{"version":3,"logStart":0,"snapshots":[]}`,
	} {
		if _, err := decodeManifest("k", []byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want a corruption", name, err)
		}
	}
}

// Covers: G7
func FuzzManifestDecode(f *testing.F) {
	f.Add([]byte(`{"version":1,"logStart":20,"snapshots":[10,20]}`))
	f.Add([]byte(`{"version":1,"logStart":0,"snapshots":[]}`))
	f.Add([]byte(`{"version":1,"logStart":5,"snapshots":[20,10]}`))
	f.Add([]byte(`{"version":2,"logStart":20,"snapshots":[10,20],"fences":[3,15]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeManifest("k", data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not a corruption", err)
			}
			return
		}
		again, err := decodeManifest("k", m.encode())
		if err != nil || again.LogStart != m.LogStart || !reflect.DeepEqual(append([]uint64{}, again.Snapshots...), append([]uint64{}, m.Snapshots...)) ||
			!reflect.DeepEqual(append([]uint64{}, again.Fences...), append([]uint64{}, m.Fences...)) {
			t.Fatalf("re-encoding %+v gave %+v, %v", m, again, err)
		}
	})
}
