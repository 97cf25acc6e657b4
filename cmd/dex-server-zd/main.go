// Command dex-server-zd is the Dex-ZD server.
//
//	dex-server-zd dev   [--data-dir DIR] [--listen HOST:PORT] [--durability MODE] [--web-listen HOST:PORT|off] [--config FILE] [--log-format text|json]
//	dex-server-zd local  --data-dir DIR  [--listen HOST:PORT] [--durability MODE] [--web-listen HOST:PORT|off] [--config FILE] [--log-format text|json]
//	dex-server-zd serve  --config FILE   [--listen HOST:PORT] [--web-listen HOST:PORT|off] [--log-format text|json]
//	dex-server-zd config defaults
//
// DEXZD_PPROF=HOST:PORT serves net/http/pprof there (off by default).
// Tracing is on with tracing.endpoint or the standard OTEL_EXPORTER_OTLP_*
// variables (package tracing).
//
// Exit status: 0 after a graceful shutdown (SIGTERM, SIGINT), also of a
// standby; 1 after a fatal stop (lease lost, log write limit, fenced; L11),
// a failed takeover (S9) or a failed start (a held lease with
// lease.failIfHeld, L14; a permanent error of the durable store such as
// bad credentials or a missing bucket; a local store directory in use); 2
// for a usage or configuration error. serve does not exit while its
// durable store is unreachable at startup: it waits for it (package node,
// storewait.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/dexzd/dexzd/internal/config"
	"github.com/dexzd/dexzd/internal/diskfull"
	"github.com/dexzd/dexzd/internal/metrics"
	"github.com/dexzd/dexzd/internal/node"
	"github.com/dexzd/dexzd/internal/pprofenv"
	"github.com/dexzd/dexzd/internal/tracing"
	"go.opentelemetry.io/otel"
)

