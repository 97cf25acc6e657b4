package server

import (
	"fmt"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/engine"
)

// stepOptionsIn converts step options; nil stays nil (inherit everything).
func stepOptionsIn(field string, o *dexpb.StepOptions) (*engine.StepOptions, error) {
	if o == nil {
		return nil, nil
	}
	out := &engine.StepOptions{}
	var err error
	if out.WaitFor, err = methodOptionsIn(field+".waitFor", o.GetWaitFor()); err != nil {
		return nil, err
	}
	if out.Execute, err = methodOptionsIn(field+".execute", o.GetExecute()); err != nil {
		return nil, err
	}
	switch o.GetWaitForFailurePolicy() {
	case dexpb.WaitForFailurePolicy_WAIT_FOR_FAILURE_POLICY_UNSPECIFIED:
	case dexpb.WaitForFailurePolicy_WAIT_FOR_FAILURE_POLICY_FAIL_FLOW:
		out.WaitForFailure = engine.FailFlow
	case dexpb.WaitForFailurePolicy_WAIT_FOR_FAILURE_POLICY_PROCEED:
		out.WaitForFailure = engine.Proceed
	default:
		return nil, argError(field+".waitForFailurePolicy", "unknown value %d", o.GetWaitForFailurePolicy())
	}
	switch o.GetExecuteFailurePolicy() {
	case dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_UNSPECIFIED, dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_FAIL_FLOW:
		// FAIL_FLOW is the engine's behaviour without a recovery step.
	case dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_PROCEED_TO_RECOVERY_STEP:
		if o.GetExecuteRecoveryStepType() == "" {
			return nil, argError(field+".executeRecoveryStepType", "is required with EXECUTE_FAILURE_POLICY_PROCEED_TO_RECOVERY_STEP")
		}
		out.RecoveryStep = o.GetExecuteRecoveryStepType()
	default:
		return nil, argError(field+".executeFailurePolicy", "unknown value %d", o.GetExecuteFailurePolicy())
	}
	return out, nil
}

func methodOptionsIn(field string, o *dexpb.StepMethodOptions) (*engine.MethodOptions, error) {
	if o == nil {
		return nil, nil
	}
	out := &engine.MethodOptions{}
	var err error
	if out.Timeout, err = optDuration(field+".attemptTimeout", o.GetAttemptTimeout()); err != nil {
		return nil, err
	}
	if len(o.GetLocks()) > 0 {
		out.Locks = o.GetLocks()
	}
	if out.HeartbeatTimeout, err = optDuration(field+".heartbeatTimeout", o.GetHeartbeatTimeout()); err != nil {
		return nil, err
	}
	switch o.GetDurability() {
	case dexpb.AttemptDurability_ATTEMPT_DURABILITY_UNSPECIFIED:
	case dexpb.AttemptDurability_ATTEMPT_DURABILITY_SYNC:
		out.Durability = engine.SYNC
	case dexpb.AttemptDurability_ATTEMPT_DURABILITY_ASYNC:
		out.Durability = engine.ASYNC
	default:
		return nil, argError(field+".durability", "unknown value %d", o.GetDurability())
	}
	if out.Retry, err = retryIn(field+".retryPolicy", o.GetRetryPolicy()); err != nil {
		return nil, err
	}
	return out, nil
}

// retryIn converts a retry policy (nil: none); field names it in errors.
func retryIn(field string, r *dexpb.RetryPolicy) (*engine.RetryOptions, error) {
	if r == nil {
		return nil, nil
	}
	ro := &engine.RetryOptions{}
	var err error
	if ro.InitialInterval, err = optDuration(field+".initialInterval", r.GetInitialInterval()); err != nil {
		return nil, err
	}
	if ro.MaxInterval, err = optDuration(field+".maximumInterval", r.GetMaximumInterval()); err != nil {
		return nil, err
	}
	if ro.MaxTotal, err = optDuration(field+".maximumTotalDuration", r.GetMaximumTotalDuration()); err != nil {
		return nil, err
	}
	if r.BackoffCoefficient != nil {
		c := r.GetBackoffCoefficient()
		ro.Coefficient = &c
	}
	if r.MaximumAttempts != nil {
		n := int(r.GetMaximumAttempts())
		ro.MaxAttempts = &n
	}
	return ro, nil
}

