package dex_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
)

// Step types with mistakes, for the validation tests.

type NoExecute struct{ dex.Step[Order] }

type PointerExecute struct{ dex.Step[Order] }

func (*PointerExecute) Execute(dex.Context, Order) (dex.Decision, error) { return dex.DeadEnd(), nil }

type WaitWithoutResults struct{ dex.Step[Order] }

func (WaitWithoutResults) WaitFor(dex.Context, Order) (dex.Wait, error) { return nil, nil }
func (WaitWithoutResults) Execute(dex.Context, Order) (dex.Decision, error) {
	return dex.DeadEnd(), nil
}

type ResultsWithoutWait struct{ dex.Step[Order] }

func (ResultsWithoutWait) Execute(dex.Context, Order, dex.Results) (dex.Decision, error) {
	return dex.DeadEnd(), nil
}

type WrongInput struct{ dex.Step[Order] }

func (WrongInput) Execute(dex.Context, int) (dex.Decision, error) { return dex.DeadEnd(), nil }

type RecoversToUndeclared struct{ dex.Step[Order] }

func (RecoversToUndeclared) Options() dex.StepOptions {
	return dex.StepOptions{Recovery: dex.Ref[Refund]()}
}

func (RecoversToUndeclared) Execute(dex.Context, Order) (dex.Decision, error) {
	return dex.DeadEnd(), nil
}

type MovesToUndeclared struct{ dex.Step[Order] }

func (MovesToUndeclared) MovesTo() []dex.StepRef { return []dex.StepRef{dex.Ref[Ship]()} }

func (MovesToUndeclared) Execute(ctx dex.Context, o Order) (dex.Decision, error) {
	return dex.Move(dex.To[Ship](o)), nil
}

type BadOptions struct{ dex.Step[Order] }

func (BadOptions) Options() dex.StepOptions {
	return dex.StepOptions{
		Execute:        dex.MethodOptions{AttemptTimeout: -time.Second, Retry: &dex.RetryPolicy{BackoffCoefficient: 0.5}},
		ExecuteFailure: dex.ExecuteProceedToRecovery,
	}
}

func (BadOptions) Execute(dex.Context, Order) (dex.Decision, error) { return dex.DeadEnd(), nil }

var nilRPC = dex.DefineRPC[int, int]("client-only", nil)

func TestNewWorker_ReportsDefinitionMistakesAtStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		flows []*dex.Flow
		want  []string // each must appear in the error
	}{
		{"no Execute", []*dex.Flow{dex.NewFlow("f").Steps(NoExecute{})},
			[]string{`flow "f"`, `step "NoExecute" has no method Execute(dex.Context, dex_test.Order) (dex.Decision, error)`}},
		{"pointer receiver", []*dex.Flow{dex.NewFlow("f").Steps(PointerExecute{})},
			[]string{`flow "f"`, `step "PointerExecute"`, `register &PointerExecute{}`}},
		{"pointer registered", []*dex.Flow{dex.NewFlow("f").Steps(&PointerExecute{}, Ship{})}, nil},
		{"WaitFor without Results", []*dex.Flow{dex.NewFlow("f").Steps(WaitWithoutResults{})},
			[]string{`flow "f"`, `step "WaitWithoutResults" has a WaitFor, so its Execute must be Execute(dex.Context, dex_test.Order, dex.Results)`}},
		{"Results without WaitFor", []*dex.Flow{dex.NewFlow("f").Steps(ResultsWithoutWait{})},
			[]string{`flow "f"`, `step "ResultsWithoutWait": Execute takes dex.Results but the step has no method WaitFor`}},
		{"wrong input type", []*dex.Flow{dex.NewFlow("f").Steps(WrongInput{})},
			[]string{`flow "f"`, `step "WrongInput" has no method Execute(dex.Context, dex_test.Order)`, `does not match`}},
		{"undeclared recovery step", []*dex.Flow{dex.NewFlow("f").Start(RecoversToUndeclared{})},
			[]string{`flow "f": step "RecoversToUndeclared": options: recovery step "Refund" is not declared`}},
		{"undeclared flow-default recovery", []*dex.Flow{dex.NewFlow("f").Start(Ship{}).Defaults(dex.StepOptions{Recovery: dex.Ref[Refund]()})},
			[]string{`flow "f": default options: recovery step "Refund" is not declared`}},
		{"undeclared movement target", []*dex.Flow{dex.NewFlow("f").Start(MovesToUndeclared{})},
			[]string{`flow "f": step "MovesToUndeclared": MovesTo names step "Ship", which the flow does not declare`}},
		{"invalid options", []*dex.Flow{dex.NewFlow("f").Start(BadOptions{})},
			[]string{`flow "f": step "BadOptions": options`, "AttemptTimeout is negative", "BackoffCoefficient 0.5", "Recovery is not set"}},
		{"duplicate names", []*dex.Flow{dex.NewFlow("f").Start(Ship{}).
			Attributes(Status, dex.DefineAttribute[int]("status")).
			Channels(Notes, Notes).
			RPCs(GetStatus, GetStatus)},
			[]string{`flow "f": attribute "status" is declared twice`, `flow "f": channel "notes" is declared twice`, `flow "f": RPC "status" is declared twice`}},
		{"RPC without handler", []*dex.Flow{dex.NewFlow("f").RPCs(nilRPC)},
			[]string{`flow "f": RPC "client-only" has no handler`}},
		{"start twice", []*dex.Flow{dex.NewFlow("f").Start(Ship{}).Start(Refund{})},
			[]string{`flow "f": start step set twice`}},
		{"empty flow", []*dex.Flow{dex.NewFlow("f")}, []string{`flow "f": no steps and no RPCs`}},
		{"no name", []*dex.Flow{dex.NewFlow("").Start(Ship{})}, []string{"empty flow type name"}},
		{"duplicate flows", []*dex.Flow{dex.NewFlow("f").Start(Ship{}), dex.NewFlow("f").Start(Refund{})},
			[]string{`flow "f" is given twice`}},
		{"no flows", nil, []string{"no flows to serve"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"127.0.0.1:1"}}, tt.flows...)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("NewWorker = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("NewWorker = nil, want an error")
			}
			if !errors.Is(err, dex.ErrInvalidFlow) {
				t.Errorf("error does not match ErrInvalidFlow: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestFlow_ValidateAcceptsTheTestFlow(t *testing.T) {
	t.Parallel()
	if err := testFlow.Validate(); err != nil {
		t.Fatal(err)
	}
	if testFlow.Name() != "order" {
		t.Errorf("name = %q", testFlow.Name())
	}
	if got := dex.Ref[*Charge]().Name(); got != "Charge" {
		t.Errorf("Ref[*Charge] = %q", got)
	}
}
