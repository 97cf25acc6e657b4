package query

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var testSchema = Schema{
	"OrderStatus": Keyword, "Tags": KeywordArray, "Notes": Text, "Amount": Int,
	"Score": Double, "Paid": Bool, "DueAt": Datetime, "order-id": Keyword,
}

// Covers: E36, E37
func TestParse_Valid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ q, want, order string }{
		{"", "", ""},
		{"FlowType = 'order'", "FlowType = 'order'", ""},
		{"FlowType = 'order' AND OrderStatus = 'charged' AND StartTime > '2026-11-01T00:00:00Z' ORDER BY StartTime DESC",
			"(FlowType = 'order' AND OrderStatus = 'charged' AND StartTime > '2026-11-01T00:00:00Z')", "StartTime DESC"},
		{"Amount >= -5 or Amount < 10 and Paid = true", "(Amount >= -5 OR (Amount < 10 AND Paid = TRUE))", ""},
		{"(Amount >= -5 OR Amount < 10) AND Paid != FALSE", "((Amount >= -5 OR Amount < 10) AND Paid != FALSE)", ""},
		{"NOT Status = 'RUNNING'", "NOT Status = 'RUNNING'", ""},
		{"Status = 'CONTINUED_AS_NEW'", "Status = 'CONTINUED_AS_NEW'", ""}, // E37
		{"Status NOT IN ('RUNNING', 'FAILED')", "NOT Status IN ('RUNNING', 'FAILED')", ""},
		{"Amount BETWEEN 1 AND 10", "Amount BETWEEN 1 AND 10", ""},
		{"Amount NOT BETWEEN 1 AND 10 ORDER BY Amount", "NOT Amount BETWEEN 1 AND 10", "Amount ASC"},
		{"FlowId STARTS_WITH 'ord-'", "FlowId STARTS_WITH 'ord-'", ""},
		{"Notes = 'Late Delivery!'", "Notes = 'late delivery'", ""},
		{"Tags IN ('a', 'b''c')", "Tags IN ('a', 'b''c')", ""},
		{"Score > 1.5e3", "Score > 1500", ""},
		{"`order-id` = 'x' order by Score desc", "order-id = 'x'", "Score DESC"},
		{"order-id <> 'x'", "order-id != 'x'", ""},
		{"ORDER BY CloseTime", "", "CloseTime ASC"},
		{"DueAt <= '2026-11-01T01:00:00+01:00'", "DueAt <= '2026-11-01T00:00:00Z'", ""},
	} {
		q, err := Parse(tc.q, testSchema)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.q, err)
			continue
		}
		if got := String(q.Where); got != tc.want {
			t.Errorf("Parse(%q) = %s, want %s", tc.q, got, tc.want)
		}
		order := ""
		if q.OrderBy != "" {
			order = q.OrderBy + map[bool]string{true: " DESC", false: " ASC"}[q.Desc]
		}
		if order != tc.order {
			t.Errorf("Parse(%q) order %q, want %q", tc.q, order, tc.order)
		}
	}
}

// Covers: E36
func TestParse_Errors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		q   string
		pos int // 1-based, as in the message
		msg string
	}{
		{"FlowType = ", 12, "expected a quoted string"},
		{"FlowType = 'x' AND", 19, "expected a field name"},
		{"Nope = 'x'", 1, "unknown field Nope"},
		{"flowtype = 'x'", 1, "did you mean FlowType"},
		{"Amount = 'x'", 10, "expected an integer"},
		{"Amount = 1.5", 10, "within 64 bits"},
		{"Amount STARTS_WITH 1", 8, "does not take STARTS_WITH"},
		{"Paid < TRUE", 6, "does not take <"},
		{"Status = 'running'", 10, "unknown status"},
		{"StartTime > 'yesterday'", 13, "RFC 3339"},
		{"(Amount = 1", 12, "expected ')'"},
		{"Amount = 1)", 11, "unexpected \")\""},
		{"FlowType = 'x", 12, "unterminated string"},
		{"FlowType == 'x'", 11, "expected a quoted string"},
		{"Amount IN (1 2)", 14, "expected ',' or ')'"},
		{"Amount BETWEEN 1 OR 2", 18, "expected AND in BETWEEN"},
		{"ORDER Amount", 7, "expected BY"},
		{"ORDER BY Tags", 10, "cannot ORDER BY Tags"},
		{"Amount NOT = 1", 12, "expected IN or BETWEEN"},
		{"Tags < 'a'", 6, "does not take <"},
		{"Notes = '!!'", 9, "no word"},
		{"FlowType = 'x' $", 16, "unexpected character"},
		{"AND = 'x'", 1, "keyword AND"},
		{"Score = 1e999", 9, "within 64 bits"},
		{"Amount = 12abc", 10, "malformed number"},
		{strings.Repeat("(", 100) + "Amount = 1" + strings.Repeat(")", 100), 65, "nested more than"},
	} {
		_, err := Parse(tc.q, testSchema)
		var qe *Error
		if !errors.As(err, &qe) {
			t.Errorf("Parse(%q) = %v, want an *Error", tc.q, err)
			continue
		}
		if qe.Pos+1 != tc.pos || !strings.Contains(qe.Msg, tc.msg) {
			t.Errorf("Parse(%q) = %v, want position %d and %q", tc.q, err, tc.pos, tc.msg)
		}
		if want := "at position "; !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): %v does not say %q", tc.q, err, want)
		}
	}
}

