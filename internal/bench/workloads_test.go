package bench

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dexraw"
	"github.com/dexzd/dexzd/internal/config"
)

// handle runs one task of flow through a worker, as the SDK does for a
// task from the server, and returns its result.
func handle(t *testing.T, flow *dex.Flow, kind dex.TaskKind, step string, in any, cr *dexpb.ConditionResults) *dexpb.TaskResult {
	t.Helper()
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"127.0.0.1:1"}, Logger: slog.New(slog.DiscardHandler)}, flow)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	ans := dexraw.HandleTask(context.Background(), w, &dexpb.Task{Kind: dexpb.TaskKind(kind), TaskToken: []byte("t"), FlowType: flow.Name(),
		FlowId: "f", RunId: "r", StepType: step, StepExecutionId: step + "-1", Attempt: 1,
		Input: &dexpb.EncodedValue{Encoding: "json", Data: data}, ConditionResults: cr})
	res := ans.GetTaskResult()
	if res == nil {
		t.Fatalf("%s %s: no result: %v", step, kind, ans)
	}
	return res
}

func decodeOutput(t *testing.T, d *dexpb.StepDecision) ChainOutput {
	t.Helper()
	gc := d.GetGracefulComplete()
	if gc == nil {
		t.Fatalf("decision = %v, want GracefulComplete", d)
	}
	var out ChainOutput
	if err := json.Unmarshal(gc.GetOutput().GetData(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFanout_StartMovesToBranchesThatComplete(t *testing.T) {
	t.Parallel()
	flow := FanoutFlow("bench-test")
	res := handle(t, flow, dex.KindExecute, "FanoutStart", FanoutInput{Value: 5000, Branches: 3, Pad: "p"}, nil)
	ms := res.GetExecute().GetDecision().GetMovements().GetMovements()
	if len(ms) != 3 {
		t.Fatalf("decision = %v, want 3 movements", res.GetExecute().GetDecision())
	}
	for b, m := range ms {
		var in BranchInput
		if err := json.Unmarshal(m.GetInput().GetData(), &in); err != nil {
			t.Fatal(err)
		}
		if m.GetStepType() != "FanoutBranch" || in != (BranchInput{Value: 5000, Branch: b, Pad: "p"}) {
			t.Errorf("movement %d = %s %+v", b, m.GetStepType(), in)
		}
		out := decodeOutput(t, handle(t, flow, dex.KindExecute, "FanoutBranch", in, nil).GetExecute().GetDecision())
		if out != (ChainOutput{Value: 5000 + int64(b) + 1, Pad: "p"}) {
			t.Errorf("branch %d output = %+v", b, out)
		}
	}
	res = handle(t, flow, dex.KindExecute, "FanoutStart", FanoutInput{Value: 1, Branches: 0}, nil)
	if res.GetExecute().GetDecision().GetForceFail() == nil {
		t.Errorf("0 branches: decision = %v, want ForceFail", res.GetExecute().GetDecision())
	}
}

func TestTimerStep_WaitsThenCompletes(t *testing.T) {
	t.Parallel()
	flow := TimerFlow("bench-test")
	in := TimerInput{Value: 7000, TimerMS: 1500, Pad: "p"}
	w := handle(t, flow, dex.KindWaitFor, "TimerStep", in, nil).GetWaitFor().GetWait()
	if d := w.GetUntil().GetTimer().GetDuration().AsDuration(); d != 1500*time.Millisecond {
		t.Fatalf("wait = %v, want a 1.5s timer", w)
	}
	fired := &dexpb.ConditionResults{Timers: []*dexpb.TimerResult{{TimerIndex: 0, Fired: true}}}
	out := decodeOutput(t, handle(t, flow, dex.KindExecute, "TimerStep", in, fired).GetExecute().GetDecision())
	if out != (ChainOutput{Value: 7001, Pad: "p"}) {
		t.Errorf("output = %+v", out)
	}
	notFired := &dexpb.ConditionResults{Timers: []*dexpb.TimerResult{{TimerIndex: 0}}}
	if d := handle(t, flow, dex.KindExecute, "TimerStep", in, notFired).GetExecute().GetDecision(); d.GetForceFail() == nil {
		t.Errorf("timer not fired: decision = %v, want ForceFail", d)
	}
}

func TestSignalStep_WaitsForOneMessage(t *testing.T) {
	t.Parallel()
	flow := SignalFlow("bench-test")
	in := ChainInput{Value: 3000, Left: 1, Pad: "p"}
	w := handle(t, flow, dex.KindWaitFor, "SignalStep", in, nil).GetWaitFor().GetWait()
	if c := w.GetUntil().GetChannel(); c.GetChannel() != "signal" {
		t.Fatalf("wait = %v, want one condition on channel signal", w)
	}
	msg := &dexpb.ConditionResults{Channels: []*dexpb.ChannelResult{{Channel: "signal", Satisfied: true,
		Messages: []*dexpb.EncodedValue{{Encoding: "json", Data: []byte(`{"value":4}`)}}}}}
	out := decodeOutput(t, handle(t, flow, dex.KindExecute, "SignalStep", in, msg).GetExecute().GetDecision())
	if out != (ChainOutput{Value: 3004, Pad: "p"}) {
		t.Errorf("output = %+v", out)
	}
	if d := handle(t, flow, dex.KindExecute, "SignalStep", in, &dexpb.ConditionResults{}).GetExecute().GetDecision(); d.GetForceFail() == nil {
		t.Errorf("no message: decision = %v, want ForceFail", d)
	}
}

// outputs builds a flow result with one FanoutBranch output per value.
func outputs(t *testing.T, pad string, step string, values ...int64) *dex.FlowResult {
	t.Helper()
	res := &dex.FlowResult{Status: dex.StatusCompleted}
	for i, v := range values {
		data, err := json.Marshal(ChainOutput{Value: v, Pad: pad})
		if err != nil {
			t.Fatal(err)
		}
		res.Outputs = append(res.Outputs, dex.StepOutput{StepType: step, StepExecutionID: step + "-" + string(rune('1'+i)),
			Value: dexraw.Value(&dexpb.EncodedValue{Encoding: "json", Data: data})})
	}
	return res
}

func TestCheckFanout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		res  *dex.FlowResult
		want string // "" for no error
	}{
		{"in order", outputs(t, "p", "FanoutBranch", 101, 102, 103), ""},
		{"any order", outputs(t, "p", "FanoutBranch", 103, 101, 102), ""},
		{"missing branch", outputs(t, "p", "FanoutBranch", 101, 102), "2 outputs, want one per branch (3)"},
		{"duplicate branch", outputs(t, "p", "FanoutBranch", 101, 101, 103), "branch values [101 101 103], want 101..103"},
		{"wrong step", outputs(t, "p", "FanoutStart", 101, 102, 103), "an output of FanoutStart"},
		{"payload lost", outputs(t, "", "FanoutBranch", 101, 102, 103), "payload with 0 bytes, want the 1 sent"},
	}
	for _, tt := range tests {
		err := checkFanout(tt.res, 100, 3, "p")
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestCheckSingle(t *testing.T) {
	t.Parallel()
	if err := checkSingle(outputs(t, "p", "SignalStep", 42), 42, "p", "x"); err != nil {
		t.Error(err)
	}
	for _, tt := range []struct {
		res  *dex.FlowResult
		want string
	}{
		{outputs(t, "p", "SignalStep", 41), "value 41, want 42 (x)"},
		{outputs(t, "p", "SignalStep", 42, 42), "2 outputs, want 1"},
		{outputs(t, "", "SignalStep", 42), "payload came back with 0 bytes"},
	} {
		if err := checkSingle(tt.res, 42, "p", "x"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("checkSingle = %v, want an error containing %q", err, tt.want)
		}
	}
}

func TestConfig_Validation(t *testing.T) {
	t.Parallel()
	base := Config{Addresses: []string{"127.0.0.1:1"}, Flows: 1, Callers: 1, WorkerConcurrency: 1}
	tests := []struct {
		mod  func(*Config)
		want string // "" for valid
	}{
		{func(c *Config) { c.Steps = 1 }, ""}, // chain by default
		{func(c *Config) {}, "Steps is 0"},
		{func(c *Config) { c.Workload = WorkloadFanout }, "Branches is 0"},
		{func(c *Config) { c.Workload = WorkloadFanout; c.Branches = 2 }, ""},
		{func(c *Config) { c.Workload = WorkloadTimer }, ""}, // DefaultTimer
		{func(c *Config) { c.Workload = WorkloadTimer; c.Timer = time.Microsecond }, "Timer is 1µs"},
		{func(c *Config) { c.Workload = WorkloadSignal }, ""},
		{func(c *Config) { c.Workload = "nap" }, `unknown workload "nap"`},
	}
	for i, tt := range tests {
		c := base
		tt.mod(&c)
		err := c.applyDefaults()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%d: %v", i, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%d: error %v, want one containing %q", i, err, tt.want)
		}
		if err == nil && c.FlowType != DefaultFlowType(c.Workload) {
			t.Errorf("%d: flow type %q", i, c.FlowType)
		}
	}
}

// The configuration StartServe writes is one serve accepts.
func TestServeConfigYAML_AcceptedByServe(t *testing.T) {
	t.Parallel()
	for name, st := range map[string]ServeStorage{
		"s3":       {S3: &ServeS3{Endpoint: "http://127.0.0.1:9000", Bucket: "dex-test", Prefix: "bench/r1-\"x\"/"}},
		"postgres": {Postgres: &ServePostgres{DSN: "postgres://u:p@127.0.0.1:5432/db?sslmode=disable", Table: "bench_r1"}},
	} {
		y, err := ServeConfigYAML("127.0.0.1:8801", "127.0.0.1:9090", "/tmp/x y/local", st)
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Parse([]byte(y), config.ModeServe)
		if err != nil {
			t.Fatalf("%s: serve refuses the configuration: %v\n%s", name, err, y)
		}
		if c.API.Listen != "127.0.0.1:8801" || c.Metrics.Listen != "127.0.0.1:9090" || c.LocalStore.Dir != "/tmp/x y/local" ||
			c.Storage.Backend != name || c.Standby.Mode != config.StandbyCold {
			t.Errorf("%s: parsed %+v", name, c)
		}
		if name == "s3" && (c.Storage.S3.Prefix != `bench/r1-"x"/` || !c.Storage.S3.PathStyle || c.Storage.S3.Region != "us-east-1") {
			t.Errorf("s3: parsed %+v", c.Storage.S3)
		}
		if name == "postgres" && c.Storage.Postgres.Table != "bench_r1" {
			t.Errorf("postgres: parsed %+v", c.Storage.Postgres)
		}
	}
	if _, err := ServeConfigYAML("a", "b", "c", ServeStorage{}); err == nil {
		t.Error("no storage: no error")
	}
}
