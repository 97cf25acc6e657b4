package dex

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Flow is a flow type's definition: its steps (one of them optionally the
// start step), attributes, channels, RPCs and default step options. Build it
// once, at package level, with NewFlow; workers serve it and clients start
// it:
//
//	var OrderFlow = dex.NewFlow("order").
//		Start(Reserve{}).
//		Steps(Charge{}, Ship{}, Refund{}).
//		Attributes(Status).
//		Channels(Approve).
//		RPCs(StatusRPC)
//
// The builder methods record mistakes instead of panicking; Validate (and
// NewWorker, which calls it) reports them all, naming the flow and the step.
type Flow struct {
	name     string
	start    string
	steps    []*stepDef
	attrs    []AttributeDef
	chans    []ChannelDef
	rpcs     []RPCDef
	defaults StepOptions
	errs     []error
}

// NewFlow starts the definition of flow type name.
func NewFlow(name string) *Flow { return &Flow{name: name} }

// Name is the flow type's name.
func (f *Flow) Name() string { return f.name }

// Start sets the start step: StartFlow schedules it with the flow's input.
// A flow without a start step is driven by RPCs. The start step is
// declared with the other steps; listing it in Steps too is harmless.
func (f *Flow) Start(s StepType) *Flow {
	if f.start != "" {
		f.errs = append(f.errs, fmt.Errorf("start step set twice (%q, then another)", f.start))
		return f
	}
	if d := f.addStep(s); d != nil {
		f.start = d.name
	}
	return f
}

// Steps declares the flow's steps.
func (f *Flow) Steps(steps ...StepType) *Flow {
	for _, s := range steps {
		f.addStep(s)
	}
	return f
}

func (f *Flow) addStep(s StepType) *stepDef {
	if s == nil {
		f.errs = append(f.errs, errors.New("nil step"))
		return nil
	}
	d, err := s.bindStep(s)
	if err != nil {
		f.errs = append(f.errs, err)
		return nil
	}
	for _, old := range f.steps {
		if old.name != d.name {
			continue
		}
		if old.goType != d.goType && old.goType != reflect.PointerTo(d.goType) && reflect.PointerTo(old.goType) != d.goType {
			f.errs = append(f.errs, fmt.Errorf("step %q: two step types have this name (%s and %s)", d.name, old.goType, d.goType))
		}
		return old
	}
	f.steps = append(f.steps, d)
	return d
}

// Attributes declares the flow's attributes.
func (f *Flow) Attributes(attrs ...AttributeDef) *Flow {
	f.attrs = append(f.attrs, attrs...)
	return f
}

// Channels declares the flow's channels.
func (f *Flow) Channels(chans ...ChannelDef) *Flow {
	f.chans = append(f.chans, chans...)
	return f
}

// RPCs declares the flow's RPCs.
func (f *Flow) RPCs(rpcs ...RPCDef) *Flow {
	f.rpcs = append(f.rpcs, rpcs...)
	return f
}

// Defaults sets the flow's options for all its steps (the third level of
// option resolution, after a movement's and the step's own options).
func (f *Flow) Defaults(o StepOptions) *Flow {
	f.defaults = o
	return f
}

// Validate reports every mistake in the definition, each naming the flow and
// the step: steps without a matching Execute, duplicate names, a recovery
// step or a MovesTo target the flow does not declare, invalid options, RPCs
// without a handler. The errors match ErrInvalidFlow.
func (f *Flow) Validate() error {
	_, err := f.compile(true)
	return err
}

// flowDef is a validated flow, as the worker and the client use it.
type flowDef struct {
	name       string
	start      string
	steps      map[string]*stepDef
	order      []*stepDef
	rpcs       map[string]*rpcDef
	rpcNames   []string
	attributes map[string]bool
	attrNames  []string
	channels   map[string]bool
	chanNames  []string
	defaults   StepOptions
	// The Go types of the attributes' and channels' values, by name.
	attrTypes, chanTypes map[string]reflect.Type
	// indexed are the indexed attributes (E36), by name.
	indexed map[string]indexDecl
}

// indexDecl is an indexed attribute's search key and type.
type indexDecl struct {
	key string
	typ IndexType
}

