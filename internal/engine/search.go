package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// IndexType is the type of an indexed attribute (E36). Package query
// holds the same names and evaluates them; the local store keeps the
// indexes.
type IndexType string

// The index types (E36).
const (
	IndexKeyword      IndexType = "KEYWORD"
	IndexKeywordArray IndexType = "KEYWORD_ARRAY"
	IndexText         IndexType = "TEXT"
	IndexInt          IndexType = "INT"
	IndexDouble       IndexType = "DOUBLE"
	IndexBool         IndexType = "BOOL"
	IndexDatetime     IndexType = "DATETIME"
)

// IndexedAttribute declares one attribute of a flow type indexed for
// SearchFlows (E36): the index key it is found under (global across flow
// types) and its type.
type IndexedAttribute struct {
	Key  string    `json:"key"`
	Type IndexType `json:"type"`
}

// MaxIndexedValueBytes is the largest value an indexed attribute takes
// (E28): the index keeps it in every entry's key, and the run's header
// keeps it whole.
const MaxIndexedValueBytes = 4 << 10

// checkIndexedValue refuses a write of an indexed attribute whose value
// the index cannot read: not plain JSON (a Codec must leave indexed
// attributes plaintext), too large, or not of the index type's JSON form.
// The rules are those of query.FromJSON, which the local store applies.
func checkIndexedValue(ia IndexedAttribute, v Value) error {
	if v.IsZero() {
		return nil
	}
	enc, _, _ := strings.Cut(v.Type, ":")
	if enc != "json" {
		return fmt.Errorf("indexed as %s under %q: the value's encoding is %q, an indexed attribute takes plain \"json\" (a codec leaves it unencoded)", ia.Type, ia.Key, enc)
	}
	if v.Len() > MaxIndexedValueBytes {
		return fmt.Errorf("indexed as %s under %q: the value has %d bytes, at most %d", ia.Type, ia.Key, v.Len(), MaxIndexedValueBytes)
	}
	if v.Data == nil {
		return nil // a value object: checked when it arrived
	}
	if err := indexJSONForm(ia.Type, v.Data); err != nil {
		return fmt.Errorf("indexed as %s under %q: %w", ia.Type, ia.Key, err)
	}
	return nil
}

// indexJSONForm checks that data is JSON of t's form (null is no value).
func indexJSONForm(t IndexType, data []byte) error {
	for len(data) > 0 && isJSONSpace(data[0]) {
		data = data[1:]
	}
	for len(data) > 0 && isJSONSpace(data[len(data)-1]) {
		data = data[:len(data)-1]
	}
	if string(data) == "null" {
		return nil
	}
	var err error
	switch t {
	case IndexKeyword, IndexText:
		var s string
		if json.Unmarshal(data, &s) != nil {
			err = fmt.Errorf("a %s value must be a JSON string", t)
		}
	case IndexDatetime:
		var s string
		if json.Unmarshal(data, &s) != nil {
			err = fmt.Errorf("a DATETIME value must be a JSON string")
		} else if _, perr := time.Parse(time.RFC3339Nano, s); perr != nil {
			err = fmt.Errorf("a DATETIME value must be an RFC 3339 time: %q", s)
		}
	case IndexKeywordArray:
		var ss []*string
		if json.Unmarshal(data, &ss) != nil {
			err = fmt.Errorf("a KEYWORD_ARRAY value must be a JSON array of strings")
		}
	case IndexInt:
		if len(data) == 0 || data[0] == '"' {
			return fmt.Errorf("an INT value must be a JSON integer")
		}
		var n json.Number
		if json.Unmarshal(data, &n) != nil {
			err = fmt.Errorf("an INT value must be a JSON integer")
		} else if _, perr := strconv.ParseInt(n.String(), 10, 64); perr != nil {
			err = fmt.Errorf("an INT value must be an integer within 64 bits: %s", n)
		}
	case IndexDouble:
		if len(data) == 0 || data[0] == '"' {
			return fmt.Errorf("a DOUBLE value must be a JSON number")
		}
		var n json.Number
		if json.Unmarshal(data, &n) != nil {
			err = fmt.Errorf("a DOUBLE value must be a JSON number")
		} else if f, perr := strconv.ParseFloat(n.String(), 64); perr != nil || math.IsInf(f, 0) {
			err = fmt.Errorf("a DOUBLE value must be a finite number within 64 bits: %s", n)
		}
	case IndexBool:
		var b bool
		if json.Unmarshal(data, &b) != nil {
			err = fmt.Errorf("a BOOL value must be true or false")
		}
	default:
		err = fmt.Errorf("unknown index type %q", t)
	}
	return err
}

// indexed returns the index declaration of attribute name, if any.
func (d *decider) indexed(name string) (IndexedAttribute, bool) {
	if d.st.Definition == nil {
		return IndexedAttribute{}, false
	}
	ia, ok := d.st.Definition.Indexed[name]
	return ia, ok
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
