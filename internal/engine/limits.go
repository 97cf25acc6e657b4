package engine

import "fmt"

// Limits on the size of a request and of a run's attributes (E28, issue 11).
//
// Every value (input, output, attribute, message) is at most
// MaxPayloadBytes. On top of that:
//
//   - the values one request carries are at most MaxRequestBytes in total:
//     a StartFlow's input and attributes; a SetAttributes; a
//     PublishToChannel's messages; a WaitFor result's staged attributes and
//     messages; an Execute result's output, movement inputs and staged
//     writes; an RPC's input, and its result's output, movement inputs and
//     staged writes;
//   - a run's attributes are at most MaxFlowAttributeBytes in total once a
//     write is applied (a write that replaces an attribute counts the new
//     value instead of the old one). A write that does not grow the total
//     is always accepted, so a run that holds more (committed before the
//     limit was lowered) can still shrink.
//
// Sizes count value bytes (Value.Len: a value object counts its Size), as MaxPayloadBytes does. Both are
// checks on new requests only: Apply and replay never check them, so a log
// written under larger limits replays unchanged.
//
// A client request over a limit is refused with CodeResourceExhausted,
// naming the limit's configuration key, and nothing is logged. A worker's
// WaitFor or Execute result over a limit fails its attempt with
// INVALID_USER_FLOW_CODE and the message (the retry policy applies); an
// RPC result over a limit is the RPC caller's FAILED_PRECONDITION error
// (INVALID_USER_FLOW_CODE), as any invalid RPC result.
const (
	// DefaultMaxRequestBytes is the default MaxRequestBytes: two values of
	// DefaultMaxPayloadBytes.
	DefaultMaxRequestBytes = 8 << 20
	// DefaultMaxFlowAttributeBytes is the default MaxFlowAttributeBytes:
	// every task carries all of its run's attributes beside its input, and
	// DefaultMaxPayloadBytes + DefaultMaxFlowAttributeBytes =
	// DefaultMaxRequestBytes, so a task fits where a request does.
	DefaultMaxFlowAttributeBytes = 4 << 20
)

func (c Config) maxRequest() int {
	if c.MaxRequestBytes > 0 {
		return c.MaxRequestBytes
	}
	return max(DefaultMaxRequestBytes, c.maxPayload())
}

func (c Config) maxFlowAttributes() int {
	if c.MaxFlowAttributeBytes > 0 {
		return c.MaxFlowAttributeBytes
	}
	return max(DefaultMaxFlowAttributeBytes, c.maxPayload())
}

func attributeBytes(ws []AttributeWrite) int {
	n := 0
	for _, w := range ws {
		n += w.Value.Len()
	}
	return n
}

func publishBytes(ps []Publish) int {
	n := 0
	for _, p := range ps {
		n += p.Value.Len()
	}
	return n
}

func movementBytes(ms []Movement) int {
	n := 0
	for _, m := range ms {
		n += m.Input.Len()
	}
	return n
}

func stagedBytes(s Staged) int {
	return attributeBytes(s.Attributes) + publishBytes(s.Publishes) + eventBytes(s.UserEvents())
}

// AttributeBytes is the total size of a run's attribute values, the
// quantity MaxFlowAttributeBytes bounds.
func AttributeBytes(attrs map[string]Value) int {
	n := 0
	for _, v := range attrs {
		n += v.Len()
	}
	return n
}

// checkRequest enforces MaxRequestBytes on the n value bytes of a request.
func (d *decider) checkRequest(n int) error {
	if limit := d.e.cfg.maxRequest(); n > limit {
		return &Error{Code: CodeResourceExhausted, Field: "request", Limit: "limits.maxRequestBytes",
			Message: fmt.Sprintf("the request's values total %d bytes, above limits.maxRequestBytes (%d bytes)", n, limit)}
	}
	return nil
}

// checkFlowAttributes enforces MaxFlowAttributeBytes on cur (a run's
// attributes, nil for a new run) once ws are written.
func (d *decider) checkFlowAttributes(field string, cur map[string]Value, ws []AttributeWrite) error {
	if len(ws) == 0 {
		return nil
	}
	before := AttributeBytes(cur)
	after := before
	next := map[string]int{}
	for _, w := range ws {
		next[w.Name] = w.Value.Len() // the last write of a name wins
	}
	for name, n := range next {
		after += n - cur[name].Len()
	}
	if limit := d.e.cfg.maxFlowAttributes(); after > limit && after > before {
		return &Error{Code: CodeResourceExhausted, Field: field, Limit: "limits.maxFlowAttributeBytes",
			Message: fmt.Sprintf("the run's attributes would total %d bytes (%d now), above limits.maxFlowAttributeBytes (%d bytes)", after, before, limit)}
	}
	return nil
}

// checkStagedLimits enforces both limits on a worker result whose other
// values total extra bytes and that writes s.
func (d *decider) checkStagedLimits(extra int, s Staged) error {
	if err := d.checkRequest(extra + stagedBytes(s)); err != nil {
		return err
	}
	return d.checkFlowAttributes("staged.attributes", d.st.Attributes, s.Attributes)
}

// MaxDecisionBytes bounds the encoded size (MarshalRecord) of the records
// one Decide call returns for a request within the limits, so that the
// node can size its log record limit and never refuse such a request
// there. A value's bytes are copied into a record as they are (codec.go),
// and a value can be logged twice: a movement's input in the completion
// and in the step's creation, and an RPC's input (at most MaxPayloadBytes)
// is logged with its result. 2 MiB cover names, options and the records'
// own fields.
func (e *Engine) MaxDecisionBytes() int {
	return e.cfg.maxPayload() + 2*e.cfg.maxRequest() + 2<<20
}
