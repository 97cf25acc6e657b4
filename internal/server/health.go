package server

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Health service names (H2, H3).
const (
	HealthFlowService       = "dex.FlowService"
	HealthWorkerTaskService = "dex.WorkerTaskService"
	HealthHotStandby        = "dex.HotStandby"
)

// healthService is grpc.health.v1 (H1). The readiness names "",
// dex.FlowService and dex.WorkerTaskService are SERVING only while the
// serving instance is active with a valid lease; the answer is computed on
// every Check, so a process whose lease stops being valid answers
// NOT_SERVING at once (H2, L15). dex.HotStandby is SERVING only while the
// process is a hot standby following the log within behindLagThreshold
// (Server.SetHotStandby), NOT_SERVING on the active, on a cold standby and
// on a standby that restarts, failed or is behind (H3).
type healthService struct {
	grpc_health_v1.UnimplementedHealthServer
	s *Server
}

func (h *healthService) status(service string) (grpc_health_v1.HealthCheckResponse_ServingStatus, bool) {
	switch service {
	case "", HealthFlowService, HealthWorkerTaskService:
		if h.s.serving() {
			return grpc_health_v1.HealthCheckResponse_SERVING, true
		}
		return grpc_health_v1.HealthCheckResponse_NOT_SERVING, true
	case HealthHotStandby:
		if h.s.hotStandby() {
			return grpc_health_v1.HealthCheckResponse_SERVING, true
		}
		return grpc_health_v1.HealthCheckResponse_NOT_SERVING, true
	}
	return grpc_health_v1.HealthCheckResponse_SERVICE_UNKNOWN, false
}

func (h *healthService) Check(_ context.Context, req *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	st, ok := h.status(req.GetService())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "unknown service %q", req.GetService())
	}
	return &grpc_health_v1.HealthCheckResponse{Status: st}, nil
}

func (h *healthService) List(context.Context, *grpc_health_v1.HealthListRequest) (*grpc_health_v1.HealthListResponse, error) {
	out := &grpc_health_v1.HealthListResponse{Statuses: map[string]*grpc_health_v1.HealthCheckResponse{}}
	for _, name := range []string{"", HealthFlowService, HealthWorkerTaskService, HealthHotStandby} {
		st, _ := h.status(name)
		out.Statuses[name] = &grpc_health_v1.HealthCheckResponse{Status: st}
	}
	return out, nil
}

// Watch sends the status at once and again whenever it changes. It ends
// when the server closes (the stream then ends with UNAVAILABLE).
func (h *healthService) Watch(req *grpc_health_v1.HealthCheckRequest, stream grpc_health_v1.Health_WatchServer) error {
	t := time.NewTicker(h.s.opts.WatchInterval)
	defer t.Stop()
	last := grpc_health_v1.HealthCheckResponse_ServingStatus(-1)
	for {
		st, _ := h.status(req.GetService())
		if st != last {
			if err := stream.Send(&grpc_health_v1.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		select {
		case <-t.C:
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-h.s.closed:
			return status.Error(codes.Unavailable, "the server is shutting down")
		}
	}
}
