// Command compare runs the chain workload on Dex-ZD and on the durable
// execution engines users would otherwise pick (DBOS, Restate, Temporal),
// one engine at a time, alternating over rounds, and prints a table of
// medians. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = Run(ctx, cfg, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (Config, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	var cfg Config
	var engines, engineFlows string
	fs.IntVar(&cfg.Flows, "flows", 2000, "measured flows per engine and round")
	fs.IntVar(&cfg.Steps, "steps", 3, "sequential steps per flow (K)")
	fs.IntVar(&cfg.Callers, "callers", 32, "closed-loop callers (C)")
	fs.IntVar(&cfg.Rounds, "rounds", 3, "rounds; every round runs every engine once, in alternating order")
	fs.IntVar(&cfg.Warmup, "warmup", -1, "unmeasured warmup flows per round (-1: a tenth of --flows, at most 100)")
	fs.StringVar(&engines, "engines", strings.Join(engineNames, ","), "engines to run, comma-separated: "+strings.Join(engineNames, ","))
	fs.StringVar(&engineFlows, "engine-flows", "", "measured flows for some engines instead of --flows, e.g. temporal=300 (for an engine too slow to run --flows in a round)")
	fs.StringVar(&cfg.JSONPath, "json", "", "write every round's measurements and the medians as JSON to this file")
	fs.StringVar(&cfg.ToolsDir, "tools", ".tools", "directory of the installed peers (bin/temporal, node_modules/@restatedev/restate-server)")
	fs.StringVar(&cfg.DexBinary, "dex-binary", "", "a dex-server-zd binary to use instead of building one from the checkout")
	fs.StringVar(&cfg.PostgresDSN, "postgres", os.Getenv("DEX_TEST_POSTGRES_DSN"), "PostgreSQL DSN for DBOS (default $DEX_TEST_POSTGRES_DSN)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for e := range strings.SplitSeq(engines, ",") {
		if e = strings.TrimSpace(e); e != "" {
			cfg.Engines = append(cfg.Engines, e)
		}
	}
	if engineFlows != "" {
		cfg.EngineFlows = map[string]int{}
		for kv := range strings.SplitSeq(engineFlows, ",") {
			k, v, ok := strings.Cut(kv, "=")
			n, err := strconv.Atoi(v)
			if !ok || err != nil || n < 1 {
				return cfg, fmt.Errorf("--engine-flows: %q is not ENGINE=FLOWS", kv)
			}
			cfg.EngineFlows[strings.TrimSpace(k)] = n
		}
	}
	return cfg, nil
}
