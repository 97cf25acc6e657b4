package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvOTelCol is the path of the test OpenTelemetry Collector that
// scripts/testenv.sh builds (the core OTLP receiver and debug exporter).
const EnvOTelCol = "DEX_TEST_OTELCOL"

// ServiceOTelCol names the Collector in DEX_TEST_REQUIRE.
const ServiceOTelCol = "otelcol"

// Collector is a running test Collector: an OTLP/gRPC receiver on a free
// loopback port whose debug exporter prints every span it receives; the
// spans are parsed from that output.
type Collector struct {
	// Endpoint is the receiver's URL, http://127.0.0.1:PORT.
	Endpoint string

	cmd    *exec.Cmd
	exited chan struct{}

	mu    sync.Mutex
	log   strings.Builder
	spans []Span
	cur   *Span  // the span being parsed
	res   string // the service.name of the resource being parsed
	attrs bool   // inside a span's attribute list
	ready bool
}

// Span is one span the Collector received.
type Span struct {
	Service  string // the resource's service.name
	TraceID  string
	ParentID string // empty for a root span
	ID       string
	Name     string
	Kind     string // Internal, Server, Client, Consumer, Producer
	Status   string // Unset, Ok, Error
	Attrs    map[string]string
}

// StartOTelCollector starts the Collector; it is stopped when the test
// ends. It skips the test (fails it when DEX_TEST_REQUIRE names otelcol)
// when DEX_TEST_OTELCOL is not set.
func StartOTelCollector(tb testing.TB) *Collector {
	tb.Helper()
	bin := lookup(tb, ServiceOTelCol, EnvOTelCol)[0]
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cfg := filepath.Join(tb.TempDir(), "otelcol.yaml")
	doc := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
exporters:
  debug:
    verbosity: detailed
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [debug]
`, addr)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		tb.Fatal(err)
	}
	c := &Collector{Endpoint: "http://" + addr, cmd: exec.Command(bin, "--config", cfg), exited: make(chan struct{})}
	out, err := c.cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		tb.Fatalf("start the Collector %s: %v", bin, err)
	}
	go c.read(out)
	tb.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
		if tb.Failed() {
			tb.Logf("Collector log:\n%s", c.Log())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !c.isReady() {
		select {
		case <-c.exited:
			tb.Fatalf("the Collector exited during startup:\n%s", c.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the Collector was not ready within 30s:\n%s", c.Log())
		}
	}
	return c
}

func (c *Collector) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// Log returns the Collector's output so far.
func (c *Collector) Log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Span, 0, len(c.spans)+1)
	out = append(out, c.spans...)
	if c.cur != nil {
		out = append(out, *c.cur)
	}
	return out
}

// WaitSpans waits until done holds for the spans received, for at most
// timeout, and returns them; it fails the test on the timeout.
func (c *Collector) WaitSpans(tb testing.TB, timeout time.Duration, done func([]Span) bool) []Span {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := c.Spans()
		if done(s) {
			return s
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the Collector did not receive the spans within %v; it has %d:\n%s", timeout, len(s), FormatSpans(s))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FormatSpans renders spans one a line, for failure messages.
func FormatSpans(spans []Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %q kind=%s trace=%s id=%s parent=%s %v\n", s.Service, s.Name, s.Kind, s.TraceID, s.ID, s.ParentID, s.Attrs)
	}
	return b.String()
}

// read parses the debug exporter's detailed output (pinned with the
// Collector's version):
//
//	Resource attributes:
//	     -> service.name: Str(dex-server-zd)
//	Span #0
//	    Trace ID       : 3d3d...
//	    Parent ID      : 9b20...
//	    ID             : 5054...
//	    Name           : dex.log.append
//	    Kind           : Client
//	    Status code    : Unset
//	Attributes:
//	     -> dex.log.seq: Int(2)
func (c *Collector) read(r io.Reader) {
	defer close(c.exited)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		c.line(sc.Text())
	}
	_, _ = io.Copy(io.Discard, r)
	_ = c.cmd.Wait()
}

func (c *Collector) line(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log.WriteString(line + "\n")
	trimmed := strings.TrimSpace(line)
	switch {
	case strings.Contains(line, "Everything is ready"):
		c.ready = true
	case strings.Contains(line, "ResourceSpans #"):
		c.flush()
		c.res, c.attrs = "", false
	case strings.HasPrefix(line, "Span #"):
		c.flush()
		c.cur = &Span{Service: c.res, Attrs: map[string]string{}}
		c.attrs = false
	case line == "Attributes:":
		c.attrs = c.cur != nil
	case strings.HasPrefix(trimmed, "-> "):
		k, v, ok := strings.Cut(strings.TrimPrefix(trimmed, "-> "), ": ")
		if !ok {
			return
		}
		// Str(x), Int(2), Bool(true): the value inside the parentheses.
		if i := strings.IndexByte(v, '('); i >= 0 && strings.HasSuffix(v, ")") {
			v = v[i+1 : len(v)-1]
		}
		switch {
		case c.cur == nil && k == "service.name":
			c.res = v
		case c.cur != nil && c.attrs:
			c.cur.Attrs[k] = v
		}
	case c.cur != nil && strings.HasPrefix(line, "    "):
		k, v, ok := strings.Cut(trimmed, ":")
		if !ok {
			return
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "Trace ID":
			c.cur.TraceID = v
		case "Parent ID":
			c.cur.ParentID = v
		case "ID":
			c.cur.ID = v
		case "Name":
			c.cur.Name = v
		case "Kind":
			c.cur.Kind = v
		case "Status code":
			c.cur.Status = v
		}
	case !strings.HasPrefix(line, " ") && c.cur != nil && c.attrs:
		// The line after a span's attributes (the next scope, span or
		// the exporter's trailer) ends it.
		if !strings.HasPrefix(line, "Events:") && !strings.HasPrefix(line, "Links:") {
			c.flush()
		}
	}
}

// flush ends the span being parsed.
func (c *Collector) flush() {
	if c.cur != nil {
		c.spans = append(c.spans, *c.cur)
		c.cur = nil
	}
	c.attrs = false
}
