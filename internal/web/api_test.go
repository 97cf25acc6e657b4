package web

import (
	"fmt"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
)

// The flows page's filters and search field become one SearchFlows
// query (the typed condition first, its ORDER BY last); bad filters are
// refused naming the parameter.
func TestListQuery(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		query, err string
		want       string // the SearchFlows query
		size       uint32
		token      string
	}{
		{query: "", want: "", size: 50},
		{query: "status=running,failed&type=order&prefix=ord&pageSize=10&pageToken=tok",
			want: "FlowType = 'order' AND FlowId STARTS_WITH 'ord' AND Status IN ('RUNNING', 'FAILED')", size: 10, token: "tok"},
		{query: "since=1h", want: "StartTime >= '2026-12-02T11:00:00Z'", size: 50},
		{query: "since=2026-12-01T00:00:00Z", want: "StartTime >= '2026-12-01T00:00:00Z'", size: 50},
		{query: "type=it's", want: "FlowType = 'it''s'", size: 50},
		{query: "q=" + url.QueryEscape("OrderStatus = 'charged' OR cents > 5"), want: "OrderStatus = 'charged' OR cents > 5", size: 50},
		{query: "type=order&q=" + url.QueryEscape("OrderStatus = 'charged' OR cents > 5 order  by cents DESC"),
			want: "(OrderStatus = 'charged' OR cents > 5) AND FlowType = 'order' order  by cents DESC", size: 50},
		{query: "status=completed&q=" + url.QueryEscape("ORDER BY StartTime"), want: "Status IN ('COMPLETED') ORDER BY StartTime", size: 50},
		// ORDER BY inside a literal or a backquoted name, or as part of a
		// longer word, is not the clause.
		{query: "type=x&q=" + url.QueryEscape("note = 'order by me' AND `order by` = 1 AND reorder_by = 2"),
			want: "(note = 'order by me' AND `order by` = 1 AND reorder_by = 2) AND FlowType = 'x'", size: 50},
		{query: "status=sleeping", err: "status"},
		{query: "status=unspecified", err: "status"},
		{query: "since=yesterday", err: "since"},
		{query: "since=-1h", err: "since"},
		{query: "pageSize=0", err: "pageSize"},
		{query: "pageSize=1001", err: "pageSize"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			fq, err := listQuery(httptest.NewRequest("GET", "/api/flows?"+tc.query, nil), now)
			if tc.err != "" {
				if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.err+":") {
					t.Fatalf("err %v, want INVALID_ARGUMENT naming %s", err, tc.err)
				}
				return
			}
			if err != nil || fq.search.GetQuery() != tc.want || fq.search.GetPageSize() != tc.size || fq.search.GetPageToken() != tc.token {
				t.Fatalf("got %v err %v, want query %q", fq.search, err, tc.want)
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

// A reset's point is one of three, with what it needs; others are refused
// naming the field.
func TestResetPoint(t *testing.T) {
	for _, tc := range []struct {
		in    resetIn
		want  *dexpb.ResetPoint
		field string // of the error
	}{
		{in: resetIn{Point: "beginning"}, want: &dexpb.ResetPoint{Point: &dexpb.ResetPoint_Beginning{Beginning: true}}},
		{in: resetIn{Point: "stepType", StepType: "Charge"}, want: &dexpb.ResetPoint{Point: &dexpb.ResetPoint_StepType{StepType: "Charge"}}},
		{in: resetIn{Point: "stepExecution", StepExecutionID: "Charge-1", BeforeExecute: true}, want: &dexpb.ResetPoint{
			Point: &dexpb.ResetPoint_StepExecution{StepExecution: &dexpb.StepExecutionPoint{StepExecutionId: "Charge-1", BeforeExecute: true}}}},
		{in: resetIn{Point: "stepType"}, field: "stepType"},
		{in: resetIn{Point: "stepExecution"}, field: "stepExecutionId"},
		{in: resetIn{Point: "yesterday"}, field: "point"},
		{in: resetIn{}, field: "point"},
	} {
		p, err := resetPoint(tc.in)
		if tc.field != "" {
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.field+":") {
				t.Errorf("%+v: err %v, want INVALID_ARGUMENT naming %s", tc.in, err, tc.field)
			}
			continue
		}
		if err != nil || !proto.Equal(p, tc.want) {
			t.Errorf("%+v: got %v, %v, want %v", tc.in, p, err, tc.want)
		}
	}
}

// The run page shows an instance of an attribute or channel map (E33) as
// dexcli does, map["key"] with the key unescaped (split at the last '/');
// plain names and names that are no canonical instance are not renamed.
//
// Covers: E33
func TestInstanceNames(t *testing.T) {
	st := &dexpb.FlowState{
		Attributes: []*dexpb.Attribute{{Name: "spent/acme%2Feu"}, {Name: "status"}, {Name: "tier/50%25"}, {Name: "a/b/c"},
			{Name: "odd/100%"}, {Name: "trail/"}, {Name: "/lead"}, {Name: `q/say "hi"`}},
		Channels: []*dexpb.ChannelQueue{{Channel: "orders/eu%2Fwest"}, {Channel: "approve"}, {Channel: "orders/a%252F"}},
	}
	want := map[string]string{
		"spent/acme%2Feu":  `spent["acme/eu"]`,
		"tier/50%25":       `tier["50%"]`,
		"a/b/c":            `a/b["c"]`,
		`q/say "hi"`:       `q["say \"hi\""]`,
		"orders/eu%2Fwest": `orders["eu/west"]`,
		"orders/a%252F":    `orders["a%2F"]`,
	}
	got := instanceNames(st)
	if len(got) != len(want) {
		t.Errorf("got %d names %v, want %d", len(got), got, len(want))
	}
	for wire, text := range want {
		if got[wire] != text {
			t.Errorf("%s shows as %q, want %q", wire, got[wire], text)
		}
	}
	// The same split as the SDK's, which dexcli shows.
	for _, a := range st.GetAttributes() {
		name, key, ok := dex.ParseMapInstanceName(a.GetName())
		if _, shown := got[a.GetName()]; ok != shown || (ok && got[a.GetName()] != fmt.Sprintf("%s[%q]", name, key)) {
			t.Errorf("%s: shown %q, the SDK parses %q %q %v", a.GetName(), got[a.GetName()], name, key, ok)
		}
	}
}
