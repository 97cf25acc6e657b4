package server

import (
	"context"
	"crypto/subtle"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
)

// adminService is dex.AdminService. Describe names the active process
// (A1); a process that is not active (a standby, one that is stopping or
// whose lease is no longer valid) answers UNAVAILABLE with the reason the
// public calls get, so that the caller goes to the active process. A8
// reserves FAILED_PRECONDITION for a step down or its hold-off in
// progress, which a cold standby never is. StepDown checks its precondition (A2) and then answers
// UNIMPLEMENTED: stepping down arrives with standbys.
//
// When an admin credential is configured, both calls need the metadata
// "authorization: Bearer <credential>": UNAUTHENTICATED without it,
// PERMISSION_DENIED with another one (A9).
type adminService struct {
	dexpb.UnimplementedAdminServiceServer
	s *Server
}

func (a *adminService) authorize(ctx context.Context) error {
	want := a.s.opts.AdminCredential
	if want == "" {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return status.Error(codes.Unauthenticated, "an admin credential is required: send \"authorization: Bearer <credential>\"")
	}
	got, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return status.Error(codes.PermissionDenied, "the admin credential is not valid")
	}
	return nil
}

func (a *adminService) Describe(ctx context.Context, _ *dexpb.DescribeRequest) (*dexpb.DescribeResponse, error) {
	if err := a.authorize(ctx); err != nil {
		return nil, err
	}
	b, err := a.s.active()
	if err != nil {
		return nil, err
	}
	id := b.Identity()
	return &dexpb.DescribeResponse{NodeId: id.NodeID, NodeEpoch: id.Epoch, HolderProcessId: id.ProcessID}, nil
}

func (a *adminService) StepDown(ctx context.Context, req *dexpb.StepDownRequest) (*dexpb.StepDownResponse, error) {
	if err := a.authorize(ctx); err != nil {
		return nil, err
	}
	switch {
	case req.GetExpectedNodeId() == "":
		return nil, status.Error(codes.InvalidArgument, "expectedNodeId: must be set")
	case req.GetExpectedNodeEpoch() == 0:
		return nil, status.Error(codes.InvalidArgument, "expectedNodeEpoch: must be set; epochs start at 1")
	}
	b, err := a.s.active()
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, "this process is not active; nothing changed")
	}
	id := b.Identity()
	if req.GetExpectedNodeId() != id.NodeID || req.GetExpectedNodeEpoch() != id.Epoch {
		return nil, status.Errorf(codes.FailedPrecondition,
			"this process is node %q epoch %d, the request expects node %q epoch %d; nothing changed",
			id.NodeID, id.Epoch, req.GetExpectedNodeId(), req.GetExpectedNodeEpoch())
	}
	return nil, status.Error(codes.Unimplemented, "step down is not implemented by this server yet; nothing changed")
}
