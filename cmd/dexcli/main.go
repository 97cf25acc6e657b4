// Command dexcli is the operator and developer CLI of Dex-ZD: it starts,
// inspects and drives flows (dexcli flow ...) and describes and steps down
// nodes (dexcli admin ...). Run "dexcli help" for the commands; the logic
// lives in internal/cli.
//
// DEXZD_PPROF=HOST:PORT serves net/http/pprof there (off by default), for
// profiling the load driver of dexcli bench.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/dexzd/dexzd/internal/cli"
	"github.com/dexzd/dexzd/internal/pprofenv"
)

func main() {
	pprofenv.Start(os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
