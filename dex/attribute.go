package dex

import (
	"fmt"
	"reflect"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Attribute is a named, typed, durable value of a flow execution.
// Declare it once at package level with DefineAttribute and list it in the
// flow's Attributes.
type Attribute[T any] struct {
	name string
	opts attrOptions
}

// DefineAttribute declares an attribute of type T. Its values travel as
// JSON. Indexed makes it searchable (Client.Search).
func DefineAttribute[T any](name string, opts ...AttributeOption) Attribute[T] {
	a := Attribute[T]{name: name}
	for _, o := range opts {
		o.applyAttribute(&a.opts)
	}
	return a
}

// AttributeDef is any Attribute[T], as Flow.Attributes takes them.
type AttributeDef interface {
	// Name is the attribute's name.
	Name() string
	// attributeDef is the type of the values, which the worker declares.
	attributeDef() reflect.Type
	// attributeOptions are its options (Indexed).
	attributeOptions() attrOptions
}

// Name is the attribute's name.
func (a Attribute[T]) Name() string { return a.name }

func (Attribute[T]) attributeDef() reflect.Type { return reflect.TypeFor[T]() }

func (a Attribute[T]) attributeOptions() attrOptions { return a.opts }

// Get returns the attribute's value as the handler sees it: the value the
// handler last Set, else the value handed out with the task, else T's zero
// value. It fails only when the stored value does not decode as T.
func (a Attribute[T]) Get(ctx Context) (T, error) {
	v, _, err := a.lookup(ctx)
	return v, err
}

func (a Attribute[T]) lookup(ctx Context) (v T, ok bool, err error) {
	ev := ctx.state().attribute(a.name)
	if ev == nil {
		return v, false, nil
	}
	v, err = decodeValue[T](ev)
	if err != nil {
		return v, true, fmt.Errorf("attribute %q: %w", a.name, err)
	}
	return v, true, nil
}

// Set stages a write of the attribute. It commits atomically with the
// handler's result; a later Set of the same attribute wins. When the
// value cannot be encoded, or the flow does not declare the attribute, the
// attempt fails once the handler returns.
func (a Attribute[T]) Set(ctx Context, v T) {
	ev, err := encodeValue(v)
	ctx.state().setAttribute(a.name, ev, err)
}

// Value pairs the attribute with a value, for Client.SetAttributes and
// WithAttributes at start.
func (a Attribute[T]) Value(v T) AttributeValue {
	ev, err := encodeValue(v)
	return AttributeValue{name: a.name, ev: ev, err: err, indexed: a.opts.indexed}
}

// AttributeValue is an attribute name with an encoded value.
type AttributeValue struct {
	name    string
	ev      *dexpb.EncodedValue
	err     error
	indexed bool // the value travels in plaintext, whatever the codec
}

// Name is the attribute's name.
func (v AttributeValue) Name() string { return v.name }

func (v AttributeValue) proto() (*dexpb.Attribute, error) {
	if v.err != nil {
		return nil, fmt.Errorf("attribute %q: %w", v.name, v.err)
	}
	return &dexpb.Attribute{Name: v.name, Value: v.ev}, nil
}

func attributesProto(vals []AttributeValue) ([]*dexpb.Attribute, error) {
	out := make([]*dexpb.Attribute, 0, len(vals))
	for _, v := range vals {
		a, err := v.proto()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
