package serving

import (
	"maps"
	"reflect"
	"sync"

	"github.com/dexzd/dexzd/internal/engine"
)

// mapEngineValues and the walk behind it: how value objects (valueobjects.go)
// are found in, and changed in, commands, records, states and tasks without
// a hand-written list of every field that holds a value (tier 2 will add
// more). The walk is by reflection over exported fields, so a new field
// holding an engine.Value is covered without a change here.

// mapEngineValues returns x with every Value reachable from it through exported
// fields, pointers, slices, arrays, maps and interfaces replaced by what fn
// returns for it, when fn reports a change. Containers on the path to a
// changed value are copied; everything else is shared with x, which is
// never modified. fn is called once per value, depth first; its first
// error ends the walk and is returned with the zero T.
//
// It is meant for the rare values that are objects: a state, a task or a
// record without any costs one walk of its fields and no allocation.
func mapEngineValues[T any](x T, fn func(engine.Value) (engine.Value, bool, error)) (T, error) {
	v := reflect.ValueOf(&x).Elem()
	out, changed, err := walkValues(v, fn)
	if err != nil {
		var zero T
		return zero, err
	}
	if !changed {
		return x, nil
	}
	return out.Interface().(T), nil
}

// stripValueData returns recs with the bytes of every value object
// removed (its Ref and Size stay): what the log and the local store keep.
// recs is not modified.
func stripValueData(recs []engine.Record) []engine.Record { return withoutValueBytes(recs) }

// withoutValueBytes returns x with the bytes of every value object it
// names removed (x is not modified).
func withoutValueBytes[T any](x T) T {
	out, _ := mapEngineValues(x, func(v engine.Value) (engine.Value, bool, error) {
		if v.Ref == "" || v.Data == nil {
			return v, false, nil
		}
		v.Data = nil
		return v, true, nil
	})
	return out
}

var (
	valueType    = reflect.TypeFor[engine.Value]()
	valueMapType = reflect.TypeFor[map[string]engine.Value]()
)

// mayHold caches, per type, whether a value of it can reach a Value.
var mayHold sync.Map // reflect.Type -> bool

func holds(t reflect.Type) bool {
	if h, ok := mayHold.Load(t); ok {
		return h.(bool)
	}
	h := holdsUncached(t, map[reflect.Type]bool{})
	mayHold.Store(t, h)
	return h
}

func holdsUncached(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == valueType {
		return true
	}
	if seen[t] {
		return false // a cycle: whatever reaches a Value is found on another path
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Interface:
		return true // its dynamic type decides
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsUncached(t.Elem(), seen)
	case reflect.Map:
		return holdsUncached(t.Elem(), seen) // a Value is no valid map key
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && holdsUncached(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// A walkPlan is where the Values of a type can be: worked out once per
// type, so that a walk steps only into the fields that can reach a Value
// (a state's or a task's other fields cost nothing) and looks nothing up
// on the way, except for the dynamic type behind an interface.
type walkPlan struct {
	typ    reflect.Type
	fields []fieldPlan // a struct's exported fields that can reach a Value
	elem   *walkPlan   // a pointer's, slice's, array's or map's element
}

type fieldPlan struct {
	index int
	plan  *walkPlan
}

// plans caches planFor.
var plans sync.Map // reflect.Type -> *walkPlan

// planFor returns t's plan, nil when a value of t cannot reach a Value.
func planFor(t reflect.Type) *walkPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*walkPlan)
	}
	p := buildPlan(t, map[reflect.Type]*walkPlan{})
	plans.Store(t, p)
	return p
}

// buildPlan builds t's plan; building holds the plans under construction,
// so that a recursive type's plan points at itself.
func buildPlan(t reflect.Type, building map[reflect.Type]*walkPlan) *walkPlan {
	if !holds(t) {
		return nil
	}
	if p, ok := building[t]; ok {
		return p
	}
	p := &walkPlan{typ: t}
	building[t] = p
	switch {
	case t == valueType:
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if fp := buildPlan(f.Type, building); fp != nil {
				p.fields = append(p.fields, fieldPlan{index: i, plan: fp})
			}
		}
	case t.Kind() == reflect.Pointer, t.Kind() == reflect.Slice, t.Kind() == reflect.Array, t.Kind() == reflect.Map:
		p.elem = buildPlan(t.Elem(), building)
	}
	return p
}