const usage = `usage:
  dex-server-zd dev   [--data-dir DIR] [--listen HOST:PORT] [--durability MODE] [--web-listen HOST:PORT|off] [--config FILE] [--log-format text|json]
  dex-server-zd local  --data-dir DIR  [--listen HOST:PORT] [--durability MODE] [--web-listen HOST:PORT|off] [--config FILE] [--log-format text|json]
  dex-server-zd serve  --config FILE   [--listen HOST:PORT] [--web-listen HOST:PORT|off] [--log-format text|json]
  dex-server-zd config defaults
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	pprofenv.Start(stderr)
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "dev":
		return runNode(config.ModeDev, args[1:], stderr)
	case "local":
		return runNode(config.ModeLocal, args[1:], stderr)
	case "serve":
		return runServe(args[1:], stderr)
	case "config":
		if len(args) == 2 && args[1] == "defaults" {
			out, err := config.DefaultsYAML()
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			_, _ = stdout.Write(out)
			return 0
		}
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprint(stderr, usage)
	return 2
}

func runNode(mode config.Mode, args []string, stderr io.Writer) int {
	fl := flag.NewFlagSet(string(mode), flag.ContinueOnError)
	fl.SetOutput(stderr)
	dataDir := fl.String("data-dir", "", "the data directory (dev default: ./.dex-data)")
	listen := fl.String("listen", "", "the API address, overriding api.listen (default 127.0.0.1:8801)")
	durability := fl.String("durability", "", "strict, processCrashSafe or relaxed, overriding dev.durabilityMode")
	metricsListen := fl.String("metrics-listen", "", "the address of /metrics, /readyz and /livez, overriding metrics.listen")
	webListen := fl.String("web-listen", "", "the web UI's address, overriding web.listen (dev default "+config.DevWebListen+"); off turns it off")
	cfgPath := fl.String("config", "", "the YAML configuration file")
	logFormat := fl.String("log-format", "", "text or json, overriding log.format")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n%s", fl.Args(), usage)
		return 2
	}
	cfg, err := config.Load(*cfgPath, mode)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *durability != "" {
		cfg.Dev.DurabilityMode = *durability // D8
	}
	if *listen != "" {
		cfg.API.Listen = *listen
	}
	if *metricsListen != "" {
		cfg.Metrics.Listen = *metricsListen
	}
	if *logFormat != "" {
		cfg.Log.Format = *logFormat
	}
	cfg.ApplyWebFlag(mode, *webListen)
	if err := cfg.Validate(mode); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *dataDir == "" {
		if mode != config.ModeDev {
			fmt.Fprintf(stderr, "%s needs --data-dir\n%s", mode, usage)
			return 2
		}
		*dataDir = ".dex-data"
	}

	log := newLogger(cfg, stderr).With("mode", string(mode))
	tp, err := tracing.NewProvider(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal kills at once
	}()
	err = node.RunLocal(ctx, node.LocalOptions{Mode: mode, Config: cfg, DataDir: *dataDir, Logger: log, Metrics: metrics.New(),
		TracerProvider: tp.TracerProvider()})
	code := node.ExitCode(err)
	logExit(log, err, code)
	flushSpans(log, tp)
	return code
}

// runServe runs `dex-server-zd serve`: a process of a node on its durable
// store, active, or cold or hot standby (package node, RunServe).
func runServe(args []string, stderr io.Writer) int {
	fl := flag.NewFlagSet("serve", flag.ContinueOnError)
	fl.SetOutput(stderr)
	listen := fl.String("listen", "", "the API address, overriding api.listen")
	webListen := fl.String("web-listen", "", "the web UI's address, overriding web.listen (default: off); off turns it off")
	cfgPath := fl.String("config", "", "the YAML configuration file (required)")
	logFormat := fl.String("log-format", "", "text or json, overriding log.format")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n%s", fl.Args(), usage)
		return 2
	}
	if *cfgPath == "" {
		fmt.Fprintf(stderr, "serve needs --config FILE\n%s", usage)
		return 2
	}
	cfg, err := config.Load(*cfgPath, config.ModeServe)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *listen != "" {
		cfg.API.Listen = *listen
	}
	if *logFormat != "" {
		cfg.Log.Format = *logFormat
	}
	cfg.ApplyWebFlag(config.ModeServe, *webListen)
	if err := cfg.Validate(config.ModeServe); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if err := node.CheckServeConfig(cfg); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}

	log := newLogger(cfg, stderr).With("mode", string(config.ModeServe))
	tp, err := tracing.NewProvider(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal kills at once
	}()
	err = node.RunServe(ctx, node.ServeOptions{Config: cfg, Logger: log, Metrics: metrics.New(), TracerProvider: tp.TracerProvider()})
	code := node.ExitCode(err)
	logExit(log, err, code)
	flushSpans(log, tp)
	return code
}

// newLogger is the process's logger on stderr in log.format; lines logged
// inside a traced call carry trace_id and span_id. The OpenTelemetry SDK's
// own errors (an unreachable OTLP receiver) go to it too.
func newLogger(cfg *config.Config, stderr io.Writer) *slog.Logger {
	log := slog.New(tracing.NewLogHandler(stderr, cfg.Log.Format == config.LogJSON))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	return log
}

// flushSpans sends the spans not sent yet before the process exits.
func flushSpans(log *slog.Logger, tp *tracing.Provider) {
	if err := tp.Shutdown(); err != nil {
		log.Warn("spans not sent", "err", err)
	}
}

// logExit writes the process's last line. A full disk (ENOSPC anywhere:
// the local store, the log's segments, a snapshot) is one line naming the
// path and the space left on it.
func logExit(log *slog.Logger, err error, code int) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	if d := diskfull.From(err); d != nil {
		log.Error("exiting: disk full", "path", d.Path, "free", diskfull.Bytes(d.Free), "err", err, "status", code)
		return
	}
	log.Error("exiting", "err", err, "status", code)
}
