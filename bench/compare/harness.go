package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dexzd/dexzd/internal/bench"
)

// Config configures Run.
type Config struct {
	Flows, Steps, Callers, Rounds int
	// Warmup is the number of unmeasured flows per round; negative means
	// bench.DefaultWarmup(Flows).
	Warmup  int
	Engines []string
	// EngineFlows overrides Flows (and the default warmup) per engine.
	EngineFlows map[string]int
	// JSONPath, when set, receives the report as JSON.
	JSONPath string
	// ToolsDir holds the installed peers.
	ToolsDir string
	// DexBinary is a dex-server-zd binary; empty builds one.
	DexBinary string
	// PostgresDSN is the PostgreSQL DBOS runs on.
	PostgresDSN string
}

// Measurement is what one engine measured in one round.
type Measurement struct {
	Engine       string  `json:"engine"`
	Round        int     `json:"round"`
	Completed    int     `json:"completed"`
	Failures     int     `json:"failures"`
	ElapsedMS    float64 `json:"elapsed_ms"`
	FlowsPerSec  float64 `json:"flows_per_s"`
	P50MS        float64 `json:"p50_ms"`
	P99MS        float64 `json:"p99_ms"`
	DriverCPUMS  float64 `json:"driver_cpu_ms"`
	ServerCPUMS  float64 `json:"server_cpu_ms"`
	CPUMSPerFlow float64 `json:"cpu_ms_per_flow"`
	// Store figures of Dex-ZD, from its /metrics (nil when not exported):
	// conditional PUTs and GETs per step, fsyncs and log batches per flow.
	PutsPerStep       *float64 `json:"puts_per_step,omitempty"`
	GetsPerStep       *float64 `json:"gets_per_step,omitempty"`
	FsyncsPerFlow     *float64 `json:"fsyncs_per_flow,omitempty"`
	LogBatchesPerFlow *float64 `json:"log_batches_per_flow,omitempty"`
	Error             string   `json:"error,omitempty"`
}

// storeFigures sets m's store figures from a Dex-ZD run's counters.
func (m *Measurement) storeFigures(res bench.Result) {
	st, flows := res.Store, float64(res.Completed)
	if st == nil || res.Completed == 0 {
		return
	}
	steps := flows * float64(res.StepsPerFlow)
	per := func(v, n float64) *float64 { x := v / n; return &x }
	if st.HasRequests {
		m.PutsPerStep, m.GetsPerStep = per(st.Puts, steps), per(st.Gets, steps)
	}
	if st.HasFsyncs {
		m.FsyncsPerFlow = per(st.Fsyncs, flows)
	}
	if st.HasLogBatches {
		m.LogBatchesPerFlow = per(st.LogBatches, flows)
	}
}