type row map[string][]Value

func (r row) Values(f string, _ Type) []Value { return r[f] }

func kw(s string) Value { return Value{Type: Keyword, Str: s} }

// Covers: E36
func TestMatch(t *testing.T) {
	t.Parallel()
	notes, _ := FromJSON(Text, []byte(`"Delivered late, customer upset"`))
	tags, _ := FromJSON(KeywordArray, []byte(`["vip","eu","vip"]`))
	due, _ := FromJSON(Datetime, []byte(`"2026-11-02T10:00:00Z"`))
	r := row{
		"FlowType": {kw("order")}, "Status": {kw("RUNNING")}, "FlowId": {kw("ord-17")},
		"OrderStatus": {kw("charged")}, "Amount": {{Type: Int, Int: 42}}, "Score": {{Type: Double, Float: 0.5}},
		"Paid": {{Type: Bool, Bool: true}}, "Notes": notes, "Tags": tags, "DueAt": due,
		"StartTime": {{Type: Datetime, Time: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)}},
	}
	for q, want := range map[string]bool{
		"": true,
		"FlowType = 'order' AND OrderStatus = 'charged' AND StartTime > '2026-11-01T00:00:00Z'": true,
		"FlowType = 'order' AND OrderStatus = 'refunded'":                                       false,
		"OrderStatus = 'refunded' OR Amount = 42":                                               true,
		"NOT Amount = 42":                        false,
		"Amount != 41":                           true,
		"Amount BETWEEN 42 AND 42":               true,
		"Amount NOT BETWEEN 1 AND 41":            true,
		"Amount IN (1, 2, 42)":                   true,
		"Amount > 42":                            false,
		"Score < 1":                              true,
		"Paid = TRUE":                            true,
		"Paid != TRUE":                           false,
		"Notes = 'LATE upset'":                   true,
		"Notes = 'late refund'":                  false,
		"Notes != 'late refund'":                 true,
		"Tags = 'eu'":                            true,
		"Tags != 'eu'":                           false,
		"Tags IN ('us', 'vip')":                  true,
		"FlowId STARTS_WITH 'ord-'":              true,
		"FlowId STARTS_WITH 'x'":                 false,
		"DueAt >= '2026-11-02T11:00:00+01:00'":   true,
		"CloseTime > '2000-01-01T00:00:00Z'":     false, // no value
		"NOT CloseTime > '2000-01-01T00:00:00Z'": true,
		"ParentFlowId != 'x'":                    false,
		"`order-id` != 'x'":                      false,
	} {
		pq, err := Parse(q, testSchema)
		if err != nil {
			t.Fatalf("Parse(%q): %v", q, err)
		}
		if got := pq.Match(r); got != want {
			t.Errorf("%q matched %v, want %v", q, got, want)
		}
	}
}

// Covers: E36
func TestFromJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		t    Type
		in   string
		want string // values joined by |, or "error"
	}{
		{Keyword, `"a b"`, "a b"},
		{Keyword, `null`, ""},
		{Keyword, `12`, "error"},
		{KeywordArray, `["x","y","x",null]`, "x|y"},
		{KeywordArray, `[]`, ""},
		{KeywordArray, `"x"`, "error"},
		{Text, `"Hello, hello World"`, "hello|world"},
		{Int, `-12`, "-12"},
		{Int, `1.5`, "error"},
		{Int, `99999999999999999999`, "error"},
		{Double, `1.25`, "1.25"},
		{Double, `"1"`, "error"},
		{Bool, `false`, "false"},
		{Bool, `0`, "error"},
		{Datetime, `"2026-11-01T01:00:00+01:00"`, "2026-11-01T00:00:00Z"},
		{Datetime, `"tomorrow"`, "error"},
	} {
		vals, err := FromJSON(tc.t, []byte(tc.in))
		got := ""
		if err != nil {
			got = "error"
		} else {
			s := make([]string, len(vals))
			for i, v := range vals {
				s[i] = v.String()
			}
			got = strings.Join(s, "|")
		}
		if got != tc.want {
			t.Errorf("FromJSON(%s, %s) = %q (%v), want %q", tc.t, tc.in, got, err, tc.want)
		}
	}
}

// FuzzParse: Parse never panics, an error is always an *Error with a
// position within the query, and a parsed filter prints as a query that
// parses to the same filter.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"FlowType = 'order' AND OrderStatus = 'charged' AND StartTime > '2026-11-01T00:00:00Z' ORDER BY StartTime DESC",
		"NOT (Amount IN (1, 2) OR Paid = TRUE) AND Notes != 'x y'",
		"Tags IN ('a') AND `order-id` STARTS_WITH 'x' AND Score BETWEEN -1.5 AND 2e3",
		"Status NOT IN ('RUNNING') ORDER BY Amount ASC", "(", "'", "`", "Amount = ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s, testSchema)
		if err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				t.Fatalf("Parse(%q): %T %v, want *Error", s, err, err)
			}
			if qe.Pos < 0 || qe.Pos > len(s) {
				t.Fatalf("Parse(%q): position %d outside the query", s, qe.Pos)
			}
			return
		}
		text := String(q.Where)
		q2, err := Parse(text, testSchema)
		if err != nil {
			t.Fatalf("Parse(%q) printed %q, which does not parse: %v", s, text, err)
		}
		if again := String(q2.Where); again != text {
			t.Fatalf("Parse(%q) printed %q, which prints as %q", s, text, again)
		}
	})
}
