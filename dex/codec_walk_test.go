package dex

import (
	"context"
	"math/rand/v2"
	"regexp"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/dexzd/dexzd/api/dexpb"
)

// markCodec marks every value it encodes.
type markCodec struct{}

func (markCodec) Encode(_ context.Context, p Payload) (Payload, error) {
	return Payload{Encoding: "marked", Data: append([]byte("m"), p.Data...)}, nil
}

func (markCodec) Decode(_ context.Context, p Payload) (Payload, error) {
	if p.Encoding != "marked" {
		return p, nil
	}
	return Payload{Encoding: "json", Data: p.Data[1:]}, nil
}

// fill sets the message fields of m that can hold values (one member of
// each oneof, chosen by rnd; two elements of lists and maps) down to a
// depth, and returns how many EncodedValues it set.
func fill(m protoreflect.Message, depth int, rnd *rand.Rand) int {
	if m.Descriptor().FullName() == encodedValueName {
		ev := m.Interface().(*dexpb.EncodedValue)
		ev.Encoding, ev.Data = "json", []byte("1")
		return 1
	}
	if depth == 0 {
		return 0
	}
	n := 0
	fields := m.Descriptor().Fields()
	chosen := map[protoreflect.FullName]protoreflect.FieldDescriptor{}
	oneofs := m.Descriptor().Oneofs()
	for i := range oneofs.Len() {
		o := oneofs.Get(i)
		if o.IsSynthetic() {
			continue
		}
		chosen[o.FullName()] = o.Fields().Get(rnd.IntN(o.Fields().Len()))
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() && chosen[o.FullName()] != fd {
			continue
		}
		switch {
		case fd.IsMap():
			vd := fd.MapValue().Message()
			if vd == nil || !mayHoldValues(vd) {
				continue
			}
			mp := m.Mutable(fd).Map()
			for k := range 2 {
				var key protoreflect.MapKey
				switch fd.MapKey().Kind() {
				case protoreflect.StringKind:
					key = protoreflect.ValueOfString(string(rune('a' + k))).MapKey()
				default:
					key = protoreflect.ValueOfInt64(int64(k)).MapKey()
				}
				v := mp.NewValue()
				n += fill(v.Message(), depth-1, rnd)
				mp.Set(key, v)
			}
		case fd.IsList():
			if fd.Message() == nil || !mayHoldValues(fd.Message()) {
				continue
			}
			l := m.Mutable(fd).List()
			for range 2 {
				v := l.NewElement()
				n += fill(v.Message(), depth-1, rnd)
				l.Append(v)
			}
		case fd.Message() != nil:
			if !mayHoldValues(fd.Message()) {
				continue
			}
			n += fill(m.Mutable(fd).Message(), depth-1, rnd)
		}
	}
	return n
}

// markedRE matches a marked value in prototext, whose spacing varies.
var markedRE = regexp.MustCompile(`encoding:\s*"marked"`)

// Every EncodedValue of every message of the API, however deep, is
// encoded by the walk, on a copy, and decoded back in place.
func TestCodecWalk_ReachesEveryValueOfTheAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	checked := 0
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if mt.Descriptor().ParentFile().Package() != "dex" || !mayHoldValues(mt.Descriptor()) {
			return true
		}
		checked++
		for seed := range uint64(8) {
			m := mt.New()
			set := fill(m, 8, rand.New(rand.NewPCG(seed, 1)))
			orig := m.Interface()
			before := proto.Clone(orig)
			enc, err := encodeCopy(ctx, markCodec{}, orig, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(orig, before) {
				t.Fatalf("%s: encoding changed the original message", mt.Descriptor().FullName())
			}
			text := prototext.Format(enc.(proto.Message))
			if got := len(markedRE.FindAllString(text, -1)); got != set {
				t.Fatalf("%s (seed %d): %d of %d values encoded:\n%s", mt.Descriptor().FullName(), seed, got, set, text)
			}
			if err := decodeInPlace(ctx, markCodec{}, enc); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(enc.(proto.Message), before) {
				t.Fatalf("%s: decoding did not restore the message", mt.Descriptor().FullName())
			}
		}
		return true
	})
	if checked < 10 {
		t.Fatalf("only %d API messages hold values", checked)
	}
}

// A message type that cannot hold a value is passed on as it is.
func TestCodecWalk_SkipsMessagesWithoutValues(t *testing.T) {
	t.Parallel()
	m := &dexpb.Hello{WorkerId: "w"}
	out, err := encodeCopy(context.Background(), markCodec{}, m, nil)
	if err != nil || out != any(m) {
		t.Fatalf("encodeCopy(Hello) = %v, %v; want the same message", out, err)
	}
}

func BenchmarkCodecWalk_GetFlowStateResponse(b *testing.B) {
	ctx := context.Background()
	m := (&dexpb.GetFlowStateResponse{}).ProtoReflect()
	fill(m, 8, rand.New(rand.NewPCG(1, 1)))
	msg := m.Interface()
	for b.Loop() {
		enc, err := encodeCopy(ctx, markCodec{}, msg, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := decodeInPlace(ctx, markCodec{}, enc); err != nil {
			b.Fatal(err)
		}
	}
}
