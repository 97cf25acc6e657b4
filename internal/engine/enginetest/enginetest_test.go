package enginetest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
	"github.com/dexzd/dexzd/internal/engine/enginetest"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func started(flow, run string) engine.Record {
	return engine.Record{FlowID: flow, RunID: run, At: t0, Body: engine.FlowStarted{FlowType: "T"}}
}

func rpc(flow, run, call string) engine.Record {
	return engine.Record{FlowID: flow, RunID: run, At: t0.Add(time.Second), Body: engine.RPCCompleted{CallID: call, Name: "bump"}}
}

// Covers: E22
func TestCheckRPCAtMostOnce(t *testing.T) {
	t.Parallel()
	ok := []engine.Record{started("f", "r1"), rpc("f", "r1", "c1"), rpc("f", "r1", "c2"), rpc("f", "r2", "c1"), rpc("g", "r1", "c1")}
	if err := enginetest.CheckRPCAtMostOnce(ok); err != nil {
		t.Fatal(err)
	}
	twice := append(ok, rpc("f", "r1", "c1"))
	if err := enginetest.CheckRPCAtMostOnce(twice); err == nil || !strings.Contains(err.Error(), `"c1"`) {
		t.Fatalf("a call committed twice: %v", err)
	}
}

func TestCheckReplayEqualsLive(t *testing.T) {
	t.Parallel()
	recs := []engine.Record{started("f", "r1"), started("g", "r1")}
	live, err := enginetest.Replay(recs)
	if err != nil {
		t.Fatal(err)
	}
	if err := enginetest.CheckReplayEqualsLive(live, recs); err != nil {
		t.Fatal(err)
	}
	live["f"].FlowType = "changed live"
	if err := enginetest.CheckReplayEqualsLive(live, recs); err == nil {
		t.Fatal("a live state that differs from its replay passed")
	}
	delete(live, "f")
	if err := enginetest.CheckReplayEqualsLive(live, recs); err == nil {
		t.Fatal("records without a live state passed")
	}
}
