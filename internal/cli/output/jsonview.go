package output

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/dexzd/dexzd/api/dexpb"
)

// ProtoJSON renders an API message for JSON output. It follows the
// protobuf JSON mapping (camelCase names, fields in declaration order, 64-bit
// integers as strings, timestamps in RFC 3339, durations as "1.5s"). Like
// protojson's EmitUnpopulated, it prints scalars, enums and lists even when
// they hold their zero value, so that a document's shape does not depend on
// its values; unset messages, oneof members and optional fields are left
// out. It makes two changes for people and scripts:
// enum values lose their type prefix (FLOW_STATUS_COMPLETED is "COMPLETED"),
// and encoded values show their JSON (see ValueJSON). Unlike protojson,
// its output never varies between builds.
func ProtoJSON(m proto.Message) any {
	if m == nil {
		return nil
	}
	r := m.ProtoReflect()
	if !r.IsValid() {
		return nil
	}
	return messageJSON(r)
}

func messageJSON(m protoreflect.Message) any {
	switch v := m.Interface().(type) {
	case *dexpb.EncodedValue:
		return ValueJSON(v)
	case *timestamppb.Timestamp:
		return v.AsTime().UTC().Format("2006-01-02T15:04:05.999999999Z")
	case *durationpb.Duration:
		return DurationJSON(v)
	}
	o := Object{}
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !m.Has(fd) && (fd.ContainingOneof() != nil || fd.Message() != nil && !fd.IsList() && !fd.IsMap()) {
			continue
		}
		o = o.Add(fd.JSONName(), fieldJSON(fd, m.Get(fd)))
	}
	return o
}

func fieldJSON(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch {
	case fd.IsList():
		l := v.List()
		out := make([]any, l.Len())
		for i := range out {
			out[i] = singularJSON(fd, l.Get(i))
		}
		return out
	case fd.IsMap():
		type entry struct {
			key string
			val any
		}
		var es []entry
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			es = append(es, entry{k.String(), singularJSON(fd.MapValue(), mv)})
			return true
		})
		sort.Slice(es, func(i, j int) bool { return es[i].key < es[j].key })
		o := Object{}
		for _, e := range es {
			o = o.Add(e.key, e.val)
		}
		return o
	default:
		return singularJSON(fd, v)
	}
}

func singularJSON(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return v.Bool()
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return json.Number(strconv.FormatInt(v.Int(), 10))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return json.Number(strconv.FormatUint(v.Uint(), 10))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.FormatInt(v.Int(), 10)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(v.Uint(), 10)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := v.Float()
		switch {
		case math.IsNaN(f):
			return "NaN"
		case math.IsInf(f, 1):
			return "Infinity"
		case math.IsInf(f, -1):
			return "-Infinity"
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes())
	case protoreflect.EnumKind:
		return enumName(fd.Enum(), v.Enum())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return messageJSON(v.Message())
	}
	return nil
}

// DurationJSON renders a duration as the protobuf JSON mapping does: seconds
// with 0, 3, 6 or 9 fractional digits and an "s".
func DurationJSON(d *durationpb.Duration) string {
	secs, nanos := d.GetSeconds(), int64(d.GetNanos())
	sign := ""
	if secs < 0 || nanos < 0 {
		sign, secs, nanos = "-", -secs, -nanos
	}
	s := fmt.Sprintf("%s%d.%09d", sign, secs, nanos)
	s = strings.TrimSuffix(s, "000")
	s = strings.TrimSuffix(s, "000")
	s = strings.TrimSuffix(s, ".000")
	return s + "s"
}

// enumName is an enum value's name without the prefix its type gives every
// value (FLOW_STATUS_ for FlowStatus).
func enumName(ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) string {
	v := ed.Values().ByNumber(n)
	if v == nil {
		return strconv.Itoa(int(n))
	}
	return strings.TrimPrefix(string(v.Name()), upperSnake(string(ed.Name()))+"_")
}

// upperSnake turns a CamelCase name into UPPER_SNAKE ("FlowStatus" is
// "FLOW_STATUS").
func upperSnake(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// LowerCamel turns an UPPER_SNAKE name into LowerCamel
// ("TAKEN_BACK_BY_THIS_PROCESS" is "takenBackByThisProcess").
func LowerCamel(s string) string {
	parts := strings.Split(strings.ToLower(s), "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}
