package web

import (
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
)

// The flows page's filters become a ListFlows request; bad ones are
// refused naming the parameter.
func TestListQuery(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		query, err string
		check      func(*dexpb.ListFlowsRequest, string) bool
	}{
		{query: "", check: func(r *dexpb.ListFlowsRequest, p string) bool {
			return r.GetPageSize() == 50 && len(r.GetStatuses()) == 0 && r.GetStartTimeFrom() == nil && p == ""
		}},
		{query: "status=running,failed&type=order&prefix=ord&pageSize=10&pageToken=tok", check: func(r *dexpb.ListFlowsRequest, p string) bool {
			return r.GetFlowType() == "order" && p == "ord" && r.GetPageSize() == 10 && r.GetPageToken() == "tok" &&
				len(r.GetStatuses()) == 2 && r.GetStatuses()[0] == dexpb.FlowStatus_FLOW_STATUS_RUNNING && r.GetStatuses()[1] == dexpb.FlowStatus_FLOW_STATUS_FAILED
		}},
		{query: "since=1h", check: func(r *dexpb.ListFlowsRequest, _ string) bool {
			return r.GetStartTimeFrom().AsTime().Equal(now.Add(-time.Hour))
		}},
		{query: "since=2026-12-01T00:00:00Z", check: func(r *dexpb.ListFlowsRequest, _ string) bool {
			return r.GetStartTimeFrom().AsTime().Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
		}},
		{query: "status=sleeping", err: "status"},
		{query: "status=unspecified", err: "status"},
		{query: "since=yesterday", err: "since"},
		{query: "since=-1h", err: "since"},
		{query: "pageSize=0", err: "pageSize"},
		{query: "pageSize=1001", err: "pageSize"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			req, prefix, err := listQuery(httptest.NewRequest("GET", "/api/flows?"+tc.query, nil), now)
			if tc.err != "" {
				if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.err+":") {
					t.Fatalf("err %v, want INVALID_ARGUMENT naming %s", err, tc.err)
				}
				return
			}
			if err != nil || !tc.check(req, prefix) {
				t.Fatalf("got %v prefix %q err %v", req, prefix, err)
			}
		})
	}
}

// A value typed into a form must be JSON; it is sent compacted, as the
// SDKs write JSON values.
func TestJSONValue(t *testing.T) {
	v, err := jsonValue("value", ` {"approved": true} `)
	if err != nil || v.GetEncoding() != "json" || string(v.GetData()) != `{"approved":true}` {
		t.Fatalf("got %v, %v", v, err)
	}
	if _, err := jsonValue("value", "yes"); status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), "value:") {
		t.Fatalf("bare word: %v, want INVALID_ARGUMENT naming value", err)
	}
}

// The printed URL names a wildcard listener as loopback.
func TestURL(t *testing.T) {
	for addr, want := range map[string]string{"0.0.0.0:8802": "http://127.0.0.1:8802/", "127.0.0.1:9": "http://127.0.0.1:9/", "[::]:80": "http://127.0.0.1:80/"} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := URL(a); got != want {
			t.Errorf("URL(%s) = %s, want %s", addr, got, want)
		}
	}
}
