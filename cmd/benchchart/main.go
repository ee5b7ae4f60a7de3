// Command benchchart measures throughput against concurrency with the
// workloads of `arbor bench` (package bench) and draws it: an SVG chart of
// ops/s against the number of workers, one line per workload.
//
//	go run ./cmd/benchchart --servers 127.0.0.1:2281,127.0.0.1:2282,127.0.0.1:2283 \
//		--save docs/throughput.jsonl -o docs/throughput.svg
//	go run ./cmd/benchchart --from docs/throughput.jsonl -o docs/throughput.svg
//
// By default it runs set and get with 1, 2, 4, 8, 16, 32 and 64 workers
// over 8 sessions, each point for 5s after a 1s warmup, and prints each
// point's figures on stderr as it goes. --save keeps the reports, one JSON
// line each (the JSON of `arbor bench -o json`); --from draws such lines
// instead of running, so a chart can also be made from `arbor bench`
// runs. A point whose run had failed ops is drawn hollow.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/arbor-coord/arbor/bench"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchchart:", err)
		os.Exit(1)
	}
}

func run(args []string, log io.Writer) error {
	fs := flag.NewFlagSet("benchchart", flag.ContinueOnError)
	servers := os.Getenv("ARBOR_SERVERS")
	if servers == "" {
		servers = "127.0.0.1:2281"
	}
	cfg := bench.Config{Keys: 1000, ReadRatio: 0.9, Contenders: 16, Watchers: 16, Prefix: "/bench"}
	var (
		serverList = fs.String("servers", servers, "the servers, host:port,... (default $ARBOR_SERVERS, else 127.0.0.1:2281)")
		workloads  = fs.String("workloads", "set,get", "the workloads, one line each")
		workers    = fs.String("workers", "1,2,4,8,16,32,64", "the numbers of workers, one point each")
		title      = fs.String("title", "Arbor: throughput against concurrency", "the chart's title")
		note       = fs.String("note", "", "the line under the title (default: the setup)")
		from       = fs.String("from", "", "draw the reports in this file (JSON lines) instead of running")
		save       = fs.String("save", "", "also write the reports to this file, one JSON line each")
		out        = fs.String("o", "throughput.svg", "the chart's file (- for stdout)")
	)
	fs.IntVar(&cfg.Conns, "conns", 8, "sessions the workers share")
	fs.IntVar(&cfg.Size, "size", 256, "bytes of each value")
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "the measured phase of each point")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Second, "the warmup before each point")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "to connect, and for each request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	var reps []bench.Report
	var err error
	if *from != "" {
		reps, err = readReports(*from)
	} else {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		cfg.Servers = strings.Split(*serverList, ",")
		reps, err = measure(ctx, cfg, strings.Split(*workloads, ","), *workers, log)
	}
	if err != nil {
		return err
	}
	if *save != "" {
		if err := writeReports(*save, reps); err != nil {
			return err
		}
	}
	if *note == "" {
		*note = setupOf(reps)
	}
	var svg bytes.Buffer
	if err := drawChart(&svg, *title, *note, seriesOf(reps)); err != nil {
		return err
	}
	if *out == "-" {
		_, err = os.Stdout.Write(svg.Bytes())
		return err
	}
	return os.WriteFile(*out, svg.Bytes(), 0o644)
}

// measure runs each workload at each number of workers.
func measure(ctx context.Context, cfg bench.Config, workloads []string, workers string, log io.Writer) ([]bench.Report, error) {
	var counts []int
	for _, f := range strings.Split(workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number of workers %q", f)
		}
		counts = append(counts, n)
	}
	var reps []bench.Report
	for _, w := range workloads {
		for _, n := range counts {
			c := cfg
			c.Workload, c.Workers = strings.TrimSpace(w), n
			rep, err := bench.Run(ctx, c)
			if err != nil {
				return nil, fmt.Errorf("%s with %d workers: %w", c.Workload, n, err)
			}
			fmt.Fprintf(log, "%-7s %3d workers: %8.0f ops/s, p50 %.3f ms, p99 %.3f ms, %d errors\n",
				rep.Workload, n, rep.OpsPerSec, rep.Latency.P50, rep.Latency.P99, rep.Errors)
			reps = append(reps, *rep)
		}
	}
	return reps, nil
}

// readReports reads reports, one JSON value a line (blank lines skipped).
func readReports(name string) ([]bench.Report, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decodeReports(f)
}

func decodeReports(r io.Reader) ([]bench.Report, error) {
	var reps []bench.Report
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var rep bench.Report
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		reps = append(reps, rep)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(reps) == 0 {
		return nil, errors.New("no reports")
	}
	return reps, nil
}

func writeReports(name string, reps []bench.Report) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, rep := range reps {
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	return os.WriteFile(name, b.Bytes(), 0o644)
}

// seriesOf makes a line of each workload, in the order the reports first
// name them, from its points in rising number of workers (the last report
// of a number counts).
func seriesOf(reps []bench.Report) []series {
	var ss []series
	for _, rep := range reps {
		i := slices.IndexFunc(ss, func(s series) bool { return s.name == rep.Workload })
		if i < 0 {
			ss = append(ss, series{name: rep.Workload})
			i = len(ss) - 1
		}
		pts := slices.DeleteFunc(ss[i].points, func(p point) bool { return p.workers == rep.Workers })
		ss[i].points = append(pts, point{workers: rep.Workers, opsPerSec: rep.OpsPerSec, errors: rep.Errors})
	}
	for i := range ss {
		slices.SortFunc(ss[i].points, func(a, b point) int { return a.workers - b.workers })
	}
	return ss
}

// setupOf describes the setup of reps for the note under the title.
func setupOf(reps []bench.Report) string {
	r := reps[0]
	members := len(r.Servers)
	what := fmt.Sprintf("%d members", members)
	if members == 1 {
		what = "one node"
	}
	return fmt.Sprintf("%s, %d sessions, %d-byte values, %d keys; %s measured after a %s warmup per point",
		what, r.Conns, r.Size, r.Keys, time.Duration(r.DurationMs*1e6), time.Duration(r.WarmupMs*1e6))
}