func measurement(completed, failures int, elapsed time.Duration, lat bench.Latency, driver, server bench.CPUTime) Measurement {
	m := Measurement{
		Completed: completed, Failures: failures,
		ElapsedMS:   ms(elapsed),
		P50MS:       ms(lat.P50),
		P99MS:       ms(lat.P99),
		DriverCPUMS: ms(driver.Total()),
		ServerCPUMS: ms(server.Total()),
	}
	if elapsed > 0 {
		m.FlowsPerSec = float64(completed) / elapsed.Seconds()
	}
	if completed > 0 {
		m.CPUMSPerFlow = (m.DriverCPUMS + m.ServerCPUMS) / float64(completed)
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// engine is one system under test. round starts its server processes,
// runs the workload, and stops them all before it returns, so that only
// one engine's processes are alive at a time.
type engine interface {
	name() string
	round(ctx context.Context, r roundConfig) (Measurement, error)
}

// roundConfig is what an engine's round gets.
type roundConfig struct {
	Config
	Round int
	// Dir is an empty directory for this round's data.
	Dir string
	Log io.Writer
}

// engineNames are the engines, Dex-ZD's first (dexzdEngines).
var engineNames = []string{"dexzd", "dexzd-s3", "dexzd-pg", "dbos", "restate", "temporal"}

// dexzdEngines are Dex-ZD's engines: dev strict, serve on MinIO, serve on
// PostgreSQL. The others are the peers the ratios compare with.
var dexzdEngines = []string{"dexzd", "dexzd-s3", "dexzd-pg"}

func newEngine(name string, cfg Config) (engine, error) {
	switch name {
	case "dexzd":
		return &dexzdEngine{}, nil
	case "dexzd-s3":
		return &dexzdServeEngine{backend: "s3"}, nil
	case "dexzd-pg":
		return &dexzdServeEngine{backend: "postgres"}, nil
	case "dbos":
		return &dbosEngine{}, nil
	case "restate":
		return &restateEngine{}, nil
	case "temporal":
		return &temporalEngine{}, nil
	}
	return nil, fmt.Errorf("unknown engine %q (want one of %s)", name, strings.Join(engineNames, ","))
}

// Report is the JSON output.
type Report struct {
	Machine     Machine                       `json:"machine"`
	Flows       int                           `json:"flows"`
	Steps       int                           `json:"steps"`
	Callers     int                           `json:"callers"`
	Rounds      int                           `json:"rounds"`
	Warmup      int                           `json:"warmup"`
	EngineFlows map[string]int                `json:"engine_flows,omitempty"`
	Runs        []Measurement                 `json:"runs"`
	Medians     map[string]Measurement        `json:"medians"`
	Ratios      map[string]map[string]float64 `json:"ratio_to_best_peer,omitempty"`
}

// Run runs every engine once per round, alternating the order between
// rounds, prints the medians table to out and progress to log.
func Run(ctx context.Context, cfg Config, out, log io.Writer) error {
	if cfg.Flows < 1 || cfg.Steps < 1 || cfg.Callers < 1 || cfg.Rounds < 1 {
		return fmt.Errorf("--flows, --steps, --callers and --rounds must be at least 1")
	}
	if cfg.Warmup < 0 {
		cfg.Warmup = bench.DefaultWarmup(cfg.Flows)
	}
	if len(cfg.Engines) == 0 {
		return fmt.Errorf("no engines")
	}
	var engines []engine
	for n := range cfg.EngineFlows {
		if !slices.Contains(engineNames, n) {
			return fmt.Errorf("--engine-flows: unknown engine %q", n)
		}
	}
	for _, n := range cfg.Engines {
		e, err := newEngine(n, cfg)
		if err != nil {
			return err
		}
		engines = append(engines, e)
	}
	work, err := os.MkdirTemp("", "dex-compare-")
	if err != nil {
		return fmt.Errorf("make a work directory: %w", err)
	}
	defer os.RemoveAll(work)
	usesDex := slices.ContainsFunc(cfg.Engines, func(e string) bool { return slices.Contains(dexzdEngines, e) })
	if usesDex && cfg.DexBinary == "" {
		fmt.Fprintln(log, "building dex-server-zd")
		if cfg.DexBinary, err = buildDexServer(ctx, filepath.Join(work, "dex-server-zd")); err != nil {
			return err
		}
	}
	if cfg.ToolsDir, err = filepath.Abs(cfg.ToolsDir); err != nil {
		return err
	}

	rep := Report{Machine: describeMachine(), Flows: cfg.Flows, Steps: cfg.Steps, Callers: cfg.Callers,
		Rounds: cfg.Rounds, Warmup: cfg.Warmup, EngineFlows: cfg.EngineFlows}
	for r := range cfg.Rounds {
		order := slices.Clone(engines)
		// Alternate: rotate by the round, and reverse every other round,
		// so no engine always runs right after the same one.
		k := r % len(order)
		order = append(order[k:], order[:k]...)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, e := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			dir := filepath.Join(work, fmt.Sprintf("%s-r%d", e.name(), r+1))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			rc := roundConfig{Config: cfg, Round: r + 1, Dir: dir, Log: log}
			if n, ok := cfg.EngineFlows[e.name()]; ok {
				rc.Flows, rc.Warmup = n, min(cfg.Warmup, bench.DefaultWarmup(n))
			}
			fmt.Fprintf(log, "round %d/%d: %s: %d flows x %d steps, %d callers (+%d warmup)\n",
				r+1, cfg.Rounds, e.name(), rc.Flows, rc.Steps, rc.Callers, rc.Warmup)
			m, err := e.round(ctx, rc)
			m.Engine, m.Round = e.name(), r+1
			if err != nil {
				m.Error = err.Error()
				fmt.Fprintf(log, "  %s failed: %v\n", e.name(), err)
			} else {
				fmt.Fprintf(log, "  %.0f flows/s, p50 %.2f ms, p99 %.2f ms, CPU %.3f ms/flow (driver %.0f ms, server %.0f ms)%s\n",
					m.FlowsPerSec, m.P50MS, m.P99MS, m.CPUMSPerFlow, m.DriverCPUMS, m.ServerCPUMS, storeLine(m))
			}
			rep.Runs = append(rep.Runs, m)
			_ = os.RemoveAll(dir)
		}
	}
	rep.Medians = medians(rep.Runs, cfg.Engines)
	rep.Ratios = ratios(rep.Medians)
	printTable(out, rep, cfg.Engines)
	if cfg.JSONPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(cfg.JSONPath), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(cfg.JSONPath, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", cfg.JSONPath, err)
		}
	}
	for _, m := range rep.Runs {
		if m.Error != "" {
			return fmt.Errorf("%s failed in round %d: %s", m.Engine, m.Round, m.Error)
		}
	}
	return nil
}

