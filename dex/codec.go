package dex

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Payload encryption (end to end): a Codec set on the Client
// (ClientOptions.Codec) and on the Worker (WorkerOptions.Codec) transforms
// every user value on its way to the server and back, so that the server
// stores and logs only what the codec made of it. The values are every
// EncodedValue of the API: flow and step inputs, outputs, attributes,
// channel messages, RPC payloads and answers, and the values that reads
// (GetFlowState, GetHistoryEvents, GetAttributes, WaitForFlow) hand back.
// The client encodes the values of each request and decodes those of each
// answer; the worker decodes the values of each task before its handler
// runs and encodes those of its result.
//
// What stays plaintext: everything that is not an EncodedValue (flow IDs,
// flow, step, attribute, channel and RPC names, timers, error messages and
// stack traces that handlers return, stop reasons) and the values of
// indexed attributes (Indexed), which the server must read to index: a
// Worker leaves the attributes its flows index unencoded, a Client those
// it writes from an indexed Attribute (Attribute.Value). CodecInterceptor
// knows no attribute, so dexcli --codec-key-file encodes them, and the
// server refuses such a write (INVALID_ARGUMENT naming the attribute).
//
// Shape checks: a worker with a Codec declares its attribute, channel and
// step input types with no encoding (any), keeping the JSON shape, so the
// server still refuses a plaintext "json" value that would not decode
// (INVALID_ARGUMENT naming the value) and accepts encoded values, whose
// encoding it does not parse; an encoded value that does not decode as the
// declared type fails in the worker instead, when the handler decodes it.

// Payload is one user value as it travels: the name of its encoding, its
// type name, and its bytes. The SDK writes Encoding "json" (EncodingJSON)
// and the Go type's name.
type Payload struct {
	Encoding string
	Type     string
	Data     []byte
}

// Codec transforms user values on their way to the server (Encode) and
// back (Decode), for example to encrypt them (NewAESGCMCodec) or to
// compress them. Both methods must be safe for concurrent use and must not
// modify p.Data in place (return new bytes).
//
// Encode is applied to every value a client or a worker sends. Its result
// must carry an encoding the server does not parse: not "json" (which the
// server checks is JSON) and without ':' (which the server refuses).
//
// Decode is applied to every value a client or a worker receives. It must
// return a value it did not make (another encoding) unchanged: values
// written before the codec was set, by a program without it, or by the
// server itself stay readable. An error from Decode fails the client's
// call, or the worker's attempt (error type "dex.CodecError"), and names
// the value.
type Codec interface {
	Encode(ctx context.Context, p Payload) (Payload, error)
	Decode(ctx context.Context, p Payload) (Payload, error)
}

// CodecError is the error of a value that the Codec failed to encode or
// decode. Field names the value within the request, answer or task, as
// the API's JSON names its fields (for example "attributes[0].value").
type CodecError struct {
	// Op is "encode" or "decode".
	Op    string
	Field string
	Err   error
}

func (e *CodecError) Error() string {
	return fmt.Sprintf("codec: %s %s: %v", e.Op, e.Field, e.Err)
}

func (e *CodecError) Unwrap() error { return e.Err }

// ErrorType names the error in a TaskFailure: a worker that cannot decode
// a task's value fails the attempt with this type.
func (e *CodecError) ErrorType() string { return "dex.CodecError" }

var encodedValueName = (&dexpb.EncodedValue{}).ProtoReflect().Descriptor().FullName()

// holdsValues caches, per message type, whether a message of that type can
// hold an EncodedValue, so that walks skip the rest.
var holdsValues sync.Map // protoreflect.FullName -> bool

func mayHoldValues(md protoreflect.MessageDescriptor) bool {
	if v, ok := holdsValues.Load(md.FullName()); ok {
		return v.(bool)
	}
	r := scanHoldsValues(md, map[protoreflect.FullName]bool{})
	holdsValues.Store(md.FullName(), r)
	return r
}