// resolvedOut renders a step execution's resolved options, every field
// filled in.
func resolvedOut(r engine.ResolvedOptions) *dexpb.StepOptions {
	out := &dexpb.StepOptions{
		WaitFor:              methodPolicyOut(r.WaitFor, r.MethodLocks(engine.MethodWaitFor)),
		Execute:              methodPolicyOut(r.Execute, r.MethodLocks(engine.MethodExecute)),
		WaitForFailurePolicy: dexpb.WaitForFailurePolicy_WAIT_FOR_FAILURE_POLICY_FAIL_FLOW,
		ExecuteFailurePolicy: dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_FAIL_FLOW,
	}
	if r.WaitForFailure == engine.Proceed {
		out.WaitForFailurePolicy = dexpb.WaitForFailurePolicy_WAIT_FOR_FAILURE_POLICY_PROCEED
	}
	if r.RecoveryStep != "" {
		out.ExecuteFailurePolicy = dexpb.ExecuteFailurePolicy_EXECUTE_FAILURE_POLICY_PROCEED_TO_RECOVERY_STEP
		out.ExecuteRecoveryStepType = r.RecoveryStep
	}
	if h := r.HeartbeatTimeouts(); h != (engine.HeartbeatPolicy{}) {
		out.WaitFor.HeartbeatTimeout, out.Execute.HeartbeatTimeout = durOut(h.WaitFor), durOut(h.Execute)
	}
	return out
}

func methodPolicyOut(p engine.MethodPolicy, locks []string) *dexpb.StepMethodOptions {
	coef := p.Retry.Coefficient
	attempts := uint32(p.Retry.MaxAttempts)
	out := &dexpb.StepMethodOptions{
		AttemptTimeout: durationpb.New(p.Timeout),
		RetryPolicy: &dexpb.RetryPolicy{
			InitialInterval: durationpb.New(p.Retry.InitialInterval), BackoffCoefficient: &coef,
			MaximumInterval: durationpb.New(p.Retry.MaxInterval), MaximumAttempts: &attempts,
			MaximumTotalDuration: durationpb.New(p.Retry.MaxTotal),
		},
		Durability: dexpb.AttemptDurability_ATTEMPT_DURABILITY_SYNC,
		Locks:      locks,
	}
	if p.Durability == engine.ASYNC {
		out.Durability = dexpb.AttemptDurability_ATTEMPT_DURABILITY_ASYNC
	}
	return out
}

// movementIn converts a movement; values above the limit are left to the
// engine, which knows the limit.
func movementIn(field string, m *dexpb.Movement) (engine.Movement, error) {
	if m.GetStepType() == "" {
		return engine.Movement{}, argError(field+".stepType", "must not be empty")
	}
	return movementBodyIn(field, m)
}

// movementBodyIn converts a movement whose step type may be empty.
func movementBodyIn(field string, m *dexpb.Movement) (engine.Movement, error) {
	in, err := valueIn(field+".input", m.GetInput())
	if err != nil {
		return engine.Movement{}, err
	}
	opts, err := stepOptionsIn(field+".options", m.GetOptions())
	if err != nil {
		return engine.Movement{}, err
	}
	return engine.Movement{StepType: m.GetStepType(), Input: in, Options: opts, SkipWaitFor: m.GetSkipWaitFor()}, nil
}

func movementsIn(field string, ms []*dexpb.Movement) ([]engine.Movement, error) {
	out := make([]engine.Movement, 0, len(ms))
	for i, m := range ms {
		em, err := movementIn(fmt.Sprintf("%s[%d]", field, i), m)
		if err != nil {
			return nil, err
		}
		out = append(out, em)
	}
	return out, nil
}

// decisionIn converts an Execute's decision (E5).
func decisionIn(d *dexpb.StepDecision) (engine.Decision, error) {
	dec, err := decisionKindIn(d)
	if err == nil && (len(d.GetCancelStepTypes()) > 0 || len(d.GetCancelSiblingStepTypes()) > 0) {
		dec.Cancel = &engine.CancelSelector{Steps: d.GetCancelStepTypes(), Siblings: d.GetCancelSiblingStepTypes()}
	}
	return dec, err
}