// metrics are the table's columns: name, getter, whether higher is better.
var metrics = []struct {
	name   string
	get    func(Measurement) float64
	higher bool
}{
	{"flows/s", func(m Measurement) float64 { return m.FlowsPerSec }, true},
	{"p50 ms", func(m Measurement) float64 { return m.P50MS }, false},
	{"p99 ms", func(m Measurement) float64 { return m.P99MS }, false},
	{"CPU ms/flow", func(m Measurement) float64 { return m.CPUMSPerFlow }, false},
}

// medians takes, per engine, the median of every metric over the rounds
// that succeeded (each metric separately).
func medians(runs []Measurement, engines []string) map[string]Measurement {
	out := map[string]Measurement{}
	for _, e := range engines {
		var ok []Measurement
		for _, m := range runs {
			if m.Engine == e && m.Error == "" {
				ok = append(ok, m)
			}
		}
		if len(ok) == 0 {
			continue
		}
		med := func(get func(Measurement) float64) float64 {
			v := make([]float64, len(ok))
			for i, m := range ok {
				v[i] = get(m)
			}
			slices.Sort(v)
			if n := len(v); n%2 == 1 {
				return v[n/2]
			} else {
				return (v[n/2-1] + v[n/2]) / 2
			}
		}
		out[e] = Measurement{
			Engine: e, Round: len(ok),
			Completed:    int(med(func(m Measurement) float64 { return float64(m.Completed) })),
			ElapsedMS:    med(func(m Measurement) float64 { return m.ElapsedMS }),
			FlowsPerSec:  med(func(m Measurement) float64 { return m.FlowsPerSec }),
			P50MS:        med(func(m Measurement) float64 { return m.P50MS }),
			P99MS:        med(func(m Measurement) float64 { return m.P99MS }),
			DriverCPUMS:  med(func(m Measurement) float64 { return m.DriverCPUMS }),
			ServerCPUMS:  med(func(m Measurement) float64 { return m.ServerCPUMS }),
			CPUMSPerFlow: med(func(m Measurement) float64 { return m.CPUMSPerFlow }),
		}
		medOpt := func(get func(Measurement) *float64) *float64 {
			var v []float64
			for _, m := range ok {
				if p := get(m); p != nil {
					v = append(v, *p)
				}
			}
			if len(v) == 0 {
				return nil
			}
			slices.Sort(v)
			x := v[len(v)/2]
			if len(v)%2 == 0 {
				x = (v[len(v)/2-1] + v[len(v)/2]) / 2
			}
			return &x
		}
		m := out[e]
		m.PutsPerStep = medOpt(func(m Measurement) *float64 { return m.PutsPerStep })
		m.GetsPerStep = medOpt(func(m Measurement) *float64 { return m.GetsPerStep })
		m.FsyncsPerFlow = medOpt(func(m Measurement) *float64 { return m.FsyncsPerFlow })
		m.LogBatchesPerFlow = medOpt(func(m Measurement) *float64 { return m.LogBatchesPerFlow })
		out[e] = m
	}
	return out
}

