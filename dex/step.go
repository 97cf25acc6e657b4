package dex

import (
	"fmt"
	"reflect"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Step declares a step's input type. A step is a Go type that embeds
// dex.Step[T] and has an Execute method; its step type (the name the server
// knows it by) is the Go type's name:
//
//	// A step without a WaitFor goes straight to Execute.
//	type Reserve struct{ dex.Step[Order] }
//
//	func (Reserve) Execute(ctx dex.Context, o Order) (dex.Decision, error)
//
//	// A step with a WaitFor: its Execute also takes the Wait's Results.
//	type AwaitApproval struct{ dex.Step[Order] }
//
//	func (AwaitApproval) WaitFor(ctx dex.Context, o Order) (dex.Wait, error)
//	func (AwaitApproval) Execute(ctx dex.Context, o Order, r dex.Results) (dex.Decision, error)
//
// A step may also have an Options() dex.StepOptions method (its own options,
// the second level of option resolution) and a MovesTo() []dex.StepRef method (the steps
// its Execute may move to; the worker checks at start that the flow declares
// them, and at run time that Execute keeps to them).
//
// Step fields may hold the step's dependencies (clients, configuration): the
// worker calls the methods on the value given to Flow.Start or Flow.Steps.
// A step with pointer-receiver methods must be registered as a pointer.
type Step[T any] struct{}

// StepType is any step type: a type that embeds Step[T].
type StepType interface {
	bindStep(self any) (*stepDef, error)
}

// StepWithInput is a step type whose input is T, as To requires.
type StepWithInput[T any] interface {
	StepType
	stepInput(T)
}

func (Step[T]) stepInput(T) {}

// The handler forms a step may have.
type (
	stepWaitFor[T any] interface {
		WaitFor(ctx Context, in T) (Wait, error)
	}
	stepExecuteResults[T any] interface {
		Execute(ctx Context, in T, r Results) (Decision, error)
	}
	stepExecute[T any] interface {
		Execute(ctx Context, in T) (Decision, error)
	}
	stepOptioner interface{ Options() StepOptions }
	stepMover    interface{ MovesTo() []StepRef }
)

// stepDef is a bound step: its name, declaration and type-erased handlers.
type stepDef struct {
	name      string
	goType    reflect.Type
	inputType reflect.Type
	waits     bool
	options   StepOptions
	movesTo   []StepRef // nil when the step does not declare them
	declares  bool      // MovesTo is implemented
	waitFor   func(ctx Context, in *dexpb.EncodedValue) (Wait, error)
	execute   func(ctx Context, in *dexpb.EncodedValue, r Results) (Decision, error)
	// The entries of the step's WaitFor and Execute methods, for the
	// stack of an error they return (handlerFrame).
	waitForPC, executePC uintptr
}

func (Step[T]) bindStep(self any) (*stepDef, error) {
	t := reflect.TypeOf(self)
	name, err := stepName(t)
	if err != nil {
		return nil, err
	}
	d := &stepDef{name: name, goType: t, inputType: reflect.TypeFor[T]()}
	in := d.inputType.String()
	w, hasWait := self.(stepWaitFor[T])
	er, hasER := self.(stepExecuteResults[T])
	ep, hasEP := self.(stepExecute[T])
	switch {
	case hasWait && hasER:
		d.waits = true
		d.waitFor = func(ctx Context, ev *dexpb.EncodedValue) (Wait, error) {
			v, err := decodeValue[T](ev)
			if err != nil {
				return nil, &decodeError{what: "input", err: err}
			}
			return w.WaitFor(ctx, v)
		}
		d.execute = func(ctx Context, ev *dexpb.EncodedValue, r Results) (Decision, error) {
			v, err := decodeValue[T](ev)
			if err != nil {
				return nil, &decodeError{what: "input", err: err}
			}
			return er.Execute(ctx, v, r)
		}
	case hasWait:
		return nil, fmt.Errorf("step %q has a WaitFor, so its Execute must be Execute(dex.Context, %s, dex.Results) (dex.Decision, error)", name, in)
	case hasER:
		return nil, fmt.Errorf("step %q: Execute takes dex.Results but the step has no method WaitFor(dex.Context, %s) (dex.Wait, error)%s", name, in, methodHint(t, "WaitFor"))
	case hasEP:
		if _, ok := t.MethodByName("WaitFor"); ok {
			return nil, fmt.Errorf("step %q: method WaitFor does not have the signature WaitFor(dex.Context, %s) (dex.Wait, error)", name, in)
		}
		d.execute = func(ctx Context, ev *dexpb.EncodedValue, _ Results) (Decision, error) {
			v, err := decodeValue[T](ev)
			if err != nil {
				return nil, &decodeError{what: "input", err: err}
			}
			return ep.Execute(ctx, v)
		}
	default:
		return nil, fmt.Errorf("step %q has no method Execute(dex.Context, %s) (dex.Decision, error)%s", name, in, methodHint(t, "Execute"))
	}
	if d.waits {
		d.waitForPC = methodPC(t, "WaitFor")
	}
	d.executePC = methodPC(t, "Execute")
	if o, ok := self.(stepOptioner); ok {
		d.options = o.Options()
	}
	if m, ok := self.(stepMover); ok {
		d.declares = true
		d.movesTo = m.MovesTo()
	}
	return d, nil
}

// methodHint explains a missing method: a pointer receiver, or a signature
// that does not match.
func methodHint(t reflect.Type, method string) string {
	if _, ok := t.MethodByName(method); ok {
		return " (the method " + method + " it has does not match)"
	}
	if t.Kind() != reflect.Pointer {
		if _, ok := reflect.PointerTo(t).MethodByName(method); ok {
			return fmt.Sprintf(" (%s has a pointer receiver: register &%s{})", method, t.Name())
		}
	}
	return ""
}

// stepName is the step type of a Go type: its name, without a pointer.
func stepName(t reflect.Type) (string, error) {
	if t == nil {
		return "", fmt.Errorf("nil step")
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" {
		return "", fmt.Errorf("step of unnamed type %s: a step must be a named type", t)
	}
	return t.Name(), nil
}

// stepNameFor is the step type of S.
func stepNameFor[S any]() string {
	name, err := stepName(reflect.TypeFor[S]())
	if err != nil {
		return ""
	}
	return name
}
