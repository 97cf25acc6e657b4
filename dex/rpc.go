package dex

import (
	"reflect"

	"github.com/dexzd/dexzd/api/dexpb"
)

// RPC is a named, typed RPC of a flow type: the worker runs its handler
// with the flow execution's attributes; the handler returns an output and may
// stage attribute writes, channel publishes and movements (Schedule), which
// commit atomically with the output. An RPC error goes back to the caller
// and does not fail the flow.
type RPC[I, O any] struct {
	name string
	fn   func(ctx Context, in I) (O, error)
}

// DefineRPC declares an RPC; list it in the flow's RPCs. Clients call it with
// InvokeRPC, which checks the input and output types at compile time. A
// client-only declaration may pass a nil handler.
func DefineRPC[I, O any](name string, fn func(ctx Context, in I) (O, error)) RPC[I, O] {
	return RPC[I, O]{name: name, fn: fn}
}

// RPCDef is any RPC[I, O], as Flow.RPCs takes them.
type RPCDef interface {
	// Name is the RPC's name.
	Name() string
	bindRPC() *rpcDef
}

// Name is the RPC's name.
func (r RPC[I, O]) Name() string { return r.name }

type rpcDef struct {
	name      string
	inputType reflect.Type
	nilFn     bool
	fnPC      uintptr // the handler's entry, for the stack of its error
	call      func(ctx Context, in *dexpb.EncodedValue) (*dexpb.EncodedValue, error)
}

func (r RPC[I, O]) bindRPC() *rpcDef {
	var pc uintptr
	if r.fn != nil {
		pc = reflect.ValueOf(r.fn).Pointer()
	}
	return &rpcDef{
		name:      r.name,
		inputType: reflect.TypeFor[I](),
		nilFn:     r.fn == nil,
		fnPC:      pc,
		call: func(ctx Context, ev *dexpb.EncodedValue) (*dexpb.EncodedValue, error) {
			in, err := decodeValue[I](ev)
			if err != nil {
				return nil, &decodeError{what: "input", err: err}
			}
			out, err := r.fn(ctx, in)
			if err != nil {
				return nil, err
			}
			enc, err := encodeValue(out)
			if err != nil {
				return nil, &encodeError{what: "output", err: err}
			}
			return enc, nil
		},
	}
}