// ratios divides every engine's median by the best peer's, per metric.
// The peers are the engines other than Dex-ZD's.
func ratios(med map[string]Measurement) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, mt := range metrics {
		best, found := 0.0, false
		for e, m := range med {
			if slices.Contains(dexzdEngines, e) {
				continue
			}
			v := mt.get(m)
			if !found || (mt.higher && v > best) || (!mt.higher && v < best) {
				best, found = v, true
			}
		}
		if !found || best == 0 {
			continue
		}
		for e, m := range med {
			if out[e] == nil {
				out[e] = map[string]float64{}
			}
			out[e][mt.name] = mt.get(m) / best
		}
	}
	return out
}

func printTable(w io.Writer, rep Report, engines []string) {
	fmt.Fprintf(w, "\nchain: %d flows x %d steps, %d callers, median of %d rounds; %s\n",
		rep.Flows, rep.Steps, rep.Callers, rep.Rounds, rep.Machine)
	for _, e := range engines {
		if n, ok := rep.EngineFlows[e]; ok {
			fmt.Fprintf(w, "(%s: %d flows per round)\n", e, n)
		}
	}
	fmt.Fprintln(w, "(×N = ratio to the best peer: DBOS, Restate, Temporal, whichever is best per column; PUTs/step and fsyncs/flow: Dex-ZD's store counters, - where not exported)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "engine\t")
	for _, mt := range metrics {
		fmt.Fprintf(tw, "%s\t", mt.name)
	}
	fmt.Fprintln(tw, "PUTs/step\tfsyncs/flow\trounds ok\t")
	for _, e := range engines {
		m, ok := rep.Medians[e]
		fmt.Fprintf(tw, "%s\t", e)
		if !ok {
			for range metrics {
				fmt.Fprint(tw, "-\t")
			}
			fmt.Fprintln(tw, "-\t-\t0\t")
			continue
		}
		for _, mt := range metrics {
			v := mt.get(m)
			r, hasR := rep.Ratios[e][mt.name]
			if hasR && !math.IsNaN(r) {
				fmt.Fprintf(tw, "%s (×%.2f)\t", num(v), r)
			} else {
				fmt.Fprintf(tw, "%s\t", num(v))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t\n", optNum(m.PutsPerStep), optNum(m.FsyncsPerFlow), m.Round)
	}
	tw.Flush()
}

// optNum renders an optional figure, "-" when absent.
func optNum(v *float64) string {
	if v == nil {
		return "-"
	}
	return num(*v)
}

// storeLine is the store figures of a round for the progress log.
func storeLine(m Measurement) string {
	if m.PutsPerStep == nil && m.FsyncsPerFlow == nil && m.LogBatchesPerFlow == nil {
		return ""
	}
	return fmt.Sprintf(", PUTs/step %s, GETs/step %s, fsyncs/flow %s, log batches/flow %s",
		optNum(m.PutsPerStep), optNum(m.GetsPerStep), optNum(m.FsyncsPerFlow), optNum(m.LogBatchesPerFlow))
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
