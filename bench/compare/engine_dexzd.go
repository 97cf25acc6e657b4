package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dexzd/dexzd/internal/bench"
)

// dexzdEngine runs "dex-server-zd dev --durability strict" (the local
// store, fsync before a commit is acknowledged) with bench.RunChain as the
// driver and worker.
type dexzdEngine struct{}

func (*dexzdEngine) name() string { return "dexzd" }

func (*dexzdEngine) round(ctx context.Context, r roundConfig) (Measurement, error) {
	srv, err := bench.StartDevServer(ctx, bench.DevOptions{
		Binary: r.DexBinary, DataDir: filepath.Join(r.Dir, "data"), Durability: "strict", Metrics: true,
	})
	if err != nil {
		return Measurement{}, err
	}
	res, runErr := bench.RunChain(ctx, bench.ChainConfig{
		Addresses: []string{srv.Addr},
		FlowType:  fmt.Sprintf("compare-r%d", r.Round),
		Flows:     r.Flows, Steps: r.Steps, Callers: r.Callers,
		WorkerConcurrency: r.Callers, Warmup: r.Warmup,
		ServerPID: srv.PID(), MetricsURL: srv.MetricsURL,
	})
	stopErr := srv.Stop(30 * time.Second)
	var server bench.CPUTime
	if res.ServerCPU != nil {
		server = *res.ServerCPU
	}
	m := measurement(res.Completed, res.Failures, res.Elapsed, res.Latency, res.CPU, server)
	m.storeFigures(res)
	if runErr == nil && res.ServerCPU == nil {
		runErr = errors.New("the server's CPU time was not measured")
	}
	return m, errors.Join(runErr, stopErr)
}

// buildDexServer builds cmd/dex-server-zd of the checkout this module sits
// in (two directories up) into out, with bench.BuildServer, which builds
// the module of the working directory.
func buildDexServer(ctx context.Context, out string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find this module: %w", err)
	}
	root := filepath.Join(filepath.Dir(strings.TrimSpace(string(gomod))), "..", "..")
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.Contains(string(b), "module github.com/dexzd/dexzd\n") {
		return "", fmt.Errorf("find the dexzd checkout: %s is not its root; run from bench/compare or pass --dex-binary", root)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if err := os.Chdir(root); err != nil {
		return "", err
	}
	buildErr := bench.BuildServer(ctx, out)
	if err := os.Chdir(wd); err != nil {
		return "", err
	}
	return out, buildErr
}
