package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dexzd/dexzd/api/dexpb"
)

// adminService is dex.AdminService. Describe names the active process
// (A1); a process that is not active (a standby, one that is stopping or
// whose lease is no longer valid) answers UNAVAILABLE with the reason the
// public calls get, so that the caller goes to the active process, and
// one whose step down or hold-off is in progress answers
// FAILED_PRECONDITION (A8). StepDown checks its precondition against the
// serving instance of the connection it arrived on (A2; a standby's
// connection, even of a process that has just taken over, has none: A6)
// and hands the step down to the instance's StepDownFunc (A3-A7).
//
// Both calls need role admin (auth.go): when an admin credential is
// configured, the metadata "authorization: Bearer <credential>" grants
// it; without credentials the call answers UNAUTHENTICATED, with another
// token PERMISSION_DENIED (A9).
type adminService struct {
	dexpb.UnimplementedAdminServiceServer
	s *Server
}

func (a *adminService) Describe(ctx context.Context, _ *dexpb.DescribeRequest) (*dexpb.DescribeResponse, error) {
	if msg, ok := a.s.steppingDown(); ok {
		return nil, status.Error(codes.FailedPrecondition, "a step down or its hold-off is in progress: "+msg)
	}
	b, err := a.s.active()
	if err != nil {
		return nil, err
	}
	id := b.Identity()
	return &dexpb.DescribeResponse{NodeId: id.NodeID, NodeEpoch: id.Epoch, HolderProcessId: id.ProcessID}, nil
}

func (a *adminService) StepDown(ctx context.Context, req *dexpb.StepDownRequest) (*dexpb.StepDownResponse, error) {
	switch {
	case req.GetExpectedNodeId() == "":
		return nil, status.Error(codes.InvalidArgument, "expectedNodeId: must be set")
	case req.GetExpectedNodeEpoch() == 0:
		return nil, status.Error(codes.InvalidArgument, "expectedNodeEpoch: must be set; epochs start at 1")
	}
	if _, ok := a.s.steppingDown(); ok {
		return nil, status.Error(codes.FailedPrecondition, "a step down of this process is already in progress; nothing changed")
	}
	b, err := a.s.active()
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition,
			"the process behind this connection is not the active one (a standby, or no longer serving); nothing changed")
	}
	id := b.Identity()
	if req.GetExpectedNodeId() != id.NodeID || req.GetExpectedNodeEpoch() != id.Epoch {
		return nil, status.Errorf(codes.FailedPrecondition,
			"this process is node %q epoch %d, the request expects node %q epoch %d; nothing changed",
			id.NodeID, id.Epoch, req.GetExpectedNodeId(), req.GetExpectedNodeEpoch())
	}
	fn := a.s.stepDown.fn.Load()
	if fn == nil {
		return nil, status.Error(codes.Unimplemented, "this server cannot step down; nothing changed")
	}
	out, err := (*fn)(ctx)
	switch {
	case errors.Is(err, ErrStepDownInProgress):
		return nil, status.Error(codes.FailedPrecondition, "a step down of this process is already in progress; nothing changed")
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	case err != nil:
		return nil, status.Errorf(codes.Internal, "step down: %v", err)
	}
	return stepDownResponse(out), nil
}

func stepDownResponse(o StepDownOutcome) *dexpb.StepDownResponse {
	r := &dexpb.StepDownResponse{
		NodeId:                    o.NodeID,
		ReleasedNodeEpoch:         o.ReleasedEpoch,
		LeaseReacquisitionHoldOff: durationpb.New(o.HoldOff),
		LeaseHolderUnknownDetail:  o.UnknownDetail,
		ActiveHolderProcessId:     o.ActiveProcessID,
	}
	switch o.Holder {
	case TakenOverByAnotherProcess:
		r.LeaseHolderAfterStepDown = dexpb.LeaseHolderAfterStepDown_LEASE_HOLDER_AFTER_STEP_DOWN_TAKEN_OVER_BY_ANOTHER_PROCESS
	case TakenBackByThisProcess:
		r.LeaseHolderAfterStepDown = dexpb.LeaseHolderAfterStepDown_LEASE_HOLDER_AFTER_STEP_DOWN_TAKEN_BACK_BY_THIS_PROCESS
	default:
		r.LeaseHolderAfterStepDown = dexpb.LeaseHolderAfterStepDown_LEASE_HOLDER_AFTER_STEP_DOWN_UNKNOWN
	}
	if o.ActiveEpoch != 0 {
		r.ActiveNodeEpoch = &o.ActiveEpoch
	}
	return r
}
