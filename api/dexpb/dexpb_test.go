package dexpb_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/dexzd/dexzd/api/dexpb"
)

// protoFiles are the files of the contract, as registered by the generated
// code (paths relative to api/proto).
var protoFiles = []string{
	"dex/admin.proto",
	"dex/common.proto",
	"dex/decision.proto",
	"dex/flow.proto",
	"dex/flow_view.proto",
	"dex/history.proto",
	"dex/options.proto",
	"dex/reset.proto",
	"dex/result.proto",
	"dex/search.proto",
	"dex/wait.proto",
	"dex/worker.proto",
}

func files(t *testing.T) []protoreflect.FileDescriptor {
	t.Helper()
	var fds []protoreflect.FileDescriptor
	for _, path := range protoFiles {
		fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
		if err != nil {
			t.Fatalf("file %s is not registered: %v", path, err)
		}
		fds = append(fds, fd)
	}
	return fds
}

func TestFiles_Register(t *testing.T) {
	t.Parallel()
	for _, fd := range files(t) {
		if fd.Package() != "dex" {
			t.Errorf("%s: package %q, want dex", fd.Path(), fd.Package())
		}
		if fd.Syntax() != protoreflect.Proto3 {
			t.Errorf("%s: syntax %v, want proto3", fd.Path(), fd.Syntax())
		}
	}
	// Every file of package dex is one this test knows, so a new file is
	// added to protoFiles (and to the checks below) deliberately.
	protoregistry.GlobalFiles.RangeFilesByPackage("dex", func(fd protoreflect.FileDescriptor) bool {
		if !slices.Contains(protoFiles, fd.Path()) {
			t.Errorf("file %s of package dex is not listed in protoFiles", fd.Path())
		}
		return true
	})
}

type method struct {
	name, input, output     string
	clientStream, srvStream bool
}

func unary(name string) method {
	return method{name: name, input: name + "Request", output: name + "Response"}
}

func TestServices_HaveTheirMethods(t *testing.T) {
	t.Parallel()
	want := map[string][]method{
		"dex.FlowService": {
			unary("StartFlow"), unary("StopFlow"), unary("PublishToChannel"),
			unary("GetAttributes"), unary("SetAttributes"), unary("InvokeRPC"),
			unary("SkipTimer"), unary("ResetFlow"), unary("WaitForFlow"), unary("GetFlowSummary"),
			unary("GetFlowState"), unary("GetHistoryEvents"), unary("ListFlows"),
			unary("WaitForStepCompletion"), unary("WaitForAttribute"), unary("SearchFlows"),
		},
		"dex.WorkerTaskService": {{
			name: "PollWorkerTask", input: "PollWorkerTaskRequest", output: "PollWorkerTaskResponse",
			clientStream: true, srvStream: true,
		}},
		"dex.AdminService": {unary("Describe"), unary("StepDown")},
	}
	for service, methods := range want {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
		if err != nil {
			t.Errorf("service %s: %v", service, err)
			continue
		}
		sd, ok := d.(protoreflect.ServiceDescriptor)
		if !ok {
			t.Errorf("%s is a %T, not a service", service, d)
			continue
		}
		if got, want := sd.Methods().Len(), len(methods); got != want {
			t.Errorf("%s has %d methods, want %d", service, got, want)
		}
		for _, m := range methods {
			md := sd.Methods().ByName(protoreflect.Name(m.name))
			if md == nil {
				t.Errorf("%s has no method %s", service, m.name)
				continue
			}
			if got, want := md.Input().FullName(), protoreflect.FullName("dex."+m.input); got != want {
				t.Errorf("%s.%s input %s, want %s", service, m.name, got, want)
			}
			if got, want := md.Output().FullName(), protoreflect.FullName("dex."+m.output); got != want {
				t.Errorf("%s.%s output %s, want %s", service, m.name, got, want)
			}
			if md.IsStreamingClient() != m.clientStream || md.IsStreamingServer() != m.srvStream {
				t.Errorf("%s.%s streaming client=%v server=%v, want client=%v server=%v", service, m.name,
					md.IsStreamingClient(), md.IsStreamingServer(), m.clientStream, m.srvStream)
			}
		}
	}
}

// The gRPC service names double as health readiness names.
func TestServiceDescs_UseHealthNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc grpc.ServiceDesc
		want string
	}{
		{dexpb.FlowService_ServiceDesc, "dex.FlowService"},
		{dexpb.WorkerTaskService_ServiceDesc, "dex.WorkerTaskService"},
		{dexpb.AdminService_ServiceDesc, "dex.AdminService"},
	} {
		if tc.desc.ServiceName != tc.want {
			t.Errorf("service name %q, want %q", tc.desc.ServiceName, tc.want)
		}
	}
}

