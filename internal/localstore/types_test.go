package localstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The type index keeps, per flow type, the run of the last PutFlowType in
// log order, across batches and a reopen; a malformed entry is reported as
// corrupt with its type, never skipped.
func TestFlowTypes_LastDeclarationWinsAndSurvivesReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	put := func(seq uint64, entries ...[3]string) {
		t.Helper()
		err := s.Apply(seq, func(tx *Tx) error {
			for _, e := range entries {
				if err := tx.PutFlowType(e[0], e[1], e[2]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put(0, [3]string{"order", "o-1", "r1"}, [3]string{"approval", "a\x00b", "r2"})
	put(1, [3]string{"order", "o-2", "r3"})
	list := func(s *Store) string {
		t.Helper()
		var got string
		if err := s.FlowTypes(func(typ, flowID, runID string) error {
			got += fmt.Sprintf("%s=%q/%s ", typ, flowID, runID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	const want = `approval="a\x00b"/r2 order="o-2"/r3 `
	if got := list(s); got != want {
		t.Fatalf("FlowTypes = %s; want %s", got, want)
	}
	if err := s.Apply(2, func(tx *Tx) error { return tx.PutFlowType("", "x", "y") }); err == nil {
		t.Fatal("PutFlowType with an empty flow type succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if got := list(s); got != want {
		t.Fatalf("FlowTypes after reopen = %s; want %s", got, want)
	}
	if err := s.db.Set(typeKey("broken"), []byte{9, 'x'}, nil); err != nil {
		t.Fatal(err)
	}
	err := s.FlowTypes(func(string, string, string) error { return nil })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"broken"`) {
		t.Fatalf("FlowTypes over a malformed entry = %v; want ErrCorrupt naming the type", err)
	}
}