// compile validates the definition. A client needs no handlers, so
// withHandlers says whether an RPC without one is an error.
func (f *Flow) compile(withHandlers bool) (*flowDef, error) {
	if f == nil {
		return nil, fmt.Errorf("%w: nil flow", ErrInvalidFlow)
	}
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	errs = append(errs, f.errs...)
	if f.name == "" {
		add(errors.New("empty flow type name"))
	}
	d := &flowDef{
		name: f.name, start: f.start, defaults: f.defaults,
		steps: map[string]*stepDef{}, rpcs: map[string]*rpcDef{},
		attributes: map[string]bool{}, channels: map[string]bool{},
		attrTypes: map[string]reflect.Type{}, chanTypes: map[string]reflect.Type{},
	}
	for _, s := range f.steps {
		d.steps[s.name] = s
		d.order = append(d.order, s)
	}
	for _, a := range f.attrs {
		switch {
		case a == nil || a.Name() == "":
			add(errors.New("attribute with an empty name"))
		case d.attributes[declName(a)]:
			add(fmt.Errorf("attribute %q is declared twice", declName(a)))
		case declName(a) == a.Name() && strings.HasSuffix(a.Name(), "/"):
			add(fmt.Errorf("attribute %q: a name ending in '/' declares a map: use DefineAttributeMap", a.Name()))
		default:
			n := declName(a)
			d.attributes[n] = true
			d.attrNames = append(d.attrNames, n)
			d.attrTypes[n] = a.attributeDef()
			if o := a.attributeOptions(); o.indexed {
				typ, err := indexTypeFor(a.attributeDef(), o.typ)
				if err != nil {
					add(fmt.Errorf("attribute %q: %w", a.Name(), err))
					break
				}
				key := o.key
				if key == "" {
					key = a.Name()
				}
				if d.indexed == nil {
					d.indexed = map[string]indexDecl{}
				}
				d.indexed[a.Name()] = indexDecl{key: key, typ: typ}
			}
		}
	}
	for _, c := range f.chans {
		switch {
		case c == nil || c.Name() == "":
			add(errors.New("channel with an empty name"))
		case d.channels[declName(c)]:
			add(fmt.Errorf("channel %q is declared twice", declName(c)))
		case declName(c) == c.Name() && strings.HasSuffix(c.Name(), "/"):
			add(fmt.Errorf("channel %q: a name ending in '/' declares a map: use DefineChannelMap", c.Name()))
		default:
			n := declName(c)
			d.channels[n] = true
			d.chanNames = append(d.chanNames, n)
			d.chanTypes[n] = c.channelDef()
		}
	}
	errs = append(errs, mapCollisions("attribute", d.attrNames, d.attributes)...)
	errs = append(errs, mapCollisions("channel", d.chanNames, d.channels)...)
	for _, r := range f.rpcs {
		if r == nil || r.Name() == "" {
			add(errors.New("RPC with an empty name"))
			continue
		}
		b := r.bindRPC()
		switch {
		case d.rpcs[b.name] != nil:
			add(fmt.Errorf("RPC %q is declared twice", b.name))
		case withHandlers && b.nilFn:
			add(fmt.Errorf("RPC %q has no handler", b.name))
		default:
			d.rpcs[b.name] = b
			d.rpcNames = append(d.rpcNames, b.name)
		}
	}
	if len(d.steps) == 0 && len(d.rpcs) == 0 && len(f.errs) == 0 {
		add(errors.New("no steps and no RPCs"))
	}
	errs = append(errs, d.checkOptions("default options", f.defaults)...)
	for _, s := range d.order {
		errs = append(errs, d.checkOptions(fmt.Sprintf("step %q: options", s.name), s.options)...)
		for _, m := range s.movesTo {
			if d.steps[m.name] == nil {
				add(fmt.Errorf("step %q: MovesTo names step %q, which the flow does not declare (add it with Steps)", s.name, m.name))
			}
		}
	}
	if len(errs) > 0 {
		return nil, &flowError{flow: f.name, errs: errs}
	}
	return d, nil
}

