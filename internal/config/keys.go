package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

var durationType = reflect.TypeFor[time.Duration]()

// checkKeys walks the parsed document against the Config type before it is
// decoded: it rejects unknown keys by their dotted path (a typo must never
// run silently on a default), checks duration strings with the key in the
// message, and records the paths the document sets.
func checkKeys(root *yaml.Node, c *Config, set map[string]bool) error {
	n := root
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	if n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return nil
	}
	return walk(n, reflect.TypeOf(c).Elem(), "", set)
}

func walk(n *yaml.Node, t reflect.Type, prefix string, set map[string]bool) error {
	where := prefix
	if where == "" {
		where = "the configuration"
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s must be a mapping of keys", n.Line, where)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := k.Value
		if prefix != "" {
			path = prefix + "." + k.Value
		}
		f, ok := fieldByKey(t, k.Value)
		if !ok {
			return fmt.Errorf("line %d: unknown configuration key %q%s", k.Line, path, suggest(t, k.Value))
		}
		set[path] = true
		switch {
		case f.Type == durationType:
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				return fmt.Errorf("line %d: %s must be a duration such as \"10s\" or \"250ms\"", v.Line, path)
			}
			if _, err := time.ParseDuration(v.Value); err != nil {
				return fmt.Errorf("line %d: %s: %q is not a duration such as \"10s\" or \"250ms\"", v.Line, path, v.Value)
			}
		case f.Type.Kind() == reflect.Struct:
			if err := walk(v, f.Type, path, set); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldByKey finds the exported field of t whose yaml key is key.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// suggest names a known key that differs from key only in case, the most
// common typo ("nodeID" for "nodeId").
func suggest(t reflect.Type, key string) string {
	var known []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.EqualFold(name, key) {
			return fmt.Sprintf(" (did you mean %q?)", name)
		}
		known = append(known, name)
	}
	return fmt.Sprintf(" (known keys here: %s)", strings.Join(known, ", "))
}
