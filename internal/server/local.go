package server

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/auth"
)

// Local is the server's FlowService and AdminService.Describe called in
// process, by the web UI (package web): every call passes admission and
// its handler exactly as a gRPC call on the same phase would, so it sees
// the same gate (UNAVAILABLE with the standby's reason) and the same
// errors (status errors with the API's codes). Authorization is the
// caller's: it checks Permission(method) against its own principal
// before calling.
type Local struct{ s *Server }

// Local returns s's in-process API.
func (s *Server) Local() Local { return Local{s: s} }

// Permission is the permission a FlowService or AdminService method
// needs (Permissions; admin for a method missing there).
func Permission(method string) auth.Permission { return permission(method) }

// call runs handler under admission for method, as the interceptor chain
// of a gRPC call does after authorization.
func call[Req, Resp any](ctx context.Context, l Local, method string, req Req, h func(context.Context, Req) (Resp, error)) (Resp, error) {
	out, err := l.s.admit(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, func(ctx context.Context, r any) (any, error) {
		return h(ctx, r.(Req))
	})
	if err != nil {
		var zero Resp
		return zero, err
	}
	return out.(Resp), nil
}

func (l Local) flows() *flowService { return &flowService{s: l.s} }

// ListFlows is FlowService.ListFlows.
func (l Local) ListFlows(ctx context.Context, req *dexpb.ListFlowsRequest) (*dexpb.ListFlowsResponse, error) {
	return call(ctx, l, dexpb.FlowService_ListFlows_FullMethodName, req, l.flows().ListFlows)
}

// GetFlowState is FlowService.GetFlowState.
func (l Local) GetFlowState(ctx context.Context, req *dexpb.GetFlowStateRequest) (*dexpb.GetFlowStateResponse, error) {
	return call(ctx, l, dexpb.FlowService_GetFlowState_FullMethodName, req, l.flows().GetFlowState)
}

// GetHistoryEvents is FlowService.GetHistoryEvents.
func (l Local) GetHistoryEvents(ctx context.Context, req *dexpb.GetHistoryEventsRequest) (*dexpb.GetHistoryEventsResponse, error) {
	return call(ctx, l, dexpb.FlowService_GetHistoryEvents_FullMethodName, req, l.flows().GetHistoryEvents)
}

// GetFlowSummary is FlowService.GetFlowSummary.
func (l Local) GetFlowSummary(ctx context.Context, req *dexpb.GetFlowSummaryRequest) (*dexpb.GetFlowSummaryResponse, error) {
	return call(ctx, l, dexpb.FlowService_GetFlowSummary_FullMethodName, req, l.flows().GetFlowSummary)
}

// SearchFlows is FlowService.SearchFlows.
func (l Local) SearchFlows(ctx context.Context, req *dexpb.SearchFlowsRequest) (*dexpb.SearchFlowsResponse, error) {
	return call(ctx, l, dexpb.FlowService_SearchFlows_FullMethodName, req, l.flows().SearchFlows)
}

// StopFlow is FlowService.StopFlow.
func (l Local) StopFlow(ctx context.Context, req *dexpb.StopFlowRequest) (*dexpb.StopFlowResponse, error) {
	return call(ctx, l, dexpb.FlowService_StopFlow_FullMethodName, req, l.flows().StopFlow)
}

// ResetFlow is FlowService.ResetFlow (E37).
func (l Local) ResetFlow(ctx context.Context, req *dexpb.ResetFlowRequest) (*dexpb.ResetFlowResponse, error) {
	return call(ctx, l, dexpb.FlowService_ResetFlow_FullMethodName, req, l.flows().ResetFlow)
}

// ContinueAsNew is FlowService.ContinueAsNew (E37).
func (l Local) ContinueAsNew(ctx context.Context, req *dexpb.ContinueAsNewRequest) (*dexpb.ContinueAsNewResponse, error) {
	return call(ctx, l, dexpb.FlowService_ContinueAsNew_FullMethodName, req, l.flows().ContinueAsNew)
}

// SkipTimer is FlowService.SkipTimer.
func (l Local) SkipTimer(ctx context.Context, req *dexpb.SkipTimerRequest) (*dexpb.SkipTimerResponse, error) {
	return call(ctx, l, dexpb.FlowService_SkipTimer_FullMethodName, req, l.flows().SkipTimer)
}

// PublishToChannel is FlowService.PublishToChannel.
func (l Local) PublishToChannel(ctx context.Context, req *dexpb.PublishToChannelRequest) (*dexpb.PublishToChannelResponse, error) {
	return call(ctx, l, dexpb.FlowService_PublishToChannel_FullMethodName, req, l.flows().PublishToChannel)
}

// SetAttributes is FlowService.SetAttributes.
func (l Local) SetAttributes(ctx context.Context, req *dexpb.SetAttributesRequest) (*dexpb.SetAttributesResponse, error) {
	return call(ctx, l, dexpb.FlowService_SetAttributes_FullMethodName, req, l.flows().SetAttributes)
}

// Describe is AdminService.Describe.
func (l Local) Describe(ctx context.Context, req *dexpb.DescribeRequest) (*dexpb.DescribeResponse, error) {
	return call(ctx, l, dexpb.AdminService_Describe_FullMethodName, req, (&adminService{s: l.s}).Describe)
}

// Authorizer is the server's authorizer (open, admin credential, or
// tokens and certificates), for callers of Local that authenticate
// their own users.
func (s *Server) Authorizer() *auth.Authorizer { return s.auth }

// Gate reports whether the phase serves public calls now and, when not,
// the message they answer UNAVAILABLE with (a standby's reason, a step
// down's).
func (s *Server) Gate() (serving bool, reason string) {
	if s.serving() {
		return true, ""
	}
	return false, status.Convert(s.unavailable()).Message()
}