func (d *flowDef) checkOptions(where string, o StepOptions) []error {
	errs := o.validate()
	if r := o.Recovery.name; r != "" && d.steps[r] == nil {
		errs = append(errs, fmt.Errorf("recovery step %q is not declared (add it with Steps)", r))
	}
	for _, m := range []struct {
		name string
		o    MethodOptions
	}{{"WaitFor", o.WaitFor}, {"Execute", o.Execute}} {
		seen := map[string]bool{}
		for _, a := range m.o.Locks {
			switch {
			case !declaredIn(d.attributes, a.Name()):
				errs = append(errs, fmt.Errorf("%s.Locks: attribute %q is not declared (add it with Attributes)", m.name, a.Name()))
			case seen[a.Name()]:
				errs = append(errs, fmt.Errorf("%s.Locks: attribute %q is named twice", m.name, a.Name()))
			}
			seen[a.Name()] = true
		}
	}
	for i, err := range errs {
		errs[i] = fmt.Errorf("%s: %w", where, err)
	}
	return errs
}

// mapCollisions reports plain names that are instances of a declared map
// (E33): the two would share a wire name.
func mapCollisions(kind string, names []string, decls map[string]bool) []error {
	var errs []error
	for _, n := range names {
		if strings.HasSuffix(n, "/") {
			continue
		}
		if m, _, ok := ParseMapInstanceName(n); ok && decls[m+"/"] {
			errs = append(errs, fmt.Errorf("%s %q is an instance name of the %s map %q", kind, n, kind, m))
		}
	}
	return errs
}

// flowError lists a flow's definition mistakes.
type flowError struct {
	flow string
	errs []error
}

func (e *flowError) Error() string {
	s := fmt.Sprintf("dex: flow %q is invalid:", e.flow)
	for _, err := range e.errs {
		s += fmt.Sprintf("\n  flow %q: %v", e.flow, err)
	}
	return s
}

func (e *flowError) Unwrap() []error { return append([]error{ErrInvalidFlow}, e.errs...) }

// checkMovements checks a handler's movements against the declaration: the
// flow must declare each target, and a step that declares MovesTo must keep
// to it.
func (d *flowDef) checkMovements(from *stepDef, ms []Movement) error {
	for _, m := range ms {
		if d.steps[m.step] == nil {
			return fmt.Errorf("flow %q: movement to step %q, which the flow does not declare: add it with .Steps(%s{}), or declare the step's MovesTo so that NewWorker checks its targets", d.name, m.step, m.step)
		}
		if from != nil && from.declares && !refsContain(from.movesTo, m.step) {
			return fmt.Errorf("flow %q: step %q moves to %q, which its MovesTo does not list", d.name, from.name, m.step)
		}
	}
	return nil
}

func refsContain(refs []StepRef, name string) bool {
	for _, r := range refs {
		if r.name == name {
			return true
		}
	}
	return false
}

// declaration is the flow's FlowTypeDeclaration for Hello.
func (d *flowDef) declaration() *dexpb.FlowTypeDeclaration {
	p := &dexpb.FlowTypeDeclaration{
		FlowType:           d.name,
		RpcNames:           d.rpcNames,
		AttributeNames:     d.attrNames,
		ChannelNames:       d.chanNames,
		DefaultStepOptions: d.defaults.proto(),
		StartStepType:      d.start,
	}
	for name, t := range d.attrTypes {
		if p.AttributeTypes == nil {
			p.AttributeTypes = map[string]*dexpb.ValueType{}
		}
		p.AttributeTypes[name] = valueTypeOf(t)
	}
	for name, ix := range d.indexed {
		if p.IndexedAttributes == nil {
			p.IndexedAttributes = map[string]*dexpb.IndexedAttribute{}
		}
		p.IndexedAttributes[name] = &dexpb.IndexedAttribute{Key: ix.key, Type: ix.typ.proto()}
	}
	for name, t := range d.chanTypes {
		if p.ChannelTypes == nil {
			p.ChannelTypes = map[string]*dexpb.ValueType{}
		}
		p.ChannelTypes[name] = valueTypeOf(t)
	}
	for _, s := range d.order {
		p.Steps = append(p.Steps, &dexpb.StepDeclaration{
			StepType:   s.name,
			HasWaitFor: s.waits,
			Options:    s.options.proto(),
			InputType:  valueTypeOf(s.inputType),
		})
	}
	return p
}
