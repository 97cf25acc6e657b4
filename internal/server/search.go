package server

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/query"
)

// SearchQuery is a SearchFlows request (E36): the query text (the
// backend parses it against the registered index keys) and its page.
type SearchQuery struct {
	Query     string
	PageSize  int
	PageToken string
}

// SearchedFlow is one run a search found.
type SearchedFlow struct {
	Summary engine.Summary
	Indexed []IndexedValue
}

// IndexedValue is one indexed attribute's value of a run.
type IndexedValue struct {
	Key  string
	Type engine.IndexType
	JSON []byte
}

// maxIndexKeyBytes bounds an index key.
const maxIndexKeyBytes = 64

func (f *flowService) SearchFlows(ctx context.Context, req *dexpb.SearchFlowsRequest) (*dexpb.SearchFlowsResponse, error) {
	q := SearchQuery{Query: req.GetQuery(), PageSize: pageSize(req.GetPageSize()), PageToken: req.GetPageToken()}
	return read(f.s, func(b Backend) (*dexpb.SearchFlowsResponse, error) {
		flows, next, err := b.SearchFlows(ctx, q)
		if err != nil {
			return nil, err
		}
		out := &dexpb.SearchFlowsResponse{NextPageToken: next}
		for _, fl := range flows {
			sf := &dexpb.SearchedFlow{Summary: summaryOut(fl.Summary)}
			for _, iv := range fl.Indexed {
				sf.IndexedValues = append(sf.IndexedValues, &dexpb.IndexedValue{Key: iv.Key, Type: indexTypeOut(iv.Type), Json: iv.JSON})
			}
			out.Flows = append(out.Flows, sf)
		}
		return out, nil
	})
}

var indexTypes = map[dexpb.IndexType]engine.IndexType{
	dexpb.IndexType_INDEX_TYPE_UNSPECIFIED:   engine.IndexKeyword,
	dexpb.IndexType_INDEX_TYPE_KEYWORD:       engine.IndexKeyword,
	dexpb.IndexType_INDEX_TYPE_KEYWORD_ARRAY: engine.IndexKeywordArray,
	dexpb.IndexType_INDEX_TYPE_TEXT:          engine.IndexText,
	dexpb.IndexType_INDEX_TYPE_INT:           engine.IndexInt,
	dexpb.IndexType_INDEX_TYPE_DOUBLE:        engine.IndexDouble,
	dexpb.IndexType_INDEX_TYPE_BOOL:          engine.IndexBool,
	dexpb.IndexType_INDEX_TYPE_DATETIME:      engine.IndexDatetime,
}

func indexTypeOut(t engine.IndexType) dexpb.IndexType {
	for p, e := range indexTypes {
		if e == t && p != dexpb.IndexType_INDEX_TYPE_UNSPECIFIED {
			return p
		}
	}
	return dexpb.IndexType_INDEX_TYPE_UNSPECIFIED
}

// indexedIn converts and checks a flow type's indexed attributes: each
// names a declared attribute, has a valid key (the attribute's name by
// default) of a known type, and no two share a key.
func indexedIn(field string, in map[string]*dexpb.IndexedAttribute, declared []string) (map[string]engine.IndexedAttribute, error) {
	if len(in) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(in))
	for name := range in {
		names = append(names, name)
	}
	sort.Strings(names) // errors name the same attribute every time
	out := make(map[string]engine.IndexedAttribute, len(in))
	byKey := map[string]string{}
	for _, name := range names {
		ia := in[name]
		f := fmt.Sprintf("%s[%s]", field, name)
		if !slices.Contains(declared, name) {
			return nil, argError(f, "%q is not declared", name)
		}
		if ia == nil {
			return nil, argError(f, "must be set")
		}
		t, ok := indexTypes[ia.GetType()]
		if !ok {
			return nil, argError(f+".type", "unknown index type %d", ia.GetType())
		}
		key := ia.GetKey()
		if key == "" {
			key = name
		}
		if err := checkIndexKey(f+".key", key); err != nil {
			return nil, err
		}
		if other, dup := byKey[key]; dup {
			return nil, argError(f+".key", "index key %q is also the key of attribute %q", key, other)
		}
		byKey[key] = name
		out[name] = engine.IndexedAttribute{Key: key, Type: t}
	}
	return out, nil
}

// checkIndexKey: a letter or '_', then letters, digits, '_' and '-', at
// most maxIndexKeyBytes, not a built-in field.
func checkIndexKey(field, key string) error {
	if len(key) > maxIndexKeyBytes {
		return argError(field, "index key %q is longer than %d bytes", key, maxIndexKeyBytes)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		letter := c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z')
		if !letter && (i == 0 || (c != '-' && (c < '0' || c > '9'))) {
			return argError(field, "index key %q: a letter or '_' first, then letters, digits, '_' and '-'", key)
		}
	}
	if query.IsBuiltin(key) {
		return argError(field, "index key %q is a built-in search field", key)
	}
	return nil
}
