package flowcmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// namedJSON is one name=JSON pair of --attr or set-attrs.
type namedJSON struct {
	name  string
	value []byte
}

// namedJSONList is a repeatable flag of name=JSON pairs.
type namedJSONList []namedJSON

func (l *namedJSONList) String() string {
	if l == nil {
		return ""
	}
	names := make([]string, len(*l))
	for i, p := range *l {
		names[i] = p.name
	}
	return strings.Join(names, ",")
}

func (l *namedJSONList) Set(s string) error {
	p, err := parseNamedJSON(s)
	if err != nil {
		return err
	}
	*l = append(*l, p)
	return nil
}

// parseNamedJSON parses "name=JSON".
func parseNamedJSON(s string) (namedJSON, error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return namedJSON{}, fmt.Errorf("%q is not name=JSON", s)
	}
	v, err := parseJSONArg(value)
	if err != nil {
		return namedJSON{}, fmt.Errorf("value of %q: %w", name, err)
	}
	return namedJSON{name: strings.TrimSpace(name), value: v}, nil
}

// parseJSONArg checks that s is one JSON value and returns it compacted.
func parseJSONArg(s string) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(strings.TrimSpace(s))); err != nil {
		return nil, fmt.Errorf("not valid JSON (%w); quote strings, e.g. '\"text\"'", err)
	}
	return buf.Bytes(), nil
}

var _ pflag.Value = (*namedJSONList)(nil)

// Type names the value in help when the usage names none.
func (l *namedJSONList) Type() string { return "name=JSON" }
