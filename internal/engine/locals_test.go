package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Step-execution locals are bounded: too many keys, a long key or too
// many bytes fail with INVALID_ARGUMENT naming "locals" and the limit.
//
// Covers: E32
func TestCheckLocals_Limits(t *testing.T) {
	many := map[string]Value{}
	for i := range MaxStepLocals + 1 {
		many[fmt.Sprintf("k%d", i)] = Value{Data: []byte("1")}
	}
	big := map[string]Value{"a": {Data: make([]byte, MaxStepLocalBytes/2)}, "b": {Data: make([]byte, MaxStepLocalBytes/2)}}
	for _, tc := range []struct {
		name   string
		locals map[string]Value
		want   string // "" = accepted
	}{
		{"none", nil, ""},
		{"at the limit", map[string]Value{"k": {Data: make([]byte, MaxStepLocalBytes-1)}}, ""},
		{"too many keys", many, "65 step-execution locals, at most 64"},
		{"long key", map[string]Value{strings.Repeat("k", MaxStepLocalKeyBytes+1): {}}, "at most 256 are allowed"},
		{"too many bytes", big, "above the limit of 65536 bytes"},
		{"empty key", map[string]Value{"": {}}, "empty key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkLocals(tc.locals)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidArgument || e.Field != "locals" || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("got %v, want INVALID_ARGUMENT locals: ...%s", err, tc.want)
			}
		})
	}
}

// The reservation rule, table-driven: minimum counts first, then the
// extra capacity in declaration order; groups tried in order.
//
// Covers: E32
func TestCombinationTakes(t *testing.T) {
	ch := func(id string, lo, hi int) StoredCondition {
		return StoredCondition{ID: id, Kind: CondChannel, Channel: "x", TimerIndex: -1, Min: lo, Max: hi}
	}
	for _, tc := range []struct {
		name   string
		conds  []StoredCondition
		groups [][]int
		queued int
		want   string
	}{
		{"not enough for the minimums", []StoredCondition{ch("a", 2, 2), ch("b", 1, 0)}, [][]int{{0, 1}}, 2, "none"},
		{"unbounded takes the rest", []StoredCondition{ch("a", 2, 2), ch("b", 1, 0)}, [][]int{{0, 1}}, 5, "[0 1] [2 3]"},
		{"extra in declaration order", []StoredCondition{ch("a", 0, 2), ch("b", 2, 2), ch("c", 1, 3)}, [][]int{{2, 1, 0}}, 4, "[0 1 2] [1 2 1]"},
		{"second group when the first cannot hold", []StoredCondition{ch("a", 3, 3), ch("b", 1, 1)}, [][]int{{0}, {1}}, 2, "[1] [1]"},
		{"a condition in two groups", []StoredCondition{ch("a", 1, 1), ch("b", 5, 5), ch("c", 1, 1)}, [][]int{{0, 1}, {0, 2}}, 2, "[0 2] [1 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &StoredWait{Mode: AnyCombination, Conditions: tc.conds, Groups: tc.groups}
			idx, counts, ok := w.combinationTakes(func(string) int { return tc.queued })
			got := "none"
			if ok {
				got = fmt.Sprint(idx, counts)
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}
