// Command dexcli is the operator and developer CLI of Dex-ZD: it starts,
// inspects and drives flows (dexcli flow ...) and describes and steps down
// nodes (dexcli admin ...). Run "dexcli help" for the commands; the logic
// lives in internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/dexzd/dexzd/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