func decisionKindIn(d *dexpb.StepDecision) (engine.Decision, error) {
	switch d := d.GetDecision().(type) {
	case *dexpb.StepDecision_Movements:
		ms, err := movementsIn("decision.movements", d.Movements.GetMovements())
		if err != nil {
			return engine.Decision{}, err
		}
		return engine.Decision{Kind: engine.DecideMovements, Movements: ms}, nil
	case *dexpb.StepDecision_GracefulComplete:
		out, err := valueIn("decision.gracefulComplete.output", d.GracefulComplete.GetOutput())
		return engine.Decision{Kind: engine.DecideGracefulComplete, Output: out}, err
	case *dexpb.StepDecision_ForceComplete:
		out, err := valueIn("decision.forceComplete.output", d.ForceComplete.GetOutput())
		return engine.Decision{Kind: engine.DecideForceComplete, Output: out}, err
	case *dexpb.StepDecision_ForceFail:
		return engine.Decision{Kind: engine.DecideForceFail, Reason: d.ForceFail.GetReason()}, nil
	case *dexpb.StepDecision_DeadEnd:
		return engine.Decision{Kind: engine.DecideDeadEnd}, nil
	case *dexpb.StepDecision_ForceCompleteIfChannelsEmpty:
		c := d.ForceCompleteIfChannelsEmpty
		out, err := valueIn("decision.forceCompleteIfChannelsEmpty.output", c.GetOutput())
		if err != nil {
			return engine.Decision{}, err
		}
		ms, err := movementsIn("decision.forceCompleteIfChannelsEmpty.fallback", c.GetFallback())
		if err != nil {
			return engine.Decision{}, err
		}
		return engine.Decision{Kind: engine.DecideForceCompleteIfChannelsEmpty, Output: out, Movements: ms,
			IfChannelsEmpty: &engine.IfChannelsEmpty{Channels: c.GetChannels()}}, nil
	default:
		return engine.Decision{}, argError("decision", "exactly one decision must be set")
	}
}

// helloIn converts and checks a worker's Hello (W1).
func helloIn(h *dexpb.Hello) (WorkerHello, error) {
	if h.GetWorkerId() == "" {
		return WorkerHello{}, argError("hello.workerId", "must not be empty")
	}
	if len(h.GetFlowTypes()) == 0 {
		return WorkerHello{}, argError("hello.flowTypes", "must declare at least one flow type")
	}
	if h.GetMaxConcurrentTasks() < 1 {
		return WorkerHello{}, argError("hello.maxConcurrentTasks", "must be at least 1")
	}
	out := WorkerHello{WorkerID: h.GetWorkerId(), MaxConcurrent: int(h.GetMaxConcurrentTasks()), SDKVersion: h.GetSdkVersion()}
	seen := map[string]bool{}
	for i, ft := range h.GetFlowTypes() {
		f := fmt.Sprintf("hello.flowTypes[%d]", i)
		if ft.GetFlowType() == "" {
			return WorkerHello{}, argError(f+".flowType", "must not be empty")
		}
		if seen[ft.GetFlowType()] {
			return WorkerHello{}, argError(f+".flowType", "flow type %q is declared twice", ft.GetFlowType())
		}
		seen[ft.GetFlowType()] = true
		def := &engine.FlowDefinition{Type: ft.GetFlowType(), Steps: map[string]engine.StepDef{},
			RPCs: ft.GetRpcNames(), Attributes: ft.GetAttributeNames(), Channels: ft.GetChannelNames()}
		var err error
		if def.AttributeTypes, err = valueTypesIn(f+".attributeTypes", ft.GetAttributeTypes(), def.Attributes); err != nil {
			return WorkerHello{}, err
		}
		if def.ChannelTypes, err = valueTypesIn(f+".channelTypes", ft.GetChannelTypes(), def.Channels); err != nil {
			return WorkerHello{}, err
		}
		if def.Indexed, err = indexedIn(f+".indexedAttributes", ft.GetIndexedAttributes(), def.Attributes); err != nil {
			return WorkerHello{}, err
		}
		for j, s := range ft.GetSteps() {
			sf := fmt.Sprintf("%s.steps[%d]", f, j)
			if s.GetStepType() == "" {
				return WorkerHello{}, argError(sf+".stepType", "must not be empty")
			}
			if _, dup := def.Steps[s.GetStepType()]; dup {
				return WorkerHello{}, argError(sf+".stepType", "step type %q is declared twice", s.GetStepType())
			}
			opts, err := stepOptionsIn(sf+".options", s.GetOptions())
			if err != nil {
				return WorkerHello{}, err
			}
			input, err := valueTypeIn(sf+".inputType", s.GetInputType())
			if err != nil {
				return WorkerHello{}, err
			}
			if s.GetStepType() != ft.GetStartStepType() {
				// Every run stores its definition: keep only the input
				// type a StartFlow is checked against (most name no step).
				input = nil
			}
			def.Steps[s.GetStepType()] = engine.StepDef{HasWaitFor: s.GetHasWaitFor(), Options: opts, Input: input}
		}
		if st := ft.GetStartStepType(); st != "" {
			if _, ok := def.Steps[st]; !ok {
				return WorkerHello{}, argError(f+".startStepType", "step type %q is not among the declared steps", st)
			}
			def.Start = st
		}
		defaults, err := stepOptionsIn(f+".defaultStepOptions", ft.GetDefaultStepOptions())
		if err != nil {
			return WorkerHello{}, err
		}
		out.FlowTypes = append(out.FlowTypes, FlowTypeDecl{Definition: def, Defaults: defaults})
	}
	return out, nil
}
