package dex

import (
	"fmt"
	"reflect"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Channel is a named FIFO queue of typed messages inside one flow execution.
// Declare it once at package level with DefineChannel and list it in
// the flow's Channels.
type Channel[T any] struct {
	name string
}

// DefineChannel declares a channel whose messages are of type T. Messages
// travel as JSON.
func DefineChannel[T any](name string) Channel[T] {
	return Channel[T]{name: name}
}

// ChannelDef is any Channel[T], as Flow.Channels takes them.
type ChannelDef interface {
	// Name is the channel's name.
	Name() string
	// channelDef is the type of the values, which the worker declares.
	channelDef() reflect.Type
}

// Name is the channel's name.
func (c Channel[T]) Name() string { return c.name }

func (Channel[T]) channelDef() reflect.Type { return reflect.TypeFor[T]() }

// Publish stages a message; it joins the channel's queue atomically with the
// handler's result. When the message cannot be encoded, or the
// flow does not declare the channel, the attempt fails once the handler
// returns.
func (c Channel[T]) Publish(ctx Context, v T) {
	ev, err := encodeValue(v)
	ctx.state().publish(c.name, ev, err)
}

// Message pairs the channel with a message, for Client.Publish.
func (c Channel[T]) Message(v T) Message {
	ev, err := encodeValue(v)
	return Message{channel: c.name, ev: ev, err: err}
}

// QueueSize is the number of messages waiting in the channel when the task
// was handed out. The server sends queue sizes with RPC tasks only; in
// a WaitFor or Execute it is 0.
func (c Channel[T]) QueueSize(ctx Context) int {
	return int(ctx.state().queues[c.name])
}

// ForOne waits for one message and takes it.
func (c Channel[T]) ForOne() ChannelCondition[T] {
	return ChannelCondition[T]{channel: c.name, bound: dexpb.ChannelBound_CHANNEL_BOUND_FOR_ONE}
}

// ForN waits for n messages and takes n (n >= 1).
func (c Channel[T]) ForN(n int) ChannelCondition[T] {
	return ChannelCondition[T]{channel: c.name, bound: dexpb.ChannelBound_CHANNEL_BOUND_FOR_N, n: n}
}

// AtLeast waits for n messages and takes every queued one (n >= 0).
func (c Channel[T]) AtLeast(n int) ChannelCondition[T] {
	return ChannelCondition[T]{channel: c.name, bound: dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST, n: n}
}

// AtMost is always ready and takes up to n messages (n >= 1).
func (c Channel[T]) AtMost(n int) ChannelCondition[T] {
	return ChannelCondition[T]{channel: c.name, bound: dexpb.ChannelBound_CHANNEL_BOUND_AT_MOST, n: n}
}

// AtLeastAtMost waits for minimum messages and takes up to maximum
// (0 <= minimum <= maximum, maximum >= 1).
func (c Channel[T]) AtLeastAtMost(minimum, maximum int) ChannelCondition[T] {
	return ChannelCondition[T]{channel: c.name, bound: dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST_AT_MOST, min: minimum, max: maximum}
}

// Received returns the first message that any condition on this channel
// consumed, and whether there was one.
func (c Channel[T]) Received(r Results) (T, bool) {
	msgs := c.Messages(r)
	if len(msgs) == 0 {
		var zero T
		return zero, false
	}
	return msgs[0], true
}

// Messages returns every message the Wait's conditions on this channel
// consumed, by condition index and then in queue order. A message that
// does not decode as T fails the attempt once Execute returns.
func (c Channel[T]) Messages(r Results) []T {
	var out []T
	for _, ch := range r.pb.GetChannels() {
		if ch.GetChannel() == c.name {
			out = append(out, decodeMessages[T](r, ch)...)
		}
	}
	return out
}

// ChannelCondition waits for messages on one channel. Give it an ID with
// WithID to tell several conditions on one channel apart with Satisfied.
type ChannelCondition[T any] struct {
	id       string
	channel  string
	bound    dexpb.ChannelBound
	n        int
	min, max int
}

// WithID names the condition; IDs must be unique within a Wait.
func (c ChannelCondition[T]) WithID(id string) ChannelCondition[T] {
	c.id = id
	return c
}

// ID is the condition's ID, empty when it has none.
func (c ChannelCondition[T]) ID() string { return c.id }

// Satisfied reports whether this condition held and consumed its messages:
// always for Until and AllOf, only for the winner of an AnyOf. A
// condition with an ID is matched by ID, otherwise by channel name.
func (c ChannelCondition[T]) Satisfied(r Results) bool {
	for _, ch := range c.results(r) {
		if ch.GetSatisfied() {
			return true
		}
	}
	return false
}

// Messages returns the messages this condition consumed, in queue order
// (matched as Satisfied matches): with several conditions on one channel
// (an AllOf, an AnyCombinationOf group) each has its own share.
func (c ChannelCondition[T]) Messages(r Results) []T {
	var out []T
	for _, ch := range c.results(r) {
		out = append(out, decodeMessages[T](r, ch)...)
	}
	return out
}

func (c ChannelCondition[T]) results(r Results) []*dexpb.ChannelResult {
	var out []*dexpb.ChannelResult
	for _, ch := range r.pb.GetChannels() {
		if (c.id != "" && ch.GetConditionId() == c.id) || (c.id == "" && ch.GetChannel() == c.channel) {
			out = append(out, ch)
		}
	}
	return out
}

func (c ChannelCondition[T]) waitProto() (*dexpb.Wait, error) { return untilProto(c) }

func (c ChannelCondition[T]) conditionProto() (*dexpb.WaitCondition, error) {
	if c.channel == "" {
		return nil, fmt.Errorf("channel condition: empty channel name")
	}
	cc := &dexpb.ChannelCondition{Channel: c.channel, Bound: c.bound}
	ok := true
	switch c.bound {
	case dexpb.ChannelBound_CHANNEL_BOUND_FOR_N, dexpb.ChannelBound_CHANNEL_BOUND_AT_MOST:
		ok = c.n >= 1
		cc.N = uint32(c.n)
	case dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST:
		ok = c.n >= 0
		cc.N = uint32(c.n)
	case dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST_AT_MOST:
		ok = c.min >= 0 && c.max >= 1 && c.min <= c.max
		cc.Min, cc.Max = uint32(c.min), uint32(c.max)
	}
	if !ok {
		return nil, fmt.Errorf("channel condition on %q: invalid bounds %s n=%d min=%d max=%d", c.channel, c.bound, c.n, c.min, c.max)
	}
	return &dexpb.WaitCondition{Id: c.id, Condition: &dexpb.WaitCondition_Channel{Channel: cc}}, nil
}

func decodeMessages[T any](r Results, ch *dexpb.ChannelResult) []T {
	out := make([]T, 0, len(ch.GetMessages()))
	for i, m := range ch.GetMessages() {
		v, err := decodeValue[T](m)
		if err != nil {
			if r.st != nil {
				r.st.failLocked(&decodeError{what: fmt.Sprintf("channel %q message %d", ch.GetChannel(), i), err: err})
			}
			continue
		}
		out = append(out, v)
	}
	return out
}

// Message is a channel name with an encoded message, for Client.Publish.
type Message struct {
	channel string
	ev      *dexpb.EncodedValue
	err     error
}

// Channel is the message's channel.
func (m Message) Channel() string { return m.channel }
