package server_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/internal/server"
)

// Server reflection is on by default, as grpcurl uses it: it lists the
// API's services and the health service, and describes FlowService's
// file; NoReflection (api.reflection: false) turns it off.
func TestReflection_ListsTheServicesUnlessTurnedOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ask := func(opts server.Options, req *rpb.ServerReflectionRequest) (*rpb.ServerReflectionResponse, error) {
		t.Helper()
		_, conn := serve(t, opts)
		stream, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			return nil, err
		}
		// A stream the server ended at once (UNIMPLEMENTED) can fail the
		// Send with io.EOF; its status comes with Recv.
		if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return stream.Recv()
	}
	list := &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}
	resp, err := ask(server.Options{}, list)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"dex.FlowService", "dex.WorkerTaskService", "dex.AdminService", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, without %s", names, want)
		}
	}
	resp, err = ask(server.Options{}, &rpb.ServerReflectionRequest{
		MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "dex.FlowService"}})
	if err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Fatalf("describe dex.FlowService = %v, %v; want its file descriptors", resp, err)
	}
	if _, err := ask(server.Options{NoReflection: true}, list); status.Code(err) != codes.Unimplemented {
		t.Fatalf("reflection with NoReflection = %v, want UNIMPLEMENTED", err)
	}
}
