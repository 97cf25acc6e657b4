package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// The server's store metrics that Run reads (when the server exports them).
const (
	// MetricStoreRequests counts durable-store requests by op
	// (get, put_if_absent, put_if_match, list, delete, ...) and result.
	MetricStoreRequests = "dexzd_store_requests_total"
	// MetricStoreFsyncs counts the local store's fsyncs.
	MetricStoreFsyncs = "dexzd_store_fsyncs_total"
	// MetricLogBatches counts the log batches the server wrote.
	MetricLogBatches = "dexzd_log_batches_total"
)

// Sample is one sample of a Prometheus text exposition.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseMetrics parses the Prometheus text exposition format (version
// 0.0.4): one sample a line, `name{label="value",...} value [timestamp]`;
// comment and blank lines are skipped. Label values may hold the escapes
// \\, \" and \n.
func ParseMetrics(r io.Reader) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", n, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

func parseSample(line string) (Sample, error) {
	end := strings.IndexAny(line, "{ \t")
	if end <= 0 {
		return Sample{}, fmt.Errorf("no value in %q", line)
	}
	s := Sample{Name: line[:end]}
	rest := line[end:]
	if rest[0] == '{' {
		labels, after, err := parseLabels(rest[1:])
		if err != nil {
			return Sample{}, fmt.Errorf("%s: %w", s.Name, err)
		}
		s.Labels, rest = labels, after
	}
	f := strings.Fields(rest)
	if len(f) < 1 || len(f) > 2 {
		return Sample{}, fmt.Errorf("%s: want a value and an optional timestamp, got %q", s.Name, rest)
	}
	v, err := parseValue(f[0])
	if err != nil {
		return Sample{}, fmt.Errorf("%s: %w", s.Name, err)
	}
	s.Value = v
	return s, nil
}

// parseLabels parses `name="value",...}` and returns the labels and what
// follows the closing brace.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return nil, "", errors.New("unterminated labels")
		}
		if s[0] == '}' {
			return labels, s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, "", fmt.Errorf("malformed label in %q", s)
		}
		name := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t")
		if s == "" || s[0] != '"' {
			return nil, "", fmt.Errorf("label %s: value not quoted", name)
		}
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				default: // \\ and \"
					b.WriteByte(s[i])
				}
				continue
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return nil, "", fmt.Errorf("label %s: unterminated value", name)
		}
		labels[name] = b.String()
		s = strings.TrimLeft(s[i+1:], " \t")
		if s != "" && s[0] == ',' {
			s = s[1:]
		}
	}
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("value %q: %w", s, err)
	}
	return v, nil
}

// StoreCounts are the server's durable-store counters (or, from Sub, what
// they grew by). A counter the server does not export has its Has field
// false.
type StoreCounts struct {
	// Puts are the conditional writes (put_if_absent + put_if_match), Gets
	// the reads, Requests every request of any op (lists, deletes, ...),
	// all results counted.
	Puts, Gets, Requests float64
	HasRequests          bool
	// Fsyncs are the local store's fsyncs.
	Fsyncs    float64
	HasFsyncs bool
	// LogBatches are the log batches the server wrote.
	LogBatches    float64
	HasLogBatches bool
}

// StoreCountsOf sums the store counters found in samples.
func StoreCountsOf(samples []Sample) StoreCounts {
	var c StoreCounts
	for _, s := range samples {
		switch s.Name {
		case MetricStoreRequests:
			c.HasRequests = true
			c.Requests += s.Value
			switch s.Labels["op"] {
			case "put_if_absent", "put_if_match":
				c.Puts += s.Value
			case "get":
				c.Gets += s.Value
			}
		case MetricStoreFsyncs:
			c.HasFsyncs = true
			c.Fsyncs += s.Value
		case MetricLogBatches:
			c.HasLogBatches = true
			c.LogBatches += s.Value
		}
	}
	return c
}

// Sub is what the counters grew by since the earlier reading o; a counter
// is present when both readings have it.
func (c StoreCounts) Sub(o StoreCounts) StoreCounts {
	return StoreCounts{
		Puts: c.Puts - o.Puts, Gets: c.Gets - o.Gets, Requests: c.Requests - o.Requests,
		HasRequests: c.HasRequests && o.HasRequests,
		Fsyncs:      c.Fsyncs - o.Fsyncs, HasFsyncs: c.HasFsyncs && o.HasFsyncs,
		LogBatches: c.LogBatches - o.LogBatches, HasLogBatches: c.HasLogBatches && o.HasLogBatches,
	}
}

// ReadStoreCounts reads the server's Prometheus endpoint url and returns
// its store counters.
func ReadStoreCounts(ctx context.Context, url string) (*StoreCounts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read metrics: GET %s: %s", url, resp.Status)
	}
	samples, err := ParseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read metrics from %s: %w", url, err)
	}
	c := StoreCountsOf(samples)
	return &c, nil
}

// PeakRSS is the peak resident set size of process pid over its life, in
// bytes: VmHWM of /proc/PID/status (Linux only).
func PeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read the peak RSS of process %d: %w", pid, err)
	}
	v, err := parseVmHWM(b)
	if err != nil {
		return 0, fmt.Errorf("read the peak RSS of process %d: %w", pid, err)
	}
	return v, nil
}

// parseVmHWM takes the VmHWM line ("VmHWM:	  12345 kB") from the contents
// of /proc/PID/status and returns it in bytes.
func parseVmHWM(b []byte) (int64, error) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("VmHWM:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("malformed VmHWM line %q", line)
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmHWM: %w", err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("no VmHWM line")
}
