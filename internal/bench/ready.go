package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// healthFlowService is the health service name of a server that serves
// FlowService.
const healthFlowService = "dex.FlowService"

// waitServing waits until one of addrs reports dex.FlowService SERVING (a
// server without a health service counts as serving, as the SDK's client
// treats it), polling every 100 ms for up to timeout. Its error has code
// UNAVAILABLE when no address served in time.
func waitServing(parent context.Context, addrs []string, opts []grpc.DialOption, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	clients := make([]grpc_health_v1.HealthClient, len(addrs))
	for i, a := range addrs {
		cc, err := grpc.NewClient(a, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
		if err != nil {
			return fmt.Errorf("bench: connect to %s: %w", a, err)
		}
		defer cc.Close()
		clients[i] = grpc_health_v1.NewHealthClient(cc)
	}
	last := make([]string, len(addrs))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for i, hc := range clients {
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			resp, err := hc.Check(cctx, &grpc_health_v1.HealthCheckRequest{Service: healthFlowService})
			ccancel()
			switch {
			case status.Code(err) == codes.Unimplemented:
				return nil
			case err != nil:
				last[i] = fmt.Sprintf("%s: %v", addrs[i], status.Convert(err).Message())
			case resp.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING:
				return nil
			default:
				last[i] = fmt.Sprintf("%s: %s is %s", addrs[i], healthFlowService, resp.GetStatus())
			}
		}
		select {
		case <-ctx.Done():
			if err := parent.Err(); err != nil {
				return fmt.Errorf("bench: wait for a server: %w", err)
			}
			return status.Errorf(codes.Unavailable, "no server serves %s after %s (%s)", healthFlowService, timeout, strings.Join(last, "; "))
		case <-tick.C:
		}
	}
}
