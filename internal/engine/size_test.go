package engine

import (
	"testing"
	"unsafe"
)

// TestStepExecSize pins StepExec within Go's 512-byte allocation class:
// every state clone copies the active step executions, so crossing into the
// 576-byte class costs every flow 12 % more per step, whether it uses the
// feature that added the field or not (issue 14: a tier-2 feature adds no
// cost to flows that do not use it). Put fields few steps need behind a
// pointer (ResolvedOptions.Rare, StepExec.Wait).
func TestStepExecSize(t *testing.T) {
	if got := unsafe.Sizeof(StepExec{}); got > 512 {
		t.Errorf("StepExec is %d bytes, over the 512-byte allocation class", got)
	}
}

// TestFlowStateSize pins FlowState within the 448-byte allocation class
// it reached with tier 2 (376 bytes, the 384 class, before it): each
// applied record clones it. A field few runs need goes behind a pointer
// (FlowState.Opts, FlowState.Parent).
func TestFlowStateSize(t *testing.T) {
	if got := unsafe.Sizeof(FlowState{}); got > 448 {
		t.Errorf("FlowState is %d bytes, over the 448-byte allocation class", got)
	}
}
