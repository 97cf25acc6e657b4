package dex

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Attribute and channel maps (E33): one declared name and value type with
// any number of keyed instances. Each instance is an ordinary attribute or
// channel on the wire, named MapInstanceName(name, key): the map's name, a
// '/', and the key with '%' written "%25" and '/' written "%2F". So a key
// may hold any text, the last '/' of a wire name separates the map's name
// from the key, and two keys never share a wire name. The flow declares
// the map as "<name>/", and the server accepts an instance name only for a
// declared map (a plain name that is an instance of a declared map is
// refused).

// MapInstanceName is the wire name of a map's instance: name + "/" + the
// escaped key. It is what Client.GetFlowState's Attributes and Channels
// and dexcli show.
func MapInstanceName(name, key string) string { return name + "/" + escapeMapKey(key) }

// ParseMapInstanceName splits an instance's wire name into the map's name
// and the key; ok is false when wire is not an instance name (no '/', an
// empty name or key, or a key that is not escaped as MapInstanceName does).
func ParseMapInstanceName(wire string) (name, key string, ok bool) {
	i := strings.LastIndexByte(wire, '/')
	if i <= 0 || i == len(wire)-1 {
		return "", "", false
	}
	key, ok = unescapeMapKey(wire[i+1:])
	if !ok {
		return "", "", false
	}
	return wire[:i], key, true
}

func escapeMapKey(key string) string {
	if !strings.ContainsAny(key, "%/") {
		return key
	}
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(key)
}

func unescapeMapKey(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '/':
			return "", false
		case '%':
			if i+2 >= len(s) || (s[i+1:i+3] != "25" && s[i+1:i+3] != "2F") {
				return "", false
			}
			i += 2
		}
	}
	if !strings.Contains(s, "%") {
		return s, true
	}
	return strings.NewReplacer("%25", "%", "%2F", "/").Replace(s), true
}

