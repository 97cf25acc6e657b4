package server_test

import (
	"testing"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/server"
)

// The SDK's keepalive pings detect a frozen or unreachable server; the
// server's enforcement policy must allow them, or it ends the SDK's
// connections with GOAWAY ENHANCE_YOUR_CALM ("too_many_pings").
//
// Covers: P5
func TestKeepalive_ServerAllowsTheSDKsPings(t *testing.T) {
	if server.KeepaliveMinTime > dex.KeepaliveTime {
		t.Fatalf("the server refuses pings more often than every %v; the SDK pings every %v", server.KeepaliveMinTime, dex.KeepaliveTime)
	}
}