func scanHoldsValues(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if md.FullName() == encodedValueName {
		return true
	}
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		sub := fd.Message()
		if fd.IsMap() {
			sub = fd.MapValue().Message()
		}
		if sub != nil && scanHoldsValues(sub, seen) {
			return true
		}
	}
	return false
}

// fieldError prefixes the path of a CodecError with a field's name.
func fieldError(name string, err error) error {
	var ce *CodecError
	if errors.As(err, &ce) {
		switch {
		case ce.Field == "":
			ce.Field = name
		case ce.Field[0] == '[':
			ce.Field = name + ce.Field
		default:
			ce.Field = name + "." + ce.Field
		}
	}
	return err
}

// walkValues calls fn on every EncodedValue set in m, depth first; it
// stops at the first error, a *CodecError whose Field names the value.
// It skips the value of an Attribute whose name plain reports (indexed
// attributes travel in plaintext, E36); plain may be nil.
func walkValues(m protoreflect.Message, plain func(name string) bool, fn func(*dexpb.EncodedValue) error) error {
	if a, ok := m.Interface().(*dexpb.Attribute); ok && plain != nil && plain(a.GetName()) {
		return nil
	}
	if m.Descriptor().FullName() == encodedValueName {
		ev, ok := m.Interface().(*dexpb.EncodedValue)
		if !ok {
			return nil
		}
		return fn(ev)
	}
	if !mayHoldValues(m.Descriptor()) {
		return nil
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() == nil || !mayHoldValues(fd.MapValue().Message()) {
				return true
			}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if e := walkValues(mv.Message(), plain, fn); e != nil {
					err = fieldError(fd.JSONName()+"["+strconv.Quote(k.String())+"]", e)
				}
				return err == nil
			})
		case fd.IsList():
			if fd.Message() == nil || !mayHoldValues(fd.Message()) {
				return true
			}
			l := v.List()
			for i := range l.Len() {
				if e := walkValues(l.Get(i).Message(), plain, fn); e != nil {
					err = fieldError(fd.JSONName()+"["+strconv.Itoa(i)+"]", e)
					break
				}
			}
		case fd.Message() != nil:
			if e := walkValues(v.Message(), plain, fn); e != nil {
				err = fieldError(fd.JSONName(), e)
			}
		}
		return err == nil
	})
	return err
}

// codecOp applies one direction of a codec to every value of a message.
type codecOp struct {
	name  string // "encode" or "decode"
	fn    func(ctx context.Context, p Payload) (Payload, error)
	plain func(attribute string) bool // attributes left as they are (nil: none)
}

func encodeOp(c Codec, plain func(string) bool) codecOp { return codecOp{"encode", c.Encode, plain} }
func decodeOp(c Codec) codecOp                          { return codecOp{"decode", c.Decode, nil} }

// apply transforms the values of m in place.
func (op codecOp) apply(ctx context.Context, m proto.Message) error {
	if m == nil {
		return nil
	}
	return walkValues(m.ProtoReflect(), op.plain, func(ev *dexpb.EncodedValue) error {
		out, err := op.fn(ctx, Payload{Encoding: ev.GetEncoding(), Type: ev.GetType(), Data: ev.GetData()})
		if err != nil {
			return &CodecError{Op: op.name, Err: err}
		}
		ev.Encoding, ev.Type, ev.Data = out.Encoding, out.Type, out.Data
		return nil
	})
}

// encodeCopy returns a copy of m with its values encoded, leaving m as it
// is (the SDK sends some messages again: retries, results resent after a
// reconnect), except those of the attributes plain names (nil: none). A
// message without values is returned as it is.
func encodeCopy(ctx context.Context, c Codec, m any, plain func(string) bool) (any, error) {
	pm, ok := m.(proto.Message)
	if !ok || !mayHoldValues(pm.ProtoReflect().Descriptor()) {
		return m, nil
	}
	cp := proto.Clone(pm)
	if err := encodeOp(c, plain).apply(ctx, cp); err != nil {
		return nil, err
	}
	return cp, nil
}

