package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/bench"
)

// reports are what --save writes (and `arbor bench -o json` prints), cut
// down to the fields the chart uses, in no particular order.
const reports = `{"workload":"set","servers":["127.0.0.1:2281","127.0.0.1:2282","127.0.0.1:2283"],"conns":8,"workers":4,"size":256,"keys":1000,"warmupMs":1000,"durationMs":5000,"opsPerSec":4000}
{"workload":"set","servers":["127.0.0.1:2281","127.0.0.1:2282","127.0.0.1:2283"],"conns":8,"workers":1,"size":256,"keys":1000,"warmupMs":1000,"durationMs":5000,"opsPerSec":1500}

{"workload":"get","servers":["127.0.0.1:2281"],"conns":8,"workers":1,"size":256,"keys":1000,"warmupMs":1000,"durationMs":5000,"opsPerSec":40000}
{"workload":"set","servers":["127.0.0.1:2281","127.0.0.1:2282","127.0.0.1:2283"],"conns":8,"workers":64,"size":256,"keys":1000,"warmupMs":1000,"durationMs":5000,"opsPerSec":17600,"errors":3}
{"workload":"get","servers":["127.0.0.1:2281"],"conns":8,"workers":64,"size":256,"keys":1000,"warmupMs":1000,"durationMs":5000,"opsPerSec":163900}
`

func TestTheChartHasALineOfPointsPerWorkload(t *testing.T) {
	reps, err := decodeReports(strings.NewReader(reports))
	if err != nil {
		t.Fatal(err)
	}
	var svg bytes.Buffer
	if err := drawChart(&svg, "a <title> & more", setupOf(reps), seriesOf(reps)); err != nil {
		t.Fatal(err)
	}
	lines := polylines(t, svg.Bytes())
	want := map[string][]int{"set": {1, 4, 64}, "get": {1, 64}}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %s", len(lines), len(want), svg.String())
	}
	for name, pts := range lines {
		if len(pts) != len(want[name]) {
			t.Fatalf("%s has %d points, want %d", name, len(pts), len(want[name]))
		}
		for i := 1; i < len(pts); i++ {
			if pts[i][0] <= pts[i-1][0] {
				t.Errorf("%s: the points do not go right with the workers: %v", name, pts)
			}
		}
	}
	// More ops/s is higher up (a smaller y); the top of the axis is above them all.
	set, get := lines["set"], lines["get"]
	if !(set[0][1] > set[1][1] && set[1][1] > set[2][1] && get[1][1] < set[2][1] && get[1][1] >= top) {
		t.Errorf("the heights do not follow the throughput: set %v, get %v", set, get)
	}
	// 64 workers are as far from 4 as 4 from 1 squared: a log scale.
	if d1, d2 := set[1][0]-set[0][0], set[2][0]-set[1][0]; d2 < 1.99*d1 || d2 > 2.01*d1 {
		t.Errorf("x is not on a log scale: %v", set)
	}
	if !strings.Contains(svg.String(), "3 members, 8 sessions, 256-byte values") {
		t.Errorf("no note of the setup in %s", svg.String())
	}
	// The one point with errors, and the legend's sample, are hollow.
	if n := strings.Count(svg.String(), `fill="#ffffff" stroke=`); n != 2 {
		t.Errorf("%d hollow markers, want the point with errors and the legend's", n)
	}
}

// polylines parses the SVG and returns each series' points.
func polylines(t *testing.T, svg []byte) map[string][][2]float64 {
	t.Helper()
	out := map[string][][2]float64{}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var name string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		for _, a := range el.Attr {
			switch {
			case el.Name.Local == "g" && a.Name.Local == "data-workload":
				name = a.Value
			case el.Name.Local == "polyline" && a.Name.Local == "points":
				for _, pair := range strings.Fields(a.Value) {
					xs, ys, _ := strings.Cut(pair, ",")
					x, err1 := strconv.ParseFloat(xs, 64)
					y, err2 := strconv.ParseFloat(ys, 64)
					if err1 != nil || err2 != nil {
						t.Fatalf("bad point %q", pair)
					}
					out[name] = append(out[name], [2]float64{x, y})
				}
			}
		}
	}
}

func TestSaveThenFromDrawsTheSameChart(t *testing.T) {
	dir := t.TempDir()
	reps, err := decodeReports(strings.NewReader(reports))
	if err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(dir, "r.jsonl")
	if err := writeReports(saved, reps); err != nil {
		t.Fatal(err)
	}
	again, err := readReports(saved)
	if err != nil || len(again) != len(reps) {
		t.Fatalf("read %d reports (%v), want %d", len(again), err, len(reps))
	}
	var a, b bytes.Buffer
	drawChart(&a, "t", "n", seriesOf(reps))
	drawChart(&b, "t", "n", seriesOf(again))
	if a.String() != b.String() {
		t.Error("the saved reports draw another chart")
	}
	if err := run([]string{"--from", saved, "-o", filepath.Join(dir, "c.svg")}, io.Discard); err != nil {
		t.Fatal(err)
	}
}

func TestNiceAxisTops(t *testing.T) {
	for v, want := range map[float64]float64{0: 1, 1: 1, 1.5: 2, 2.2: 2.5, 3: 5, 7: 10, 17600: 20000, 163900: 200000, 45000: 50000} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}

func TestBadInput(t *testing.T) {
	if _, err := decodeReports(strings.NewReader("")); err == nil {
		t.Error("no reports: no error")
	}
	if _, err := decodeReports(strings.NewReader("{\"workload\":\n")); err == nil {
		t.Error("bad JSON: no error")
	}
	if err := drawChart(io.Discard, "t", "n", seriesOf([]bench.Report{})); err == nil {
		t.Error("an empty chart: no error")
	}
	if err := run([]string{"--workers", "1,x", "--servers", "127.0.0.1:1"}, io.Discard); err == nil {
		t.Error("bad --workers: no error")
	}
}
