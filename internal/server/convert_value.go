package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// Values: an EncodedValue is stored as engine.Value{Type: encoding + ":" +
// type, Data: data}. An unset EncodedValue is the zero engine.Value, so
// "no value" and "an empty binary value" (Type ":") stay apart. The
// encoding must not contain ':'. A value that declares encoding "json"
// must hold valid JSON text: it is refused here, at the boundary, rather
// than committed and found undecodable by every later reader.

// encodingJSON is the encoding whose bytes the server checks.
const encodingJSON = "json"

// argError is a malformed request field (INVALID_ARGUMENT naming it).
func argError(field, format string, args ...any) error {
	return &engine.Error{Code: engine.CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

func valueIn(field string, v *dexpb.EncodedValue) (engine.Value, error) {
	if v == nil {
		return engine.Value{}, nil
	}
	if strings.Contains(v.GetEncoding(), ":") {
		return engine.Value{}, argError(field+".encoding", "%q must not contain ':'", v.GetEncoding())
	}
	if v.GetEncoding() == encodingJSON && !engine.ValidJSON(v.GetData()) {
		return engine.Value{}, argError(field+".data", "is declared %q but is not valid JSON (%d bytes)", encodingJSON, len(v.GetData()))
	}
	return engine.Value{Type: v.GetEncoding() + ":" + v.GetType(), Data: v.GetData()}, nil
}

func valueOut(v engine.Value) *dexpb.EncodedValue {
	if v.Type == "" && len(v.Data) == 0 {
		return nil
	}
	enc, typ, ok := strings.Cut(v.Type, ":")
	if !ok {
		enc, typ = "", v.Type
	}
	return &dexpb.EncodedValue{Encoding: enc, Type: typ, Data: v.Data}
}

// requiredValueIn is valueIn for fields that must carry a value.
func requiredValueIn(field string, v *dexpb.EncodedValue) (engine.Value, error) {
	if v == nil {
		return engine.Value{}, argError(field, "must be set")
	}
	return valueIn(field, v)
}

func attributesIn(field string, as []*dexpb.Attribute) ([]engine.AttributeWrite, error) {
	out := make([]engine.AttributeWrite, 0, len(as))
	for i, a := range as {
		f := fmt.Sprintf("%s[%d]", field, i)
		if a.GetName() == "" {
			return nil, argError(f+".name", "must not be empty")
		}
		v, err := requiredValueIn(f+".value", a.GetValue())
		if err != nil {
			return nil, err
		}
		out = append(out, engine.AttributeWrite{Name: a.GetName(), Value: v})
	}
	return out, nil
}

// attributesOut renders attributes ordered by name; names, when given,
// select which.
func attributesOut(m map[string]engine.Value, names []string) []*dexpb.Attribute {
	keys := make([]string, 0, len(m))
	for k := range m {
		if len(names) == 0 || slices.Contains(names, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]*dexpb.Attribute, 0, len(keys))
	for _, k := range keys {
		out = append(out, &dexpb.Attribute{Name: k, Value: valueOut(m[k])})
	}
	return out
}

func publishesIn(field string, ps []*dexpb.ChannelPublish) ([]engine.Publish, error) {
	var out []engine.Publish
	for i, p := range ps {
		f := fmt.Sprintf("%s[%d]", field, i)
		if p.GetChannel() == "" {
			return nil, argError(f+".channel", "must not be empty")
		}
		if len(p.GetValues()) == 0 {
			return nil, argError(f+".values", "must hold at least one message")
		}
		for j, v := range p.GetValues() {
			ev, err := requiredValueIn(fmt.Sprintf("%s.values[%d]", f, j), v)
			if err != nil {
				return nil, err
			}
			out = append(out, engine.Publish{Channel: p.GetChannel(), Value: ev})
		}
	}
	return out, nil
}

func stagedIn(field string, w *dexpb.StagedWrites) (engine.Staged, error) {
	if w == nil {
		return engine.Staged{}, nil
	}
	as, err := attributesIn(field+".attributeWrites", w.GetAttributeWrites())
	if err != nil {
		return engine.Staged{}, err
	}
	ps, err := publishesIn(field+".channelPublishes", w.GetChannelPublishes())
	if err != nil {
		return engine.Staged{}, err
	}
	evs, err := eventsIn(field+".events", w.GetEvents())
	if err != nil {
		return engine.Staged{}, err
	}
	out := engine.Staged{Attributes: as, Publishes: ps}
	if len(evs) > 0 {
		out.StagedEvents = &engine.StagedEvents{Events: evs}
	}
	return out, nil
}

// optDuration converts an optional protobuf duration; negative is invalid.
func optDuration(field string, d *durationpb.Duration) (*time.Duration, error) {
	if d == nil {
		return nil, nil
	}
	if err := d.CheckValid(); err != nil {
		return nil, argError(field, "%v", err)
	}
	v := d.AsDuration()
	if v < 0 {
		return nil, argError(field, "must not be negative")
	}
	return &v, nil
}

func durOut(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func tsOut(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func methodOut(m engine.Method) dexpb.TaskKind {
	switch m {
	case engine.MethodWaitFor:
		return dexpb.TaskKind_TASK_KIND_WAIT_FOR
	case engine.MethodExecute:
		return dexpb.TaskKind_TASK_KIND_EXECUTE
	case engine.MethodRPC:
		return dexpb.TaskKind_TASK_KIND_RPC
	}
	return dexpb.TaskKind_TASK_KIND_UNSPECIFIED
}

// failureOut renders an attempt failure (E14).
func failureOut(m engine.Method, attempt int, at time.Time, f engine.Failure) *dexpb.AttemptFailure {
	out := &dexpb.AttemptFailure{Method: methodOut(m), Attempt: uint32(attempt), Message: f.Message, Time: tsOut(at)}
	switch f.Type {
	case engine.FailureTimeout:
		out.Kind = dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_TIMEOUT
	case engine.FailureNotCompleted:
		out.Kind = dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_NOT_COMPLETED
	case engine.FailureHeartbeat:
		out.Kind = dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_HEARTBEAT_TIMEOUT
	case string(engine.ErrInvalidUserFlowCode):
		out.Kind = dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_INVALID_USER_FLOW_CODE
	default:
		out.Kind = dexpb.AttemptFailureKind_ATTEMPT_FAILURE_KIND_WORKER_ERROR
		out.ErrorType, out.Stack = f.Type, f.Stack
	}
	return out
}

// flowTimeoutIn converts a flow timeout and its policy (StartFlow, a
// SubFlow condition); prefix goes before the field names.
func flowTimeoutIn(prefix string, d *durationpb.Duration, p dexpb.FlowTimeoutPolicy) (time.Duration, engine.TimeoutPolicy, error) {
	timeout, err := optDuration(prefix+"flowTimeout", d)
	if err != nil {
		return 0, "", err
	}
	var t time.Duration
	if timeout != nil {
		t = *timeout
	}
	switch p {
	case dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_UNSPECIFIED:
		return t, "", nil
	case dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_FAIL:
		return t, engine.TimeoutFail, nil
	case dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_CANCEL:
		return t, engine.TimeoutCancel, nil
	case dexpb.FlowTimeoutPolicy_FLOW_TIMEOUT_POLICY_HANDLER:
		return t, engine.TimeoutRunHandler, nil // E34: the engine checks the handler
	}
	return 0, "", argError(prefix+"flowTimeoutPolicy", "unknown value %d", p)
}

// localsIn converts a WaitFor's step-execution locals (E32); a key given
// twice is invalid. The engine checks their limits.
func localsIn(field string, ls []*dexpb.StepLocal) (map[string]engine.Value, error) {
	if len(ls) == 0 {
		return nil, nil
	}
	out := make(map[string]engine.Value, len(ls))
	for i, l := range ls {
		f := fmt.Sprintf("%s[%d]", field, i)
		if _, dup := out[l.GetKey()]; dup {
			return nil, argError(f+".key", "local %q is given twice", l.GetKey())
		}
		v, err := valueIn(f+".value", l.GetValue())
		if err != nil {
			return nil, err
		}
		out[l.GetKey()] = v
	}
	return out, nil
}

// localsOut renders an Execute task's locals, sorted by key.
func localsOut(ls map[string]engine.Value) []*dexpb.StepLocal {
	if len(ls) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(ls))
	out := make([]*dexpb.StepLocal, 0, len(keys))
	for _, k := range keys {
		out = append(out, &dexpb.StepLocal{Key: k, Value: valueOut(ls[k])})
	}
	return out
}

// eventsIn converts a handler's user events (E32).
func eventsIn(field string, evs []*dexpb.UserEvent) ([]engine.UserEvent, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	out := make([]engine.UserEvent, 0, len(evs))
	for i, ev := range evs {
		v, err := valueIn(fmt.Sprintf("%s[%d].value", field, i), ev.GetValue())
		if err != nil {
			return nil, err
		}
		out = append(out, engine.UserEvent{Name: ev.GetName(), Value: v})
	}
	return out, nil
}
