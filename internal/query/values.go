package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// FromJSON converts an indexed attribute's JSON value to the values of
// its index type: a JSON string for KEYWORD (one value), TEXT (its
// tokens) and DATETIME (RFC 3339), an array of strings for KEYWORD_ARRAY
// (its distinct elements), an integer for INT, a finite number for DOUBLE,
// true or false for BOOL. JSON null, and an empty array, are no value.
// Anything else is an error saying what the type takes.
func FromJSON(t Type, data []byte) ([]Value, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("a %s value must be JSON", t)
	}
	if bytes.Equal(data, []byte("null")) {
		return nil, nil
	}
	switch t {
	case Keyword, Text, Datetime:
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("a %s value must be a JSON string", t)
		}
		switch t {
		case Keyword:
			return []Value{{Type: Keyword, Str: s}}, nil
		case Text:
			toks := Tokens(s)
			out := make([]Value, len(toks))
			for i, tok := range toks {
				out[i] = Value{Type: Text, Str: tok}
			}
			return out, nil
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, fmt.Errorf("a DATETIME value must be an RFC 3339 time: %q", s)
		}
		return []Value{{Type: Datetime, Time: tm.UTC()}}, nil
	case KeywordArray:
		var ss []*string
		if err := json.Unmarshal(data, &ss); err != nil {
			return nil, fmt.Errorf("a KEYWORD_ARRAY value must be a JSON array of strings")
		}
		var out []Value
		seen := map[string]bool{}
		for _, s := range ss {
			if s == nil || seen[*s] {
				continue
			}
			seen[*s] = true
			out = append(out, Value{Type: KeywordArray, Str: *s})
		}
		return out, nil
	case Int:
		var n json.Number
		if err := json.Unmarshal(data, &n); err != nil || data[0] == '"' {
			return nil, fmt.Errorf("an INT value must be a JSON integer")
		}
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("an INT value must be an integer within 64 bits: %s", n)
		}
		return []Value{{Type: Int, Int: i}}, nil
	case Double:
		var n json.Number
		if err := json.Unmarshal(data, &n); err != nil || data[0] == '"' {
			return nil, fmt.Errorf("a DOUBLE value must be a JSON number")
		}
		f, err := strconv.ParseFloat(n.String(), 64)
		if err != nil || !finite(f) {
			return nil, fmt.Errorf("a DOUBLE value must be a finite number within 64 bits: %s", n)
		}
		return []Value{{Type: Double, Float: f}}, nil
	case Bool:
		var b bool
		if err := json.Unmarshal(data, &b); err != nil {
			return nil, fmt.Errorf("a BOOL value must be true or false")
		}
		return []Value{{Type: Bool, Bool: b}}, nil
	}
	return nil, fmt.Errorf("unknown index type %q", t)
}
