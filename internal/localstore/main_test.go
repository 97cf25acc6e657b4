package localstore

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test closes what it opens: no Pebble goroutine outlives a store.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
