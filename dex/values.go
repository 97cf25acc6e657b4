package dex

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/dexzd/dexzd/api/dexpb"
)

// EncodingJSON is the encoding the SDK writes for every user value: UTF-8
// JSON text (EncodedValue.encoding "json"), with EncodedValue.type set to the
// Go type, for example "flows.Order".
const EncodingJSON = "json"

// Value is a user value as the server stores it: encoded bytes plus the name
// of their encoding and type. Values that the SDK cannot type statically (flow
// outputs, the outputs in a FlowResult) are handed out as Values; Decode turns
// them into Go values.
type Value struct {
	ev *dexpb.EncodedValue
}

// valueOf wraps an EncodedValue of the API; nil means "no value".
func valueOf(ev *dexpb.EncodedValue) Value { return Value{ev: ev} }

// IsSet reports whether there is a value. An unset value is different from an
// encoded JSON null.
func (v Value) IsSet() bool { return v.ev != nil }

// Encoding is the value's encoding ("json" for values the Go SDK wrote).
func (v Value) Encoding() string { return v.ev.GetEncoding() }

// Type is the value's type name as its writer recorded it, for example
// "flows.Receipt".
func (v Value) Type() string { return v.ev.GetType() }

// Data is the encoded bytes.
func (v Value) Data() []byte { return v.ev.GetData() }

// Decode decodes the value into ptr, like json.Unmarshal. An unset value
// leaves *ptr unchanged and returns ErrNoValue.
func (v Value) Decode(ptr any) error {
	if v.ev == nil {
		return ErrNoValue
	}
	if err := checkEncoding(v.ev); err != nil {
		return err
	}
	if err := json.Unmarshal(v.ev.GetData(), ptr); err != nil {
		return fmt.Errorf("decode %s value: %w", describeType(v.ev), err)
	}
	return nil
}

// String renders the value for logs: the JSON text for "json" values.
func (v Value) String() string {
	switch {
	case v.ev == nil:
		return "<unset>"
	case v.ev.GetEncoding() == EncodingJSON:
		return string(v.ev.GetData())
	default:
		return fmt.Sprintf("<%s %d bytes>", v.ev.GetEncoding(), len(v.ev.GetData()))
	}
}

// typeName is the Go type of T ("flows.Order"), or of v when T is an
// interface type.
func typeName[T any](v T) string {
	t := reflect.TypeFor[T]()
	if t.Kind() == reflect.Interface {
		dt := reflect.TypeOf(v)
		if dt == nil {
			return ""
		}
		return dt.String()
	}
	return t.String()
}

// encodeValue encodes v as JSON.
func encodeValue[T any](v T) (*dexpb.EncodedValue, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s as JSON: %w", typeName(v), err)
	}
	return &dexpb.EncodedValue{Encoding: EncodingJSON, Type: typeName(v), Data: data}, nil
}

// encodeAny encodes v as JSON; nil means "no value" (an unset EncodedValue).
func encodeAny(v any) (*dexpb.EncodedValue, error) {
	if v == nil {
		return nil, nil
	}
	return encodeValue(v)
}

// decodeValue decodes ev into a T. An unset value decodes to T's zero value.
func decodeValue[T any](ev *dexpb.EncodedValue) (T, error) {
	var v T
	if ev == nil {
		return v, nil
	}
	if err := checkEncoding(ev); err != nil {
		return v, err
	}
	if err := json.Unmarshal(ev.GetData(), &v); err != nil {
		return v, fmt.Errorf("decode %s value as %s: %w", describeType(ev), reflect.TypeFor[T](), err)
	}
	return v, nil
}

func checkEncoding(ev *dexpb.EncodedValue) error {
	if ev.GetEncoding() == EncodingAESGCM {
		return fmt.Errorf("value has encoding %q: an AESGCMCodec encrypted it; set ClientOptions.Codec or WorkerOptions.Codec to a codec with its key", ev.GetEncoding())
	}
	if ev.GetEncoding() != EncodingJSON {
		return fmt.Errorf("value of type %q has encoding %q; the Go SDK decodes %q only", ev.GetType(), ev.GetEncoding(), EncodingJSON)
	}
	return nil
}

func describeType(ev *dexpb.EncodedValue) string {
	if ev.GetType() == "" {
		return "untyped"
	}
	return fmt.Sprintf("%q", ev.GetType())
}
