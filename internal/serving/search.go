package serving

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/flowstore"
	"github.com/dexzd/dexzd/internal/localstore"
	"github.com/dexzd/dexzd/internal/query"
	"github.com/dexzd/dexzd/internal/server"
)

// SearchFlows implements server.Backend (E36): it parses the query
// against the index keys of the registered flow types and searches the
// local store.
func (c *Core) SearchFlows(_ context.Context, q server.SearchQuery) ([]server.SearchedFlow, string, error) {
	pq, err := query.Parse(q.Query, c.searchSchema())
	if err != nil {
		return nil, "", &engine.Error{Code: engine.CodeInvalidArgument, Field: "query", Message: err.Error()}
	}
	s, ok := c.cfg.Store.(flowstore.Searcher)
	if !ok {
		return nil, "", &engine.Error{Code: engine.CodeFailedPrecondition, Message: flowstore.ErrNoSearch.Error()}
	}
	res, next, err := s.SearchFlows(localstore.SearchQuery{Query: pq, PageSize: q.PageSize, PageToken: q.PageToken})
	switch {
	case errors.Is(err, flowstore.ErrBadPageToken):
		return nil, "", &engine.Error{Code: engine.CodeInvalidArgument, Field: "pageToken", Message: err.Error()}
	case errors.Is(err, localstore.ErrQueryTooBroad):
		return nil, "", &engine.Error{Code: engine.CodeFailedPrecondition, Field: "query", Message: err.Error()}
	case errors.Is(err, flowstore.ErrNoSearch):
		return nil, "", &engine.Error{Code: engine.CodeFailedPrecondition, Message: err.Error()}
	case err != nil:
		return nil, "", err
	}
	out := make([]server.SearchedFlow, len(res))
	for i, r := range res {
		out[i].Summary = r.Summary
		for _, iv := range r.Indexed {
			out[i].Indexed = append(out[i].Indexed, server.IndexedValue{Key: iv.Key, Type: engine.IndexType(iv.Type), JSON: iv.JSON})
		}
	}
	return out, next, nil
}

// searchSchema is the type of every index key the registered flow types
// declare (registerIndexes keeps them to one type per key).
func (c *Core) searchSchema() query.Schema {
	c.defs.mu.Lock()
	defer c.defs.mu.Unlock()
	s := query.Schema{}
	for _, d := range c.defs.m {
		if d.Definition == nil {
			continue
		}
		for _, ia := range d.Definition.Indexed {
			s[ia.Key] = query.Type(ia.Type)
		}
	}
	return s
}

// checkIndexKeys refuses declarations that give an index key another
// type than a registered flow type (other than the one being declared)
// gives it, or than another declaration of the same Hello. The caller
// holds c.defs.mu. The error is INVALID_ARGUMENT naming the key and both
// flow types.
func (c *Core) checkIndexKeys(decls []server.FlowTypeDecl) error {
	type owner struct {
		flowType string
		t        engine.IndexType
	}
	keys := map[string]owner{}
	declared := map[string]bool{}
	for _, d := range decls {
		declared[d.Definition.Type] = true
	}
	for _, typ := range slices.Sorted(maps.Keys(c.defs.m)) {
		d := c.defs.m[typ]
		if declared[typ] || d.Definition == nil {
			continue // redeclared now: its new declaration counts
		}
		for _, ia := range d.Definition.Indexed {
			keys[ia.Key] = owner{typ, ia.Type}
		}
	}
	for i, d := range decls {
		for _, name := range slices.Sorted(maps.Keys(d.Definition.Indexed)) {
			ia := d.Definition.Indexed[name]
			if o, ok := keys[ia.Key]; ok && o.t != ia.Type {
				return &engine.Error{Code: engine.CodeInvalidArgument,
					Field: fmt.Sprintf("hello.flowTypes[%d].indexedAttributes[%s]", i, name),
					Message: fmt.Sprintf("index key %q is %s in flow type %q, here %s: a key keeps one type across flow types",
						ia.Key, o.t, o.flowType, ia.Type)}
			}
			keys[ia.Key] = owner{d.Definition.Type, ia.Type}
		}
	}
	return nil
}