// decodeInPlace decodes the values of m, a message just received.
func decodeInPlace(ctx context.Context, c Codec, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil
	}
	return decodeOp(c).apply(ctx, pm)
}

// codecConn applies a Codec to the messages of the calls made on cc.
type codecConn struct {
	cc    grpc.ClientConnInterface
	codec Codec
	plain func(attribute string) bool // indexed attributes, left as they are
}

// withCodec wraps cc so that its calls encode and decode values with c,
// but those of the attributes plain names; nil c returns cc.
func withCodec(cc grpc.ClientConnInterface, c Codec, plain func(string) bool) grpc.ClientConnInterface {
	if c == nil {
		return cc
	}
	return &codecConn{cc: cc, codec: c, plain: plain}
}

func (c *codecConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	req, err := encodeCopy(ctx, c.codec, args, c.plain)
	if err != nil {
		return err
	}
	if err := c.cc.Invoke(ctx, method, req, reply, opts...); err != nil {
		return err
	}
	return decodeInPlace(ctx, c.codec, reply)
}

func (c *codecConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := c.cc.NewStream(ctx, desc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &codecStream{ClientStream: s, codec: c.codec, plain: c.plain}, nil
}

type codecStream struct {
	grpc.ClientStream
	codec Codec
	plain func(string) bool
}

func (s *codecStream) SendMsg(m any) error {
	out, err := encodeCopy(s.Context(), s.codec, m, s.plain)
	if err != nil {
		return err
	}
	return s.ClientStream.SendMsg(out)
}

func (s *codecStream) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	return decodeInPlace(s.Context(), s.codec, m)
}

// CodecInterceptor returns a gRPC unary client interceptor that applies c
// to the values of every request and answer, as a Client with
// ClientOptions.Codec does: for programs that call the API's generated
// clients (package dexpb) themselves, as dexcli does with
// --codec-key-file.
func CodecInterceptor(c Codec) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		enc, err := encodeCopy(ctx, c, req, nil)
		if err != nil {
			return err
		}
		if err := invoker(ctx, method, enc, reply, cc, opts...); err != nil {
			return err
		}
		return decodeInPlace(ctx, c, reply)
	}
}

// codecRun decodes the values of t, runs it and encodes the values of its
// result. A value that does not decode, or a result value that does not
// encode, fails the attempt with a *CodecError naming it.
func (r *registry) codecRun(ctx context.Context, t *dexpb.Task) *dexpb.PollWorkerTaskRequest {
	if err := decodeInPlace(ctx, r.codec, t); err != nil {
		return failure(t.GetTaskToken(), fieldError("task", err), "")
	}
	msg := r.handle(ctx, t)
	res := msg.GetTaskResult()
	if res == nil {
		return msg
	}
	enc, err := encodeCopy(ctx, r.codec, res, r.plain)
	if err != nil {
		return failure(t.GetTaskToken(), fieldError("result", err), "")
	}
	return &dexpb.PollWorkerTaskRequest{Message: &dexpb.PollWorkerTaskRequest_TaskResult{TaskResult: enc.(*dexpb.TaskResult)}}
}

// declareForCodec drops the encoding of the value types a Hello declares:
// the server then accepts values the codec encoded (an encoding it does
// not parse) and still checks the JSON shape of plaintext "json" values.
func declareForCodec(h *dexpb.Hello) {
	for _, ft := range h.GetFlowTypes() {
		for _, vt := range ft.GetAttributeTypes() {
			vt.Encoding = ""
		}
		for _, vt := range ft.GetChannelTypes() {
			vt.Encoding = ""
		}
		for _, s := range ft.GetSteps() {
			if vt := s.GetInputType(); vt != nil {
				vt.Encoding = ""
			}
		}
	}
}
