// Package pprofenv serves net/http/pprof on the address in the
// DEXZD_PPROF environment variable, for profiling the server and dexcli
// (whose bench command runs the load driver's client and worker): off
// unless set, and never on the API, web or metrics listener.
package pprofenv

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

// Var is the environment variable that names the address (HOST:PORT).
const Var = "DEXZD_PPROF"

// Start serves pprof on $DEXZD_PPROF in the background, if it is set; a
// listen error is reported on stderr and the program goes on without it.
func Start(stderr io.Writer) {
	addr := os.Getenv(Var)
	if addr == "" {
		return
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", Var, err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(lis, mux) }() //nolint:gosec // opt-in debugging endpoint
}
