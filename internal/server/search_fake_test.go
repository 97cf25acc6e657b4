package server_test

import (
	"context"

	"github.com/dexzd/dexzd/internal/server"
)

func (f *fakeBackend) SearchFlows(context.Context, server.SearchQuery) ([]server.SearchedFlow, string, error) {
	return nil, "", f.err
}
