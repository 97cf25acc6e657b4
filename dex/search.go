package dex

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"reflect"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
)

// IndexType is the type of an indexed attribute (E36), and so of its
// search key.
type IndexType int

// The index types. IndexDefault lets the attribute's Go type choose:
// KEYWORD for a string, KEYWORD_ARRAY for a []string, INT for an
// integer, DOUBLE for a float, BOOL for a bool, DATETIME for a time.Time.
const (
	IndexDefault IndexType = iota
	// IndexKeyword: a string, matched whole (=, <, IN, STARTS_WITH, ...).
	IndexKeyword
	// IndexKeywordArray: a []string; = and IN match an element.
	IndexKeywordArray
	// IndexText: a string split into lower-cased words; = matches a run
	// whose text holds every word of the literal.
	IndexText
	// IndexInt: an integer within 64 bits.
	IndexInt
	// IndexDouble: a finite float.
	IndexDouble
	// IndexBool: a bool.
	IndexBool
	// IndexDatetime: a time.Time (RFC 3339 in JSON).
	IndexDatetime
)

func (t IndexType) String() string {
	switch t {
	case IndexKeyword:
		return "KEYWORD"
	case IndexKeywordArray:
		return "KEYWORD_ARRAY"
	case IndexText:
		return "TEXT"
	case IndexInt:
		return "INT"
	case IndexDouble:
		return "DOUBLE"
	case IndexBool:
		return "BOOL"
	case IndexDatetime:
		return "DATETIME"
	}
	return "DEFAULT"
}

func (t IndexType) proto() dexpb.IndexType {
	if t == IndexDefault {
		return dexpb.IndexType_INDEX_TYPE_UNSPECIFIED
	}
	return dexpb.IndexType(t) // the values follow the API's
}

// AttributeOption adjusts an attribute declaration (DefineAttribute).
type AttributeOption interface{ applyAttribute(*attrOptions) }

type attrOptions struct {
	indexed bool
	key     string
	typ     IndexType
}

// IndexOption adjusts Indexed.
type IndexOption func(*attrOptions)

func (o IndexOption) applyAttribute(a *attrOptions) { o(a) }

// Indexed declares the attribute indexed for search (E36): Client.Search
// finds flow runs by its value. The search key is the attribute's name
// unless IndexKey says another; keys are global across flow types and
// keep one type (a worker that declares a key with another type than
// another flow type's is refused at startup, naming the key). The type
// comes from the value's Go type unless IndexAs says (TEXT is only ever
// chosen so). An indexed attribute's value travels as plain JSON even
// with a Codec (the server must read it to index), at most 4 KiB.
//
//	var Status = dex.DefineAttribute[string]("status", dex.Indexed(dex.IndexKey("OrderStatus")))
func Indexed(opts ...IndexOption) AttributeOption {
	return IndexOption(func(a *attrOptions) {
		a.indexed = true
		for _, o := range opts {
			o(a)
		}
	})
}

// IndexKey names the search key of an indexed attribute.
func IndexKey(key string) IndexOption { return func(a *attrOptions) { a.key = key } }

// IndexAs sets the index type of an indexed attribute.
func IndexAs(t IndexType) IndexOption { return func(a *attrOptions) { a.typ = t } }

var timeType = reflect.TypeFor[time.Time]()

// indexTypeFor is the index type of an attribute of Go type t declared
// with want (IndexDefault: chosen from t), or an error when t cannot be
// indexed so.
func indexTypeFor(t reflect.Type, want IndexType) (IndexType, error) {
	base := t
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	var def IndexType
	switch {
	case base == timeType:
		def = IndexDatetime
	case base.Kind() == reflect.String:
		def = IndexKeyword
	case base.Kind() == reflect.Slice && base.Elem().Kind() == reflect.String:
		def = IndexKeywordArray
	case base.Kind() >= reflect.Int && base.Kind() <= reflect.Uint64:
		def = IndexInt
	case base.Kind() == reflect.Float32 || base.Kind() == reflect.Float64:
		def = IndexDouble
	case base.Kind() == reflect.Bool:
		def = IndexBool
	}
	switch {
	case want == IndexDefault && def == IndexDefault:
		return 0, fmt.Errorf("a %s cannot be indexed: index a string, []string, integer, float, bool or time.Time", t)
	case want == IndexDefault:
		return def, nil
	case want == def, want == IndexText && def == IndexKeyword:
		return want, nil
	}
	return 0, fmt.Errorf("a %s cannot be indexed as %s", t, want)
}