// walkValues returns v, or a copy of it with changed values, and whether
// anything changed.
func walkValues(v reflect.Value, fn func(engine.Value) (engine.Value, bool, error)) (reflect.Value, bool, error) {
	p := planFor(v.Type())
	if p == nil {
		return v, false, nil
	}
	return walkPlanned(v, p, fn)
}

func walkPlanned(v reflect.Value, p *walkPlan, fn func(engine.Value) (engine.Value, bool, error)) (reflect.Value, bool, error) {
	t := p.typ
	if t == valueType {
		var cur engine.Value
		if v.CanAddr() {
			cur = *(*engine.Value)(v.Addr().UnsafePointer()) // no boxing: most values are reached by address
		} else {
			cur = v.Interface().(engine.Value)
		}
		nv, changed, err := fn(cur)
		if err != nil || !changed {
			return v, false, err
		}
		return reflect.ValueOf(nv), true, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() || p.elem == nil {
			return v, false, nil
		}
		e, changed, err := walkPlanned(v.Elem(), p.elem, fn)
		if err != nil || !changed {
			return v, false, err
		}
		np := reflect.New(t.Elem())
		np.Elem().Set(e)
		return np, true, nil
	case reflect.Interface:
		if v.IsNil() {
			return v, false, nil
		}
		e, changed, err := walkValues(v.Elem(), fn)
		if err != nil || !changed {
			return v, false, err
		}
		i := reflect.New(t).Elem()
		i.Set(e)
		return i, true, nil
	case reflect.Struct:
		var out reflect.Value
		for _, f := range p.fields {
			fv, changed, err := walkPlanned(v.Field(f.index), f.plan, fn)
			if err != nil {
				return v, false, err
			}
			if changed {
				if !out.IsValid() {
					out = reflect.New(t).Elem()
					out.Set(v)
				}
				out.Field(f.index).Set(fv)
			}
		}
		if !out.IsValid() {
			return v, false, nil
		}
		return out, true, nil
	case reflect.Slice, reflect.Array:
		if p.elem == nil {
			return v, false, nil
		}
		var out reflect.Value
		for i := range v.Len() {
			e, changed, err := walkPlanned(v.Index(i), p.elem, fn)
			if err != nil {
				return v, false, err
			}
			if changed {
				if !out.IsValid() {
					if t.Kind() == reflect.Slice {
						out = reflect.MakeSlice(t, v.Len(), v.Len())
						reflect.Copy(out, v)
					} else {
						out = reflect.New(t).Elem()
						out.Set(v)
					}
				}
				out.Index(i).Set(e)
			}
		}
		if !out.IsValid() {
			return v, false, nil
		}
		return out, true, nil
	case reflect.Map:
		if v.IsNil() || p.elem == nil {
			return v, false, nil
		}
		if t == valueMapType {
			// Attributes and locals: a map's elements are not addressable,
			// so the general case below would box every one.
			return walkValueMap(v, fn)
		}
		var out reflect.Value
		for it := v.MapRange(); it.Next(); {
			e, changed, err := walkPlanned(it.Value(), p.elem, fn)
			if err != nil {
				return v, false, err
			}
			if changed {
				if !out.IsValid() {
					out = reflect.MakeMapWithSize(t, v.Len())
					for all := v.MapRange(); all.Next(); {
						out.SetMapIndex(all.Key(), all.Value())
					}
				}
				out.SetMapIndex(it.Key(), e)
			}
		}
		if !out.IsValid() {
			return v, false, nil
		}
		return out, true, nil
	}
	return v, false, nil
}

// walkValueMap is walkPlanned for a map[string]engine.Value.
func walkValueMap(v reflect.Value, fn func(engine.Value) (engine.Value, bool, error)) (reflect.Value, bool, error) {
	m := v.Interface().(map[string]engine.Value)
	var out map[string]engine.Value
	for k, val := range m {
		nv, changed, err := fn(val)
		if err != nil {
			return v, false, err
		}
		if changed {
			if out == nil {
				out = maps.Clone(m)
			}
			out[k] = nv
		}
	}
	if out == nil {
		return v, false, nil
	}
	return reflect.ValueOf(out), true, nil
}
