package dex

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Covers: E15, E17
func TestConditions_EncodeBounds(t *testing.T) {
	t.Parallel()
	ch := DefineChannel[int]("c")
	tests := []struct {
		name    string
		cond    Condition
		want    *dexpb.ChannelCondition
		wantErr string
	}{
		{"ForOne", ch.ForOne(), &dexpb.ChannelCondition{Channel: "c", Bound: dexpb.ChannelBound_CHANNEL_BOUND_FOR_ONE}, ""},
		{"ForN", ch.ForN(3), &dexpb.ChannelCondition{Channel: "c", Bound: dexpb.ChannelBound_CHANNEL_BOUND_FOR_N, N: 3}, ""},
		{"AtLeast 0", ch.AtLeast(0), &dexpb.ChannelCondition{Channel: "c", Bound: dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST}, ""},
		{"AtMost", ch.AtMost(5), &dexpb.ChannelCondition{Channel: "c", Bound: dexpb.ChannelBound_CHANNEL_BOUND_AT_MOST, N: 5}, ""},
		{"AtLeastAtMost", ch.AtLeastAtMost(2, 4), &dexpb.ChannelCondition{Channel: "c", Bound: dexpb.ChannelBound_CHANNEL_BOUND_AT_LEAST_AT_MOST, Min: 2, Max: 4}, ""},
		{"ForN 0", ch.ForN(0), nil, "invalid bounds"},
		{"AtMost 0", ch.AtMost(0), nil, "invalid bounds"},
		{"AtLeast -1", ch.AtLeast(-1), nil, "invalid bounds"},
		{"min above max", ch.AtLeastAtMost(3, 2), nil, "invalid bounds"},
		{"negative timer", Timer(-time.Second), nil, "negative duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, err := tt.cond.waitProto()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := w.GetUntil().GetChannel()
			if got.GetChannel() != tt.want.GetChannel() || got.GetBound() != tt.want.GetBound() || got.GetN() != tt.want.GetN() ||
				got.GetMin() != tt.want.GetMin() || got.GetMax() != tt.want.GetMax() {
				t.Errorf("condition = %v, want %v", got, tt.want)
			}
		})
	}
}

// Covers: E15
func TestWaits_CombineAndCheckIDs(t *testing.T) {
	t.Parallel()
	ch := DefineChannel[int]("c")
	w, err := AllOf(Timer(time.Minute), ch.ForOne().WithID("x")).waitProto()
	if err != nil || len(w.GetAllOf().GetConditions()) != 2 || w.GetAllOf().GetConditions()[1].GetId() != "x" {
		t.Errorf("AllOf = %v, %v", w, err)
	}
	if w, err := AllOf().waitProto(); err != nil || w.GetAllOf() == nil {
		t.Errorf("empty AllOf = %v, %v", w, err)
	}
	if _, err := AnyOf().waitProto(); err == nil {
		t.Error("empty AnyOf accepted")
	}
	if _, err := AnyOf(Timer(1).WithID("x"), ch.ForOne().WithID("x")).waitProto(); err == nil || !strings.Contains(err.Error(), `"x" is used twice`) {
		t.Errorf("duplicate IDs: %v", err)
	}
}

type typedErr struct{}

func (typedErr) Error() string     { return "typed" }
func (typedErr) ErrorType() string { return "billing.Typed" }

// Covers: E14
func TestErrorTypeName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
	}{
		{errors.New("x"), "*errors.errorString"},
		{fmt.Errorf("wrap: %w", fs.ErrNotExist), "*errors.errorString"},
		{fmt.Errorf("wrap: %w", &fs.PathError{Op: "open", Err: fs.ErrNotExist}), "*fs.PathError"},
		{fmt.Errorf("wrap: %w", typedErr{}), "billing.Typed"},
		{RetryAfter(time.Second, &fs.PathError{}), "*fs.PathError"},
		{errors.Join(errors.New("a"), typedErr{}), "billing.Typed"},
	}
	for _, tt := range tests {
		if got := errorTypeName(tt.err); got != tt.want {
			t.Errorf("errorTypeName(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// Covers: E9, E13
func TestStepOptions_Proto(t *testing.T) {
	t.Parallel()
	if (StepOptions{}).proto() != nil {
		t.Error("zero options are not unset")
	}
	p := StepOptions{
		WaitFor: MethodOptions{Retry: &RetryPolicy{MaximumAttempts: Unlimited, MaximumTotalDuration: Unlimited}},
		Execute: MethodOptions{Retry: &RetryPolicy{MaximumInterval: time.Minute, MaximumTotalDuration: time.Hour}},
	}.proto()
	wr := p.GetWaitFor().GetRetryPolicy()
	if wr.MaximumAttempts == nil || wr.GetMaximumAttempts() != 0 || wr.GetMaximumTotalDuration() == nil || wr.GetMaximumTotalDuration().AsDuration() != 0 {
		t.Errorf("explicit unlimited = %v", wr)
	}
	er := p.GetExecute().GetRetryPolicy()
	if er.MaximumAttempts != nil || er.BackoffCoefficient != nil || er.GetMaximumInterval().AsDuration() != time.Minute ||
		er.GetMaximumTotalDuration().AsDuration() != time.Hour {
		t.Errorf("execute retry = %v", er)
	}
	if p.GetExecuteFailurePolicy() != 0 || p.GetWaitForFailurePolicy() != 0 {
		t.Errorf("policies = %v", p)
	}
}

// The worker's Hello declares each flow type's start step, so that a
// StartFlow naming none (dexcli without --step) starts there (E2).
//
// Covers: E2
func TestHello_DeclaresTheStartStep(t *testing.T) {
	t.Parallel()
	reg, err := newRegistry([]*Flow{NewFlow("f").Start(declFirst{}), NewFlow("rpc-only").RPCs(DefineRPC("r", func(Context, int) (int, error) { return 0, nil }))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range reg.order {
		d := f.declaration()
		got[d.GetFlowType()] = d.GetStartStepType()
	}
	if got["f"] != "declFirst" || got["rpc-only"] != "" {
		t.Fatalf("declared start steps = %v, want f: declFirst, rpc-only: none", got)
	}
}

type declFirst struct{ Step[int] }

func (declFirst) Execute(Context, int) (Decision, error) { return GracefulComplete(0), nil }
