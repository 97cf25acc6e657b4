package flowstore

import (
	"errors"
	"fmt"

	"github.com/dexzd/dexzd/internal/localstore"
)

// Searcher is a Store that answers SearchFlows (E36): the Pebble store
// (localstore.Store.SearchFlows). The in-memory store of tests does not.
type Searcher interface {
	// SearchFlows returns a page of the runs matching q and the token of
	// the next page ("" on the last). A page token of another query
	// matches ErrBadPageToken; a query matching too many runs to sort
	// matches localstore.ErrQueryTooBroad.
	SearchFlows(q localstore.SearchQuery) ([]localstore.SearchResult, string, error)
}

var (
	_ Searcher = pebbleStore{}
	_ Searcher = (*cachedStore)(nil)
)

func (p pebbleStore) SearchFlows(q localstore.SearchQuery) ([]localstore.SearchResult, string, error) {
	out, next, err := p.s.SearchFlows(q)
	if errors.Is(err, localstore.ErrBadPageToken) {
		return nil, "", fmt.Errorf("%w: %w", ErrBadPageToken, err)
	}
	return out, next, err
}

// SearchFlows reads the store below: the index is never cached.
func (c *cachedStore) SearchFlows(q localstore.SearchQuery) ([]localstore.SearchResult, string, error) {
	s, ok := c.Store.(Searcher)
	if !ok {
		return nil, "", ErrNoSearch
	}
	return s.SearchFlows(q)
}

// ErrNoSearch: the store does not answer SearchFlows.
var ErrNoSearch = errors.New("this store does not answer SearchFlows")
