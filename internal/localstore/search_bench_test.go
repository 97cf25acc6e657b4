package localstore

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/query"
)

// BenchmarkSearch_1M measures selective searches (100 results or fewer)
// over a store of 1M runs with indexed attributes (DEX_SEARCH_BENCH_RUNS
// to change the count): each run has an OrderStatus among ten common ones
// (100 runs "refunded"), an amount equal to its number and a customer
// among 20000. Building the store takes minutes; it is built once for
// every query.
//
// Covers: E36
func BenchmarkSearch_1M(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("DEX_SEARCH_BENCH_RUNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	def := searchDef()
	def.Attributes = append(def.Attributes, "customer")
	def.Indexed["customer"] = engine.IndexedAttribute{Key: "customer", Type: engine.IndexKeyword}
	schema := query.Schema{"customer": query.Keyword}
	for k, v := range searchSchema {
		schema[k] = v
	}
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	statuses := []string{"new", "paid", "packed", "shipped", "delivered", "returned", "held", "review", "charged", "closed"}
	built := time.Now()
	const perBatch = 2000
	for i, seq := 0, uint64(1); i < n; i, seq = i+perBatch, seq+1 {
		err := s.Apply(seq, func(tx *Tx) error {
			for j := i; j < min(i+perBatch, n); j++ {
				status := statuses[j%len(statuses)]
				if j%(n/100) == 7 {
					status = "refunded"
				}
				runStatus := engine.StatusCompleted
				if j%4 == 0 {
					runStatus = engine.StatusRunning
				}
				st := indexedRun(fmt.Sprintf("order-%07d", j), "r", j, runStatus, map[string]string{
					"status": `"` + status + `"`, "amount": strconv.Itoa(j),
					"customer": fmt.Sprintf(`"c%d"`, j%20000)})
				st.Definition = def
				if err := tx.PutFlow(st); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("built %d runs in %v", n, time.Since(built).Round(time.Second))
	for _, tc := range []struct {
		name, q string
		want    int
	}{
		{"keyword", "OrderStatus = 'refunded'", 100},
		{"spec-example", "FlowType = 'order' AND OrderStatus = 'refunded' AND StartTime > '2025-01-01T00:00:00Z' ORDER BY StartTime DESC", 100},
		{"int-range", fmt.Sprintf("amount BETWEEN %d AND %d", n/2, n/2+99), 100},
		{"keyword-and-running", "customer = 'c40' AND Status = 'RUNNING'", -1},
		{"or-of-keys", "customer = 'c1' OR customer = 'c2'", -1},
	} {
		pq, err := query.Parse(tc.q, schema)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			var got int
			for b.Loop() {
				out, _, err := s.SearchFlows(SearchQuery{Query: pq, PageSize: 100})
				if err != nil {
					b.Fatal(err)
				}
				got = len(out)
			}
			if tc.want >= 0 && got != tc.want {
				b.Fatalf("%s: %d results, want %d", tc.q, got, tc.want)
			}
			b.ReportMetric(float64(got), "results")
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/query")
		})
	}
}