// rangeEnums calls f for every enum of fd, nested ones included.
func rangeEnums(fd protoreflect.FileDescriptor, f func(protoreflect.EnumDescriptor)) {
	for i := range fd.Enums().Len() {
		f(fd.Enums().Get(i))
	}
	var walk func(protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			m := ms.Get(i)
			for j := range m.Enums().Len() {
				f(m.Enums().Get(j))
			}
			walk(m.Messages())
		}
	}
	walk(fd.Messages())
}

func TestEnums_ZeroValueIsUnspecified(t *testing.T) {
	t.Parallel()
	n := 0
	for _, fd := range files(t) {
		rangeEnums(fd, func(ed protoreflect.EnumDescriptor) {
			n++
			zero := ed.Values().ByNumber(0)
			if zero == nil {
				t.Errorf("enum %s has no zero value", ed.FullName())
				return
			}
			if !strings.HasSuffix(string(zero.Name()), "_UNSPECIFIED") {
				t.Errorf("enum %s: zero value %s is not *_UNSPECIFIED", ed.FullName(), zero.Name())
			}
			if ed.Values().Get(0) != zero {
				t.Errorf("enum %s: zero value %s is not declared first", ed.FullName(), zero.Name())
			}
		})
	}
	if n == 0 {
		t.Fatal("no enums found")
	}
	// The Go zero values are the *_UNSPECIFIED defaults.
	zeros := map[string]protoreflect.Enum{
		"FLOW_STATUS_UNSPECIFIED":                  dexpb.FlowStatus(0),
		"FLOW_ERROR_TYPE_UNSPECIFIED":              dexpb.FlowErrorType(0),
		"ID_REUSE_POLICY_UNSPECIFIED":              dexpb.IdReusePolicy(0),
		"FLOW_TIMEOUT_POLICY_UNSPECIFIED":          dexpb.FlowTimeoutPolicy(0),
		"STOP_TYPE_UNSPECIFIED":                    dexpb.StopType(0),
		"TASK_KIND_UNSPECIFIED":                    dexpb.TaskKind(0),
		"CHANNEL_BOUND_UNSPECIFIED":                dexpb.ChannelBound(0),
		"ATTEMPT_DURABILITY_UNSPECIFIED":           dexpb.AttemptDurability(0),
		"WAIT_FOR_FAILURE_POLICY_UNSPECIFIED":      dexpb.WaitForFailurePolicy(0),
		"EXECUTE_FAILURE_POLICY_UNSPECIFIED":       dexpb.ExecuteFailurePolicy(0),
		"TASK_ACK_STATUS_UNSPECIFIED":              dexpb.TaskAckStatus(0),
		"LEASE_HOLDER_AFTER_STEP_DOWN_UNSPECIFIED": dexpb.LeaseHolderAfterStepDown(0),
	}
	for want, e := range zeros {
		if got := e.Descriptor().Values().ByNumber(e.Number()).Name(); string(got) != want {
			t.Errorf("Go zero value of %s is %s, want %s", e.Descriptor().FullName(), got, want)
		}
	}
	var start dexpb.StartFlowRequest
	if start.GetIdReusePolicy() != dexpb.IdReusePolicy_ID_REUSE_POLICY_UNSPECIFIED {
		t.Errorf("StartFlowRequest.id_reuse_policy defaults to %v", start.GetIdReusePolicy())
	}
}

// dexcli prints the admin answers with these JSON names.
func TestAdminMessages_JSONNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msg  protoreflect.ProtoMessage
		want []string
	}{
		{&dexpb.DescribeResponse{}, []string{"nodeId", "nodeEpoch", "holderProcessId"}},
		{&dexpb.StepDownRequest{}, []string{"expectedNodeId", "expectedNodeEpoch"}},
		{&dexpb.StepDownResponse{}, []string{
			"nodeId", "releasedNodeEpoch", "leaseReacquisitionHoldOff", "leaseHolderAfterStepDown",
			"leaseHolderUnknownDetail", "activeNodeEpoch", "activeHolderProcessId",
		}},
	} {
		fields := tc.msg.ProtoReflect().Descriptor().Fields()
		var got []string
		for i := range fields.Len() {
			got = append(got, fields.Get(i).JSONName())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s JSON names %v, want %v", tc.msg.ProtoReflect().Descriptor().FullName(), got, tc.want)
		}
	}
}