// SearchQuery pages Client.SearchFlows.
type SearchQuery struct {
	// Query is the filter: for example
	// "FlowType = 'order' AND OrderStatus = 'charged' ORDER BY StartTime DESC"
	// (docs/search.md). Empty matches every run.
	Query string
	// PageSize is the most runs of a page: 0 means 100, at most 1000.
	PageSize int
	// PageToken continues from an earlier page's NextPageToken.
	PageToken string
}

// SearchPage is one page of a search.
type SearchPage struct {
	Flows []SearchedFlow
	// NextPageToken continues the search; empty on the last page.
	NextPageToken string
}

// SearchedFlow is one flow run a search found: its summary (without the
// timeout and the error: GetFlowSummary has them) and its indexed values.
type SearchedFlow struct {
	FlowSummary
	// Indexed are the run's indexed values, by search key, as JSON.
	Indexed map[string]json.RawMessage
}

// SearchValue decodes the value of attribute a in a search result: ok is
// false when the run has none. The attribute must be indexed under its
// own name (or pass its key with SearchValueOf).
func SearchValue[T any](f SearchedFlow, a Attribute[T]) (v T, ok bool, err error) {
	key := a.name
	if a.opts.key != "" {
		key = a.opts.key
	}
	return SearchValueOf[T](f, key)
}

// SearchValueOf decodes the indexed value of key in a search result.
func SearchValueOf[T any](f SearchedFlow, key string) (v T, ok bool, err error) {
	raw, ok := f.Indexed[key]
	if !ok {
		return v, false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, true, fmt.Errorf("indexed value %q: %w", key, err)
	}
	return v, true, nil
}

// SearchFlows returns one page of the flow runs (latest and older) that
// match q.Query. A malformed query is an error with code
// codes.InvalidArgument saying at which position.
func (c *Client) SearchFlows(ctx context.Context, q SearchQuery) (*SearchPage, error) {
	var resp *dexpb.SearchFlowsResponse
	err := c.call(ctx, "SearchFlows", "", retryable, "", func(ctx context.Context, fc dexpb.FlowServiceClient) error {
		var err error
		resp, err = fc.SearchFlows(ctx, &dexpb.SearchFlowsRequest{Query: q.Query, PageSize: uint32(max(q.PageSize, 0)), PageToken: q.PageToken}) //nolint:gosec // bounded by the server
		return err
	})
	if err != nil {
		return nil, err
	}
	out := &SearchPage{NextPageToken: resp.GetNextPageToken()}
	for _, f := range resp.GetFlows() {
		sf := SearchedFlow{FlowSummary: *summaryOf(f.GetSummary()), Indexed: map[string]json.RawMessage{}}
		for _, iv := range f.GetIndexedValues() {
			sf.Indexed[iv.GetKey()] = json.RawMessage(iv.GetJson())
		}
		out.Flows = append(out.Flows, sf)
	}
	return out, nil
}

// Search iterates over every flow run that matches query, fetching pages
// of pageSize (0: 100) as the loop goes; an error ends the iteration
// (yielded once, with a zero SearchedFlow).
//
//	for f, err := range client.Search(ctx, "OrderStatus = 'charged'", 0) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(f.FlowID, f.Status)
//	}
func (c *Client) Search(ctx context.Context, query string, pageSize int) iter.Seq2[SearchedFlow, error] {
	return func(yield func(SearchedFlow, error) bool) {
		q := SearchQuery{Query: query, PageSize: pageSize}
		for {
			page, err := c.SearchFlows(ctx, q)
			if err != nil {
				yield(SearchedFlow{}, err)
				return
			}
			for _, f := range page.Flows {
				if !yield(f, nil) {
					return
				}
			}
			if page.NextPageToken == "" {
				return
			}
			q.PageToken = page.NextPageToken
		}
	}
}
