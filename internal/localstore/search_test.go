package localstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/query"
)

// searchDef indexes status (as OrderStatus), amount, tags, note and due.
func searchDef() *engine.FlowDefinition {
	return &engine.FlowDefinition{Type: "order", Steps: map[string]engine.StepDef{"Charge": {}},
		Attributes: []string{"status", "amount", "tags", "note", "due", "other"},
		Indexed: map[string]engine.IndexedAttribute{
			"status": {Key: "OrderStatus", Type: engine.IndexKeyword},
			"amount": {Key: "amount", Type: engine.IndexInt},
			"tags":   {Key: "tags", Type: engine.IndexKeywordArray},
			"note":   {Key: "note", Type: engine.IndexText},
			"due":    {Key: "due", Type: engine.IndexDatetime},
		}}
}

var searchSchema = query.Schema{"OrderStatus": query.Keyword, "amount": query.Int, "tags": query.KeywordArray,
	"note": query.Text, "due": query.Datetime}

func jsonVal(s string) engine.Value { return engine.Value{Type: "json:", Data: []byte(s)} }

// indexedRun is a run of the search definition with the given attributes
// (name -> JSON), started i seconds after base.
func indexedRun(flowID, runID string, i int, status engine.Status, attrs map[string]string) *engine.FlowState {
	st := &engine.FlowState{FlowID: flowID, RunID: runID, FlowType: "order", Status: status,
		StartedAt: base.Add(time.Duration(i) * time.Second), Definition: searchDef(),
		Attributes: map[string]engine.Value{}}
	if status != engine.StatusRunning {
		st.ClosedAt = st.StartedAt.Add(time.Minute)
	} else {
		st.Steps = []*engine.StepExec{{ID: "Charge-1", Type: "Charge"}}
	}
	for k, v := range attrs {
		st.Attributes[k] = jsonVal(v)
	}
	return st
}

func search(t testing.TB, s *Store, q string, size int, token string) ([]SearchResult, string) {
	t.Helper()
	pq, err := query.Parse(q, searchSchema)
	if err != nil {
		t.Fatalf("parse %q: %v", q, err)
	}
	out, next, err := s.SearchFlows(SearchQuery{Query: pq, PageSize: size, PageToken: token})
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	return out, next
}

// searchAll pages through q with pages of size and returns "flow/run" of
// every result, in order.
func searchAll(t testing.TB, s *Store, q string, size int) []string {
	t.Helper()
	var ids []string
	tok := ""
	for range 1000 {
		page, next := search(t, s, q, size, tok)
		for _, r := range page {
			ids = append(ids, r.Summary.FlowID+"/"+r.Summary.RunID)
		}
		if next == "" {
			return ids
		}
		tok = next
	}
	t.Fatalf("search %q: no last page", q)
	return nil
}

