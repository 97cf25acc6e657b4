package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The seeds of the differential fuzz tests: the grammar's corners.
var jsonSeeds = []string{
	``, ` `, `null`, ` true `, `false`, `tru`, `nul`, `truex`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e`, `1e+`,
	`1E-7`, `-12.5e+3`, `18446744073709551616`, `"a"`, `"`, `"\"`, `"\u00e9"`, `"\u00g9"`, `"\x"`, `"a\tb"`,
	"\"a\tb\"", "\"\x00\"", "\"\xff\xfe\"", `"\/\b\f\n\r\t"`, `[]`, `[ ]`, `[1,]`, `[,1]`, `[1 2]`, `{}`, `{ }`,
	`{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":[1,2,{"b":"c"}]}`, `[1.5,-2,"x",true,null]`,
	`{"A":{"a":1}}`, "\ufeff1", `"abcdefghijklmnop\u0041qrstuvwx"`, "\"abcdefghijk\x01lmnopqrs\"",
	"\"abcdefg\xc3\xa9hijklmnop\"", `"abcdefghijklmnopq\"`, `"abcdefgh\"ijklmnop"`, `{"abcdefghij":"klmnopqrstu\nvwxyz"}`, "1\x00", `1 2`, `[[[[]]]]`, `[[[[]]]`, "{\"\xff\":1}", `{"\u0041":true}`,
}

// ValidJSON accepts exactly what json.Valid accepts.
func FuzzValidJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := ValidJSON(data), json.Valid(data); got != want {
			t.Fatalf("ValidJSON(%q) = %t, json.Valid says %t", data, got, want)
		}
	})
}

// encoding/json refuses nesting deeper than 10,000 levels; so does ValidJSON.
func TestValidJSON_NestingLimitIsEncodingJSONs(t *testing.T) {
	for _, depth := range []int{maxJSONDepth - 1, maxJSONDepth, maxJSONDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			closing := "]"
			if open != "[" {
				closing = "}"
			}
			data := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(closing, depth))
			if got, want := ValidJSON(data), json.Valid(data); got != want {
				t.Errorf("depth %d of %q: ValidJSON %t, json.Valid %t", depth, open, got, want)
			}
		}
	}
}

// Check answers as the encoding/json Decoder-based check it replaced
// (oracleCheck) for every shape and value: the same error text or none.
func FuzzCheckShape(f *testing.F) {
	shapes := []string{`{"a":[u8],"b":{:n32},"c":s,"d":b,"e":*}`, `[[i16]]`, `{:*}`, `n`, `i`, `u16`, `s`, `b`, `[*]`, `{"ä":i8,"A":s}`}
	for i, s := range jsonSeeds {
		f.Add(shapes[i%len(shapes)], []byte(s))
	}
	for _, s := range shapes {
		f.Add(s, []byte(`{"a":[1,300],"b":{"x":1e40},"c":"s","d":true,"e":[{}]}`))
		f.Add(s, []byte(`[[1,2],[3,70000]]`))
		f.Add(s, []byte(`{"\u00e4":1.5,"a":"x"}`))
	}
	f.Fuzz(func(t *testing.T, shape string, data []byte) {
		if _, err := ParseShape(shape); err != nil {
			return
		}
		vt := &ValueType{Encoding: "json", Type: "t", Shape: shape}
		v := Value{Type: "json:t", Data: data}
		got, want := vt.Check(v), oracleCheck(vt, v)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("shape %s, value %q:\n got %v\nwant %v", shape, data, got, want)
		}
	})
}

// BenchmarkValidJSON reads a 4 MiB JSON string (a large input's usual
// form, base64 or text) and a 1 MiB array of numbers.
func BenchmarkValidJSON(b *testing.B) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"string-4MiB", []byte(`"` + strings.Repeat("abcdefghij", 4<<20/10) + `"`)},
		{"numbers-1MiB", []byte("[" + strings.Repeat("123456.5,", 1<<20/9) + "1]")},
	} {
		b.Run(tc.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(tc.data)))
			for b.Loop() {
				if !json.Valid(tc.data) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(tc.name+"/engine", func(b *testing.B) {
			b.SetBytes(int64(len(tc.data)))
			for b.Loop() {
				if !ValidJSON(tc.data) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// oracleCheck is ValueType.Check as it was before scanJSON: json.Valid,
// then a match over encoding/json's Decoder tokens.
func oracleCheck(vt *ValueType, v Value) error {
	if vt.Shape == "" || vt.Shape == "*" {
		return nil
	}
	shape, err := ParseShape(vt.Shape)
	if err != nil {
		return nil
	}
	if !json.Valid(v.Data) {
		return errors.New("the value is not valid JSON")
	}
	dec := json.NewDecoder(strings.NewReader(string(v.Data)))
	dec.UseNumber()
	if err := shape.oracleMatch(dec, ""); err != nil {
		var m *shapeMismatch
		if errors.As(err, &m) {
			return fmt.Errorf("the value does not decode as the declared type %s: %w", vt.describe(), m)
		}
		return fmt.Errorf("the value is not valid JSON: %w", err)
	}
	return nil
}

// oracleMatch reads one JSON value from dec and checks it against s (nil: any).
func (s *JSONShape) oracleMatch(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil // null decodes as anything
	}
	if s == nil || s.Kind == JSONAny {
		return oracleSkip(dec, tok)
	}
	mismatch := func(want string) error { return &shapeMismatch{path: path, got: oracleDescribe(tok), want: want} }
	switch s.Kind {
	case JSONBoolean:
		if _, ok := tok.(bool); !ok {
			return mismatch("a boolean")
		}
	case JSONString:
		if _, ok := tok.(string); !ok {
			return mismatch("a string")
		}
	case JSONNumber:
		n, ok := tok.(json.Number)
		if !ok {
			return mismatch("a number")
		}
		if _, err := strconv.ParseFloat(string(n), bitsOr64(s.Bits)); err != nil {
			return mismatch(fmt.Sprintf("a %d-bit float", bitsOr64(s.Bits)))
		}
	case JSONInteger:
		n, ok := tok.(json.Number)
		if !ok {
			return mismatch("an integer")
		}
		if s.Unsigned {
			_, err = strconv.ParseUint(string(n), 10, bitsOr64(s.Bits))
		} else {
			_, err = strconv.ParseInt(string(n), 10, bitsOr64(s.Bits))
		}
		if err != nil {
			sign := ""
			if s.Unsigned {
				sign = "un"
			}
			return mismatch(fmt.Sprintf("an integer (%ssigned, %d bits)", sign, bitsOr64(s.Bits)))
		}
	case JSONArray:
		if tok != json.Delim('[') {
			return mismatch("an array")
		}
		for i := 0; dec.More(); i++ {
			if err := s.Elements.oracleMatch(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	case JSONObject:
		if tok != json.Delim('{') {
			return mismatch("an object")
		}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			sub := s.Elements
			if s.Fields != nil {
				sub = s.field(key)
			}
			if err := sub.oracleMatch(dec, path+"."+key); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
		return err
	}
	return nil
}

// oracleSkip reads the rest of the value that tok starts.
func oracleSkip(dec *json.Decoder, tok json.Token) error {
	if tok != json.Delim('{') && tok != json.Delim('[') {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

func oracleDescribe(tok json.Token) string {
	switch t := tok.(type) {
	case bool:
		return fmt.Sprintf("the boolean %t", t)
	case json.Number:
		return "the number " + string(t)
	case string:
		return "a string"
	case json.Delim:
		if t == '{' {
			return "an object"
		}
		return "an array"
	}
	return "a value"
}