// mapKeys returns the keys of the instances of the map decl ("<name>/")
// among names, sorted.
func mapKeys[K ~string](decl string, names func(yield func(string) bool)) []K {
	var keys []K
	for n := range names {
		rest, ok := strings.CutPrefix(n, decl)
		if !ok {
			continue
		}
		if k, ok := unescapeMapKey(rest); ok && rest != "" {
			keys = append(keys, K(k))
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// declaredIn reports whether name is declared in decls: itself, or as an
// instance of a declared map. A map's own declaration covers nothing.
func declaredIn(decls map[string]bool, name string) bool {
	if name == "" || strings.HasSuffix(name, "/") {
		return false
	}
	if decls[name] {
		return true
	}
	m, _, ok := ParseMapInstanceName(name)
	return ok && decls[m+"/"]
}

// mapDecl is implemented by the map types: the name the flow declares.
type mapDecl interface{ mapDeclName() string }

// declName is the name a flow declares for an attribute or channel.
func declName(def interface{ Name() string }) string {
	if m, ok := def.(mapDecl); ok {
		return m.mapDeclName()
	}
	return def.Name()
}

// AttributeMap is one named attribute type with any number of instances,
// one per key, each stored separately. Declare it once at package level
// with DefineAttributeMap and list it in the flow's Attributes.
type AttributeMap[K ~string, V any] struct {
	name string
}

// DefineAttributeMap declares an attribute map whose keys are of type K (a
// string type) and whose values are of type V. Its values travel as JSON.
func DefineAttributeMap[K ~string, V any](name string) AttributeMap[K, V] {
	return AttributeMap[K, V]{name: name}
}

// Name is the map's name (without the instances' keys).
func (m AttributeMap[K, V]) Name() string { return m.name }

func (m AttributeMap[K, V]) mapDeclName() string { return m.name + "/" }

func (AttributeMap[K, V]) attributeDef() reflect.Type { return reflect.TypeFor[V]() }

func (AttributeMap[K, V]) attributeOptions() attrOptions { return attrOptions{} }

// Instance is the map's instance for key, an ordinary attribute: its Get,
// Set and Value work as for any attribute, and it can be locked
// (MethodOptions.Locks, WithLocks) and waited for (WaitForAttribute).
func (m AttributeMap[K, V]) Instance(key K) Attribute[V] {
	return Attribute[V]{name: MapInstanceName(m.name, string(key))}
}

// Get returns the instance's value as the handler sees it (Attribute.Get).
func (m AttributeMap[K, V]) Get(ctx Context, key K) (V, error) {
	return m.Instance(key).Get(ctx)
}

// Lookup is Get that tells an instance that has no value (ok false) from
// one set to V's zero value.
func (m AttributeMap[K, V]) Lookup(ctx Context, key K) (v V, ok bool, err error) {
	return m.Instance(key).lookup(ctx)
}

// Set stages a write of the instance (Attribute.Set).
func (m AttributeMap[K, V]) Set(ctx Context, key K, v V) {
	m.Instance(key).Set(ctx, v)
}

// Keys returns the keys of the instances that have a value, as the handler
// sees them (its own staged Sets included), sorted.
func (m AttributeMap[K, V]) Keys(ctx Context) []K {
	return mapKeys[K](m.mapDeclName(), slices.Values(ctx.state().attributeNames()))
}

// Count is len(Keys(ctx)).
func (m AttributeMap[K, V]) Count(ctx Context) int { return len(m.Keys(ctx)) }

// Value pairs the instance for key with a value, for Client.SetAttributes
// and WithAttributes at start.
func (m AttributeMap[K, V]) Value(key K, v V) AttributeValue {
	return m.Instance(key).Value(v)
}

// Entries returns the instances' values in a flow's state (as
// Client.GetFlowState returns it), by key. A value that does not decode
// as V is an error.
func (m AttributeMap[K, V]) Entries(st FlowState) (map[K]V, error) {
	out := map[K]V{}
	for _, k := range mapKeys[K](m.mapDeclName(), mapKeysOf(st.Attributes)) {
		var v V
		if err := st.Attributes[MapInstanceName(m.name, string(k))].Decode(&v); err != nil {
			return nil, fmt.Errorf("attribute map %q key %q: %w", m.name, k, err)
		}
		out[k] = v
	}
	return out, nil
}

// ChannelMap is one named channel type with an independent FIFO queue per
// key. Declare it once at package level with DefineChannelMap and list it
// in the flow's Channels.
type ChannelMap[K ~string, V any] struct {
	name string
}

// DefineChannelMap declares a channel map whose keys are of type K (a
// string type) and whose messages are of type V.
func DefineChannelMap[K ~string, V any](name string) ChannelMap[K, V] {
	return ChannelMap[K, V]{name: name}
}

// Name is the map's name (without the instances' keys).
func (m ChannelMap[K, V]) Name() string { return m.name }

func (m ChannelMap[K, V]) mapDeclName() string { return m.name + "/" }

func (ChannelMap[K, V]) channelDef() reflect.Type { return reflect.TypeFor[V]() }

// Instance is the map's queue for key, an ordinary channel: Publish,
// Message, QueueSize, the wait conditions (ForOne, ForN, ...) and
// Received/Messages work as for any channel.
func (m ChannelMap[K, V]) Instance(key K) Channel[V] {
	return Channel[V]{name: MapInstanceName(m.name, string(key))}
}

// Publish stages a message to the queue for key (Channel.Publish).
func (m ChannelMap[K, V]) Publish(ctx Context, key K, v V) { m.Instance(key).Publish(ctx, v) }

// Message pairs the queue for key with a message, for Client.Publish.
func (m ChannelMap[K, V]) Message(key K, v V) Message { return m.Instance(key).Message(v) }

// ForOne waits for one message on the queue for key and takes it.
func (m ChannelMap[K, V]) ForOne(key K) ChannelCondition[V] { return m.Instance(key).ForOne() }

// ForN waits for n messages on the queue for key and takes n.
func (m ChannelMap[K, V]) ForN(key K, n int) ChannelCondition[V] { return m.Instance(key).ForN(n) }

// Received returns the first message a condition on the queue for key
// consumed (Channel.Received).
func (m ChannelMap[K, V]) Received(r Results, key K) (V, bool) { return m.Instance(key).Received(r) }

// Messages returns every message the Wait's conditions on the queue for
// key consumed (Channel.Messages).
func (m ChannelMap[K, V]) Messages(r Results, key K) []V { return m.Instance(key).Messages(r) }

// QueueSize is the number of messages waiting in the queue for key when
// the task was handed out (RPC tasks only, as Channel.QueueSize).
func (m ChannelMap[K, V]) QueueSize(ctx Context, key K) int { return m.Instance(key).QueueSize(ctx) }

// Keys returns the keys whose queues held messages when the task was
// handed out, sorted. The server sends queue sizes with RPC tasks only;
// in a WaitFor or Execute it is empty.
func (m ChannelMap[K, V]) Keys(ctx Context) []K {
	q := ctx.state().queues
	return mapKeys[K](m.mapDeclName(), func(yield func(string) bool) {
		for n, size := range q {
			if size > 0 && !yield(n) {
				return
			}
		}
	})
}

// QueueSizes returns the channel map's non-empty queues in a flow's state
// (as Client.GetFlowState returns it): the number of queued messages by key.
func (m ChannelMap[K, V]) QueueSizes(st FlowState) map[K]int {
	out := map[K]int{}
	for _, q := range st.Channels {
		if name, key, ok := ParseMapInstanceName(q.Channel); ok && name == m.name && q.Size > 0 {
			out[K(key)] = q.Size
		}
	}
	return out
}

func mapKeysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
