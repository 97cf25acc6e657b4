package localstore

import (
	"fmt"
	"strings"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/query"
)

// searchRow is one run as a query sees it (query.Row): the built-in fields
// from its summary, its indexed values from its flow value's header (read
// when a condition names one, or for the result), its active step types
// from its state (decoded only when a condition names them).
type searchRow struct {
	r   reader
	sum engine.Summary

	loaded  bool // key, value and indexed are read
	key, v  []byte
	indexed []IndexedValue
	active  []query.Value
	parent  string
	decoded bool // active and parent are set
	err     error
}

// loadRow reads candidate c's flow value.
func loadRow(r reader, c candidate) (*searchRow, error) {
	if c.sum != nil {
		return &searchRow{r: r, sum: *c.sum}, nil
	}
	row := &searchRow{r: r}
	if err := row.load(c.flowID, c.runID); err != nil {
		return nil, err
	}
	return row, nil
}

func (row *searchRow) load(flowID, runID string) error {
	key, v, err := runValue(row.r, flowID, runID)
	if err != nil {
		return err
	}
	h, err := decodeFlowHeader(v)
	if err != nil {
		return fmt.Errorf("search flows: flow %q run %q: %w: %w", flowID, runID, ErrCorrupt, err)
	}
	if h.indexed != nil {
		if row.indexed, err = decodeIndexed(h.indexed); err != nil {
			return fmt.Errorf("search flows: flow %q run %q: indexed values: %w: %w", flowID, runID, ErrCorrupt, err)
		}
	}
	row.sum, row.key, row.v, row.loaded = h.sum, key, v, true
	return nil
}

func (row *searchRow) ensure() bool {
	if row.err != nil {
		return false
	}
	if !row.loaded {
		if err := row.load(row.sum.FlowID, row.sum.RunID); err != nil {
			row.err = err
			return false
		}
	}
	return true
}

// Values implements query.Row.
func (row *searchRow) Values(field string, t query.Type) []query.Value {
	kw := func(s string) []query.Value {
		if s == "" {
			return nil
		}
		return []query.Value{{Type: query.Keyword, Str: s}}
	}
	tm := func(v engine.Summary, closed bool) []query.Value {
		at := v.StartedAt
		if closed {
			at = v.ClosedAt
		}
		if at.IsZero() {
			return nil
		}
		return []query.Value{{Type: query.Datetime, Time: at}}
	}
	switch field {
	case query.FieldFlowID:
		return kw(row.sum.FlowID)
	case query.FieldRunID:
		return kw(row.sum.RunID)
	case query.FieldFlowType:
		return kw(row.sum.FlowType)
	case query.FieldStatus:
		return kw(string(row.sum.Status))
	case query.FieldStartTime:
		return tm(row.sum, false)
	case query.FieldCloseTime:
		return tm(row.sum, true)
	case query.FieldParentFlowID:
		if !strings.HasPrefix(row.sum.FlowID, engine.SubFlowIDPrefix) {
			return nil // only a subflow has a parent
		}
		row.decode()
		return kw(row.parent)
	case query.FieldActiveStepTypes:
		row.decode()
		return row.active
	}
	if !row.ensure() {
		return nil
	}
	for _, iv := range row.indexed {
		if iv.Key == field && iv.Type == t {
			vals, err := query.FromJSON(t, iv.JSON)
			if err != nil {
				return nil
			}
			return vals
		}
	}
	return nil
}

// decode reads what only the run's state holds: its active step types
// (while it runs) and its parent's flow ID (a subflow's). The local
// store's summary has neither, so a query that names them decodes the
// states it looks at.
func (row *searchRow) decode() {
	if row.decoded || !row.ensure() {
		return
	}
	row.decoded = true
	subflow := strings.HasPrefix(row.sum.FlowID, engine.SubFlowIDPrefix)
	if row.sum.Status != engine.StatusRunning && !subflow {
		return
	}
	st, err := loadFlow(row.r, row.key, row.v)
	if err != nil {
		row.err = fmt.Errorf("search flows: flow %q run %q: %w", row.sum.FlowID, row.sum.RunID, err)
		return
	}
	if st.Parent != nil {
		row.parent = st.Parent.FlowID
	}
	if row.sum.Status != engine.StatusRunning {
		return
	}
	seen := map[string]bool{}
	for _, s := range st.Steps {
		if !seen[s.Type] {
			seen[s.Type] = true
			row.active = append(row.active, query.Value{Type: query.KeywordArray, Str: s.Type})
		}
	}
}

func (row *searchRow) sortKey(field string, t query.Type) sortKey {
	k := sortKey{flowID: row.sum.FlowID, runID: row.sum.RunID}
	if vals := row.Values(field, t); len(vals) > 0 {
		k.has, k.v = true, vals[0]
	}
	return k
}

// result is the row as SearchFlows returns it.
func (row *searchRow) result() (SearchResult, error) {
	if !row.ensure() {
		return SearchResult{}, row.err
	}
	sum := row.sum
	if strings.HasPrefix(sum.FlowID, engine.SubFlowIDPrefix) {
		row.decode()
		if row.err != nil {
			return SearchResult{}, row.err
		}
		sum.ParentFlowID = row.parent
	}
	return SearchResult{Summary: sum, Indexed: row.indexed}, nil
}
