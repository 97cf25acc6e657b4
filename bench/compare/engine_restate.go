package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	restate "github.com/restatedev/sdk-go"
	"github.com/restatedev/sdk-go/server"

	"github.com/dexzd/dexzd/internal/bench"
)

// restateEngine runs restate-server (the prebuilt binary of the npm
// package) with its default configuration, and the chain as a Restate
// service handler of K durable steps (restate.Run) served by the Go SDK in
// this process. The driver calls it through the HTTP ingress and waits for
// the result on the same request.
type restateEngine struct{}

func (*restateEngine) name() string { return "restate" }

const restateService = "BenchChain"

func restateChain(ctx restate.Context, in dbosInput) (int64, error) {
	v := in.Value
	for range in.Steps {
		cur := v
		next, err := restate.Run(ctx, func(restate.RunContext) (int64, error) { return cur + 1, nil })
		if err != nil {
			return 0, err
		}
		v = next
	}
	return v, nil
}

func restateBinary(tools string) (string, error) {
	m, _ := filepath.Glob(filepath.Join(tools, "node_modules", "@restatedev", "restate-server-*", "bin", "restate-server"))
	if len(m) == 0 {
		return "", fmt.Errorf("restate-server under %s: %w", tools, errNoBinary)
	}
	return m[0], nil
}

func (*restateEngine) round(ctx context.Context, r roundConfig) (m Measurement, err error) {
	bin, err := restateBinary(r.ToolsDir)
	if err != nil {
		return m, err
	}
	var ports [4]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return m, err
		}
	}
	ingress := fmt.Sprintf("127.0.0.1:%d", ports[0])
	admin := fmt.Sprintf("127.0.0.1:%d", ports[1])
	fabric := fmt.Sprintf("127.0.0.1:%d", ports[2])
	endpoint := fmt.Sprintf("127.0.0.1:%d", ports[3])

	// The SDK endpoint: HTTP/2 without TLS, as restate-server speaks to it.
	handler, err := server.NewRestate().WithLogger(slog.DiscardHandler, true).
		Bind(restate.NewService(restateService).Handler("run", restate.NewServiceHandler(restateChain))).
		Handler()
	if err != nil {
		return m, fmt.Errorf("restate sdk: %w", err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: handler, Protocols: &protocols}
	l, err := net.Listen("tcp", endpoint)
	if err != nil {
		return m, fmt.Errorf("restate sdk: %w", err)
	}
	go func() { _ = hs.Serve(l) }()
	defer hs.Close()

	logFile := filepath.Join(r.Dir, "restate.log")
	p, err := startProcess("restate-server", logFile, []string{
		"RESTATE_INGRESS__BIND_ADDRESS=" + ingress,
		"RESTATE_ADMIN__BIND_ADDRESS=" + admin,
		"RESTATE_DISABLE_TELEMETRY=true",
	}, bin, "--base-dir", filepath.Join(r.Dir, "data"), "--no-logo", "--listen-mode", "tcp",
		"--bind-address", fabric, "--advertised-address", "http://"+fabric, "--log-filter", "warn")
	if err != nil {
		return m, err
	}
	defer func() {
		if serr := p.stop(60 * time.Second); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	wrap := func(err error) error { return fmt.Errorf("%w\n%s", err, tail(logFile)) }

	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConns: r.Callers + 4, MaxIdleConnsPerHost: r.Callers + 4,
	}}
	defer hc.CloseIdleConnections()
	if err := waitFor(p, 60*time.Second, "restate admin ready", func() error {
		return httpDo(ctx, hc, "GET", "http://"+admin+"/health", nil, nil)
	}); err != nil {
		return m, wrap(err)
	}
	reg, _ := json.Marshal(map[string]any{"uri": "http://" + endpoint, "force": true})
	if err := waitFor(p, 60*time.Second, "register the SDK deployment", func() error {
		return httpDo(ctx, hc, "POST", "http://"+admin+"/deployments", reg, nil)
	}); err != nil {
		return m, wrap(err)
	}
	call := func(ctx context.Context, i int) error {
		start := chainStart(i)
		body, _ := json.Marshal(dbosInput{Value: start, Steps: r.Steps})
		var v int64
		if err := httpDo(ctx, hc, "POST", "http://"+ingress+"/"+restateService+"/run", body, &v); err != nil {
			return err
		}
		if want := start + int64(r.Steps); v != want {
			return fmt.Errorf("wrong output %d, want %d", v, want)
		}
		return nil
	}
	// The ingress learns of the deployment shortly after registration.
	if err := waitFor(p, 60*time.Second, "restate ingress ready", func() error { return call(ctx, -1) }); err != nil {
		return m, wrap(err)
	}
	m, err = closedLoop(ctx, loopConfig{
		Flows: r.Flows, Warmup: r.Warmup, Callers: r.Callers, Flow: call,
		ServerCPU: func() (bench.CPUTime, error) { return treeCPU(p.pid()) },
	})
	if err != nil {
		return m, wrap(err)
	}
	return m, nil
}

// httpDo sends a JSON request and decodes a JSON answer into out (when
// not nil); any status but 2xx is an error.
func httpDo(ctx context.Context, hc *http.Client, method, url string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decode %q: %w", b, err)
		}
	}
	return nil
}