// searchFixture stores ten orders: o0..o9, amount i*10, status paid for
// even i, tags by i%3, o9 completed; o3 has a closed older run.
func searchFixture(t testing.TB, s *Store) {
	t.Helper()
	seq := uint64(1)
	put := func(st *engine.FlowState) {
		t.Helper()
		if err := s.Apply(seq, func(tx *Tx) error { return tx.PutFlow(st) }); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	put(indexedRun("o3", "old", 0, engine.StatusFailed, map[string]string{"status": `"lost"`, "amount": `999`}))
	for i := range 10 {
		status := engine.StatusRunning
		if i == 9 {
			status = engine.StatusCompleted
		}
		st := map[string]string{"status": `"new"`, "amount": fmt.Sprint(i * 10),
			"tags": [...]string{`["vip","eu"]`, `["eu"]`, `[]`}[i%3],
			"note": fmt.Sprintf(`"Order %d delivered late"`, i), "due": fmt.Sprintf(`"2026-11-0%dT00:00:00Z"`, i%9+1),
			"other": `"not indexed"`}
		put(indexedRun(fmt.Sprintf("o%d", i), "r", i+1, status, st))
		if i%2 == 0 { // then paid: the old entry must go
			st["status"] = `"paid"`
			put(indexedRun(fmt.Sprintf("o%d", i), "r", i+1, status, st))
		}
	}
}

// Covers: E36
func TestSearch_Queries(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	searchFixture(t, s)
	for _, tc := range []struct{ q, want string }{
		{"OrderStatus = 'paid'", "o8 o6 o4 o2 o0"},
		{"OrderStatus = 'new'", "o9 o7 o5 o3 o1"},
		{"OrderStatus = 'lost'", "o3/old"},
		{"OrderStatus IN ('lost', 'paid') ORDER BY amount DESC", "o3/old o8 o6 o4 o2 o0"},
		{"amount >= 30 AND amount < 60", "o5 o4 o3"},
		{"amount BETWEEN 30 AND 50 ORDER BY amount", "o3 o4 o5"},
		{"amount > 80", "o9 o3/old"},
		{"amount <= 10 ORDER BY StartTime ASC", "o0 o1"},
		{"OrderStatus STARTS_WITH 'pa' AND amount > 40", "o8 o6"},
		{"tags = 'vip'", "o9 o6 o3 o0"},
		{"tags IN ('vip', 'eu') AND NOT tags = 'vip'", "o7 o4 o1"},
		{"note = 'LATE order'", "o9 o8 o7 o6 o5 o4 o3 o2 o1 o0"},
		{"note = 'order 7'", "o7"},
		{"due > '2026-11-08T00:00:00Z'", "o8"},
		{"Status = 'RUNNING' AND amount > 60", "o8 o7"},
		{"Status = 'COMPLETED'", "o9"},
		{"Status != 'RUNNING' ORDER BY CloseTime DESC", "o9 o3/old"},
		{"FlowId = 'o3'", "o3 o3/old"},
		{"FlowId IN ('o3', 'nope') AND RunId = 'old'", "o3/old"},
		{"FlowId STARTS_WITH 'o1'", "o1"},
		{"StartTime >= '2025-01-01T00:00:09Z'", "o9 o8"},
		{"StartTime BETWEEN '2025-01-01T00:00:01Z' AND '2025-01-01T00:00:02Z' ORDER BY StartTime ASC", "o0 o1"},
		{"ActiveStepTypes = 'Charge' AND amount < 20", "o1 o0"},
		{"OrderStatus = 'paid' OR FlowId = 'o9'", "o9 o8 o6 o4 o2 o0"},
		{"(OrderStatus = 'paid' OR amount = 999) AND FlowType = 'order' AND amount < 10", "o0"},
		{"ParentFlowId = 'x'", ""},
		{"CloseTime > '2000-01-01T00:00:00Z' ORDER BY amount", "o9 o3/old"},
	} {
		got := strings.Join(searchAll(t, s, tc.q, 100), " ")
		got = strings.ReplaceAll(strings.ReplaceAll(got, "/r ", " "), "/r", "")
		got = strings.TrimSuffix(got, "/r")
		if got != tc.want {
			t.Errorf("%s\n got %q\nwant %q", tc.q, got, tc.want)
		}
		// Every page size gives the same runs in the same order.
		for _, size := range []int{1, 2, 3} {
			paged := strings.Join(searchAll(t, s, tc.q, size), " ")
			paged = strings.ReplaceAll(strings.ReplaceAll(paged, "/r ", " "), "/r", "")
			if paged != got {
				t.Errorf("%s with pages of %d: %q, want %q", tc.q, size, paged, got)
			}
		}
	}

	// The results carry the indexed values, not the other attributes.
	page, _ := search(t, s, "FlowId = 'o1'", 10, "")
	if len(page) != 1 {
		t.Fatalf("FlowId = 'o1': %d results", len(page))
	}
	var keys []string
	for _, iv := range page[0].Indexed {
		keys = append(keys, fmt.Sprintf("%s:%s=%s", iv.Key, iv.Type, iv.JSON))
	}
	want := `OrderStatus:KEYWORD="new" amount:INT=10 due:DATETIME="2026-11-02T00:00:00Z" note:TEXT="Order 1 delivered late" tags:KEYWORD_ARRAY=["eu"]`
	if got := strings.Join(keys, " "); got != want {
		t.Errorf("indexed values %s, want %s", got, want)
	}
	if sum := page[0].Summary; sum.FlowType != "order" || sum.Status != engine.StatusRunning || !sum.StartedAt.Equal(base.Add(2*time.Second)) {
		t.Errorf("summary %+v", sum)
	}
}

// Covers: E36
func TestSearch_PageTokens(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	searchFixture(t, s)
	_, next := search(t, s, "OrderStatus = 'paid'", 2, "")
	if next == "" {
		t.Fatal("no next page")
	}
	other, err := query.Parse("OrderStatus = 'new'", searchSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{next, "!!", "AQ"} {
		if _, _, err := s.SearchFlows(SearchQuery{Query: other, PageToken: tok}); !errors.Is(err, ErrBadPageToken) {
			t.Errorf("token %q for another query: %v, want ErrBadPageToken", tok, err)
		}
	}
}

// The index entries follow the values: an old value's entries go, a
// flow without indexed attributes has none, an older run keeps its own.
// Covers: E36
func TestSearch_IndexEntries(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	plain := indexedRun("plain", "r", 0, engine.StatusRunning, nil)
	plain.Definition = orderDef()
	plain.Attributes = map[string]engine.Value{"status": jsonVal(`"paid"`)}
	putAll(t, s, 1, plain)
	if n := countPrefix(t, s, prefixIndex); n != 0 {
		t.Fatalf("%d index entries for a flow without indexed attributes", n)
	}
	if v := rawValue(t, s, flowKey("plain")); v[0] != flowValueHistory {
		t.Fatalf("flow value version %d without indexed values, want %d", v[0], flowValueHistory)
	}
	st := indexedRun("f", "r1", 0, engine.StatusRunning, map[string]string{"status": `"a"`, "tags": `["x","y"]`})
	putAll(t, s, 2, st)
	if n := countPrefix(t, s, prefixIndex); n != 3 {
		t.Fatalf("%d index entries, want 3", n)
	}
	st.Attributes["tags"] = jsonVal(`["y"]`)
	st.Attributes["status"] = jsonVal(`null`)
	putAll(t, s, 3, st)
	if n := countPrefix(t, s, prefixIndex); n != 1 {
		t.Fatalf("%d index entries after the change, want 1", n)
	}
	delete(st.Attributes, "tags")
	st.Status, st.ClosedAt = engine.StatusCompleted, st.StartedAt.Add(time.Second)
	putAll(t, s, 4, st)
	if n := countPrefix(t, s, prefixIndex); n != 0 {
		t.Fatalf("%d index entries without indexed values, want 0", n)
	}
	if v := rawValue(t, s, flowKey("f")); v[0] != flowValueHistory {
		t.Fatalf("flow value version %d without indexed values, want %d", v[0], flowValueHistory)
	}
	// A new run: the older one keeps its entries.
	st.Attributes["status"] = jsonVal(`"first"`)
	putAll(t, s, 5, st)
	next := indexedRun("f", "r2", 5, engine.StatusRunning, map[string]string{"status": `"second"`})
	putAll(t, s, 6, next)
	if got := strings.Join(searchAll(t, s, "OrderStatus IN ('first', 'second')", 10), " "); got != "f/r2 f/r1" {
		t.Fatalf("both runs: %s", got)
	}
	// A large state (out of line, version 5) keeps its indexed values.
	next.Attributes["other"] = engine.Value{Type: "json:", Data: []byte(`"` + strings.Repeat("x", 2*bigValueBytes) + `"`)}
	putAll(t, s, 7, next)
	if v := rawValue(t, s, flowKey("f")); v[0] != flowValueIndexedBig {
		t.Fatalf("flow value version %d, want %d", v[0], flowValueIndexedBig)
	}
	if got := strings.Join(searchAll(t, s, "OrderStatus = 'second'", 10), " "); got != "f/r2" {
		t.Fatalf("large run: %q", got)
	}
	got, err := s.Flow("f")
	if err != nil || got.Attributes["status"].Data == nil {
		t.Fatalf("large run reads back: %v", err)
	}
}

// Replaying the same batches into an empty store, and restoring a
// checkpoint, give the same index entries and the same answers.
// Covers: E36
func TestSearch_RebuiltOnReplayAndRestore(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	searchFixture(t, s)
	replayed := openStore(t, t.TempDir())
	searchFixture(t, replayed)
	var buf bytes.Buffer
	if _, err := s.Checkpoint(&buf); err != nil {
		t.Fatal(err)
	}
	restored, err := Restore(filepath.Join(t.TempDir(), "r"), bytes.NewReader(buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restored.Close() })
	for _, other := range []*Store{replayed, restored} {
		if dump(t, other) != dump(t, s) {
			t.Fatal("store differs")
		}
		for _, q := range []string{"OrderStatus = 'paid'", "amount > 40 ORDER BY amount", "tags = 'eu'", "note = 'late'"} {
			if a, b := searchAll(t, s, q, 3), searchAll(t, other, q, 3); !slices.Equal(a, b) {
				t.Errorf("%s: %v, want %v", q, b, a)
			}
		}
	}
}

// A format 3 store (and snapshot) has no index entries and no indexed
// runs: it opens as format 4 as it is, and indexes what is written next.
// Covers: E36
func TestSearch_Format3Upgrade(t *testing.T) {
	t.Parallel()
	golden, err := os.ReadFile(filepath.Join("testdata", "checkpoint-format3.golden"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Restore(filepath.Join(t.TempDir(), "g"), bytes.NewReader(golden), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f := storedFormat(t, g); f != storeFormat {
		t.Fatalf("restored format %d, want %d", f, storeFormat)
	}
	_ = g.Close()

	dir := t.TempDir()
	s := openStore(t, dir)
	putAll(t, s, 1, indexedRun("a", "r", 0, engine.StatusRunning, nil))
	if err := s.db.Set(keyFormat, []byte{0, 0, 0, 3}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if f := storedFormat(t, s); f != storeFormat {
		t.Fatalf("format %d after open, want %d", f, storeFormat)
	}
	putAll(t, s, 2, indexedRun("a", "r", 0, engine.StatusRunning, map[string]string{"status": `"x"`}))
	if got := strings.Join(searchAll(t, s, "OrderStatus = 'x'", 10), " "); got != "a/r" {
		t.Fatalf("after the upgrade: %q", got)
	}
}

// Covers: E36
func TestSearch_TooBroadToSort(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100k runs")
	}
	t.Parallel()
	s := openStore(t, t.TempDir())
	seq := uint64(1)
	for i := 0; i <= MaxSortedRuns; i += 5000 {
		err := s.Apply(seq, func(tx *Tx) error {
			for j := i; j < min(i+5000, MaxSortedRuns+1); j++ {
				if err := tx.PutFlow(indexedRun(fmt.Sprint("f", j), "r", j, engine.StatusRunning,
					map[string]string{"amount": fmt.Sprint(j)})); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		seq++
	}
	pq, err := query.Parse("amount >= 0 ORDER BY amount", searchSchema)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SearchFlows(SearchQuery{Query: pq}); !errors.Is(err, ErrQueryTooBroad) {
		t.Fatalf("search: %v, want ErrQueryTooBroad", err)
	}
	// In start order the same condition scans the list index: fine.
	page, next := search(t, s, "amount >= 0", 10, "")
	if len(page) != 10 || next == "" || page[0].Summary.FlowID != fmt.Sprint("f", MaxSortedRuns) {
		t.Fatalf("start order: %d results, first %v", len(page), page[0].Summary.FlowID)
	}
}

func countPrefix(t testing.TB, s *Store, p byte) int {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{p}, UpperBound: []byte{p + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

func rawValue(t testing.TB, s *Store, key []byte) []byte {
	t.Helper()
	v, err := getCopy(s.db, key)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
