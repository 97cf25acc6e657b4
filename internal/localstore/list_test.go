package localstore

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
)

// listModel is the expected content of the list index: the last stored
// summary of every run.
type listModel map[string]engine.Summary // flowID/runID -> summary

func (m listModel) put(st *engine.FlowState) { m[st.FlowID+"/"+st.RunID] = st.Summary() }

func (m listModel) query(q ListQuery) []engine.Summary {
	var out []engine.Summary
	for _, s := range m {
		if q.matches(&s) && (q.StartFrom.IsZero() || !s.StartedAt.Before(q.StartFrom)) &&
			(q.StartTo.IsZero() || s.StartedAt.Before(q.StartTo)) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b engine.Summary) int {
		return cmp.Or(b.StartedAt.Compare(a.StartedAt), cmp.Compare(a.FlowID, b.FlowID), cmp.Compare(a.RunID, b.RunID))
	})
	return out
}

// listAll pages through a query and checks the page shapes.
func listAll(t *testing.T, s *Store, q ListQuery) []engine.Summary {
	t.Helper()
	var all []engine.Summary
	size := cmp.Or(q.PageSize, DefaultPageSize)
	for page := 0; ; page++ {
		got, next, err := s.ListFlows(q)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		all = append(all, got...)
		if next == "" {
			if len(got) > size {
				t.Fatalf("last page of %d > %d", len(got), size)
			}
			return all
		}
		if len(got) != size {
			t.Fatalf("page %d has %d runs and a next token; size %d", page, len(got), size)
		}
		q.PageToken = next
	}
}

func summariesText(ss []engine.Summary) string {
	var b strings.Builder
	for _, s := range ss {
		b.WriteString(summaryString(s))
		b.WriteByte('\n')
	}
	return b.String()
}

// Covers: E27
func TestListFlows_FiltersPagesNewestFirst(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	model := listModel{}
	rng := rand.New(rand.NewPCG(1, 2))
	types := []string{"order", "invoice", "ship"}
	latest := map[string]*engine.FlowState{}
	seq := uint64(0)
	// 60 flow IDs, some with several runs, start times on a coarse grid
	// (ties) with some sub-second offsets; a third closed one way or another.
	for i := range 80 {
		id := fmt.Sprintf("f-%02d", rng.IntN(60))
		at := base.Add(time.Duration(rng.IntN(30))*time.Minute + time.Duration(rng.IntN(2))*time.Millisecond)
		var batch []*engine.FlowState
		prev := latest[id]
		if prev != nil && prev.Running() {
			prev = stop(t, prev, engine.StopCancel, at)
			batch = append(batch, prev)
		}
		st := start(t, prev, id, types[rng.IntN(len(types))], fmt.Sprintf("r%03d", i), at)
		batch = append(batch, st)
		if rng.IntN(3) == 0 {
			st = stop(t, st, []engine.StopKind{engine.StopCancel, engine.StopFail, engine.StopTerminate}[rng.IntN(3)], at.Add(time.Second))
			batch = append(batch, st)
		}
		putAll(t, s, seq, batch...)
		seq++
		for _, b := range batch {
			model.put(b)
		}
		latest[id] = st
		// Consistent right after Apply: the newest run is listed first.
		got, _, err := s.ListFlows(ListQuery{StartFrom: at, StartTo: at.Add(time.Nanosecond), FlowType: st.FlowType})
		if err != nil || !slices.ContainsFunc(got, func(x engine.Summary) bool { return x.RunID == st.RunID && x.Status == st.Status }) {
			t.Fatalf("run %s not listed right after Apply: %v %v", st.RunID, got, err)
		}
	}

	mid := base.Add(10 * time.Minute)
	queries := []ListQuery{
		{},
		{FlowType: "order"},
		{Statuses: []engine.Status{engine.StatusRunning}},
		{Statuses: []engine.Status{engine.StatusCanceled, engine.StatusFailed}},
		{FlowType: "ship", Statuses: []engine.Status{engine.StatusTerminated, engine.StatusRunning}},
		{StartFrom: mid},
		{StartTo: mid},
		{StartFrom: mid, StartTo: mid.Add(5 * time.Minute)},
		{StartFrom: mid.Add(time.Millisecond), StartTo: mid.Add(5*time.Minute + time.Millisecond)},
		{FlowType: "invoice", StartFrom: mid, StartTo: mid.Add(15 * time.Minute)},
		{StartFrom: mid, StartTo: mid},                // empty range
		{StartFrom: mid, StartTo: mid.Add(-1)},        // inverted range
		{FlowType: "none"},                            // no match
		{StartTo: base.Add(-time.Hour)},               // before everything
		{StartFrom: base.Add(time.Hour), PageSize: 1}, // after everything
	}
	for qi, q := range queries {
		want := model.query(q)
		if qi == 0 && len(want) != 80 {
			t.Fatalf("model lists %d runs, want 80", len(want))
		}
		for _, size := range []int{0, 1, 3, 7, 1000} {
			q.PageSize = size
			got := listAll(t, s, q)
			if g, w := summariesText(got), summariesText(want); g != w {
				t.Fatalf("query %d (%+v):\n got:\n%s\nwant:\n%s", qi, q, g, w)
			}
		}
	}
}

