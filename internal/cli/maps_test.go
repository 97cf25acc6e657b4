package cli

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/dexzd/dexzd/api/dexpb"
)

// --key addresses a map instance (E33) in publish, set-attrs and
// get-attrs, escaping the key; flow state shows instances as name["key"].
//
// Covers: E33
func TestFlowMaps_KeyFlagAndStateText(t *testing.T) {
	t.Parallel()
	f := fixtureServer()
	f.getState = func(context.Context, *dexpb.GetFlowStateRequest) (*dexpb.GetFlowStateResponse, error) {
		st := &dexpb.FlowState{Summary: fixtureSummary(),
			Attributes: []*dexpb.Attribute{{Name: "tier/acme%2Feu", Value: jsonEncoded([]byte(`"gold"`))}, {Name: "status", Value: jsonEncoded([]byte(`"ok"`))}},
			Channels:   []*dexpb.ChannelQueue{{Channel: "orders/eu", Size: 2}}}
		return &dexpb.GetFlowStateResponse{State: st}, nil
	}
	addr := f.start(t)
	run := func(args ...string) result {
		r := runCLI(t, append([]string{"--server", addr}, args...)...)
		r.wantCode(t, exitOK)
		return r
	}
	run("flow", "publish", "r-1", "orders", "12", "--key", "eu/west", "--request-id", "p1")
	run("flow", "set-attrs", "r-1", `tier="gold"`, "--key", "acme/eu")
	run("flow", "get-attrs", "r-1", "tier", "--key", "50%")
	checks := []struct {
		method string
		want   proto.Message
	}{
		{"PublishToChannel", &dexpb.PublishToChannelRequest{FlowId: "r-1", RequestId: "p1", Publishes: []*dexpb.ChannelPublish{{
			Channel: "orders/eu%2Fwest", Values: []*dexpb.EncodedValue{jsonEncoded([]byte("12"))}}}}},
		{"SetAttributes", &dexpb.SetAttributesRequest{FlowId: "r-1", Attributes: []*dexpb.Attribute{{Name: "tier/acme%2Feu", Value: jsonEncoded([]byte(`"gold"`))}}}},
		{"GetAttributes", &dexpb.GetAttributesRequest{FlowId: "r-1", Names: []string{"tier/50%25"}}},
	}
	for _, c := range checks {
		calls := f.callsTo(c.method)
		if len(calls) != 1 || !proto.Equal(calls[0].req, c.want) {
			t.Errorf("%s got %v, want %v", c.method, calls, c.want)
		}
	}
	r := run("flow", "state", "r-1")
	r.wantStdout(t, `tier["acme/eu"]`)
	r.wantStdout(t, `orders["eu"]: 2 queued`)
	for _, args := range [][]string{
		{"flow", "publish", "r-1", "orders", "1", "--key", ""},
		{"flow", "set-attrs", "r-1", "tier=1", "--key", ""},
		{"flow", "get-attrs", "r-1", "--key", "k"},
	} {
		runCLI(t, append([]string{"--server", addr}, args...)...).wantCode(t, exitUsage)
	}
}
