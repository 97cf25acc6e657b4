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
		{10, 2, manifest{1, 10, []uint64{10}}},
		{20, 2, manifest{1, 20, []uint64{10, 20}}},
		{30, 2, manifest{1, 30, []uint64{20, 30}}},
		{25, 2, manifest{1, 30, []uint64{25, 30}}}, // an older one displaces the oldest
		{5, 2, manifest{1, 30, []uint64{25, 30}}},  // too old to keep
		{30, 3, manifest{1, 30, []uint64{25, 30}}}, // already there
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

// Covers: G7
func FuzzManifestDecode(f *testing.F) {
	f.Add([]byte(`{"version":1,"logStart":20,"snapshots":[10,20]}`))
	f.Add([]byte(`{"version":1,"logStart":0,"snapshots":[]}`))
	f.Add([]byte(`{"version":1,"logStart":5,"snapshots":[20,10]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeManifest("k", data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not a corruption", err)
			}
			return
		}
		again, err := decodeManifest("k", m.encode())
		if err != nil || again.LogStart != m.LogStart || !reflect.DeepEqual(append([]uint64{}, again.Snapshots...), append([]uint64{}, m.Snapshots...)) {
			t.Fatalf("re-encoding %+v gave %+v, %v", m, again, err)
		}
	})
}