func TestListFlows_PageTokens(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	for i := range 5 {
		putAll(t, s, uint64(i), start(t, nil, fmt.Sprintf("f-%d", i), "order", "r", base.Add(time.Duration(i)*time.Minute)))
	}
	q := ListQuery{FlowType: "order", PageSize: 2}
	page, next, err := s.ListFlows(q)
	if err != nil || len(page) != 2 || next == "" || page[0].FlowID != "f-4" {
		t.Fatalf("first page %v %q %v", page, next, err)
	}
	// A run started after the first page does not shift the later pages.
	putAll(t, s, 10, start(t, nil, "f-new", "order", "r", base.Add(time.Hour)))
	q.PageToken = next
	q.PageSize = 10 // the page size may change
	page, next, err = s.ListFlows(q)
	if err != nil || next != "" || len(page) != 3 || page[0].FlowID != "f-2" {
		t.Fatalf("second page %v %q %v", page, next, err)
	}

	for name, bad := range map[string]ListQuery{
		"other type":     {FlowType: "invoice", PageToken: q.PageToken},
		"other statuses": {FlowType: "order", Statuses: []engine.Status{engine.StatusRunning}, PageToken: q.PageToken},
		"other range":    {FlowType: "order", StartFrom: base, PageToken: q.PageToken},
		"garbage":        {FlowType: "order", PageToken: "!!"},
		"short":          {FlowType: "order", PageToken: "AQ"},
		"truncated":      {FlowType: "order", PageToken: q.PageToken[:12]},
	} {
		if _, _, err := s.ListFlows(bad); !strings.Contains(fmt.Sprint(err), "page token") {
			t.Errorf("%s: err = %v", name, err)
		} else {
			wantErr(t, err, ErrBadPageToken)
		}
	}
	// Statuses are a set: order and duplicates do not matter.
	a := ListQuery{Statuses: []engine.Status{engine.StatusFailed, engine.StatusRunning}}
	b := ListQuery{Statuses: []engine.Status{engine.StatusRunning, engine.StatusFailed, engine.StatusRunning}}
	if a.filterHash() != b.filterHash() {
		t.Fatal("status order changes the filter hash")
	}
}

// A change of a run's start time or status leaves no stale index entry.
func TestListFlows_NoStaleEntries(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	st := start(t, nil, "f", "order", "r", base)
	putAll(t, s, 1, st)
	moved := st.Clone()
	moved.StartedAt = base.Add(time.Hour) // not something the engine does
	putAll(t, s, 2, moved)
	closed := stop(t, moved, engine.StopFail, base.Add(2*time.Hour))
	putAll(t, s, 3, closed)
	putAll(t, s, 4, closed) // unchanged: no index write
	list, _, err := s.ListFlows(ListQuery{})
	if err != nil || len(list) != 1 || !list[0].StartedAt.Equal(moved.StartedAt) ||
		list[0].Status != engine.StatusFailed || !list[0].ClosedAt.Equal(base.Add(2*time.Hour)) {
		t.Fatalf("list %v %v", list, err)
	}
	if got, _, _ := s.ListFlows(ListQuery{StartTo: base.Add(time.Minute)}); len(got) != 0 {
		t.Fatalf("stale entry at the old start time: %v", got)
	}
}

func TestListKey_Order(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		{}, time.Unix(-1, 5).UTC(), time.Unix(0, 0), time.Unix(0, 1), base, base.Add(time.Nanosecond),
		base.Add(time.Hour), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	ids := []string{"", "\x00", "\x00\x00", "a", "a\x00", "a\x00b", "ab", "b"}
	var sums []engine.Summary
	for _, tm := range times {
		for _, id := range ids {
			for _, run := range []string{"r1", "r2"} {
				sums = append(sums, engine.Summary{FlowID: id, RunID: run, StartedAt: tm})
			}
		}
	}
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(sums), func(i, j int) { sums[i], sums[j] = sums[j], sums[i] })
	byKey := slices.Clone(sums)
	slices.SortFunc(byKey, func(a, b engine.Summary) int { return strings.Compare(string(listKey(&a)), string(listKey(&b))) })
	want := slices.Clone(sums)
	slices.SortFunc(want, func(a, b engine.Summary) int {
		return cmp.Or(b.StartedAt.Compare(a.StartedAt), cmp.Compare(a.FlowID, b.FlowID), cmp.Compare(a.RunID, b.RunID))
	})
	for i := range want {
		if byKey[i].FlowID != want[i].FlowID || byKey[i].RunID != want[i].RunID || !byKey[i].StartedAt.Equal(want[i].StartedAt) {
			t.Fatalf("position %d: key order %q %v, want %q %v", i, byKey[i].FlowID, byKey[i].StartedAt, want[i].FlowID, want[i].StartedAt)
		}
	}
}

func TestSummaryEncoding_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []engine.Summary{
		{},
		{FlowID: "f\x00", RunID: "r", FlowType: "order", Status: engine.StatusRunning, StartedAt: base},
		{FlowID: "f", RunID: "r", Status: engine.StatusCompleted, StartedAt: time.Unix(-5, 999999999), ClosedAt: base.Add(time.Nanosecond)},
	} {
		got, rest, err := decodeSummary(appendSummary(nil, &s))
		if err != nil || len(rest) != 0 || got != (engine.Summary{FlowID: s.FlowID, RunID: s.RunID, FlowType: s.FlowType,
			Status: s.Status, StartedAt: s.StartedAt.UTC(), ClosedAt: s.ClosedAt.UTC()}) {
			t.Fatalf("round trip of %+v: %+v %v", s, got, err)
		}
		if !got.ClosedAt.IsZero() != !s.ClosedAt.IsZero() {
			t.Fatal("zero time not kept")
		}
	}
}
