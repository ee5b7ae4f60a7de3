package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// series is one line of the chart: a workload's throughput at each
// concurrency.
type series struct {
	name   string
	points []point // by workers, rising
}

type point struct {
	workers   int
	opsPerSec float64
	errors    int64 // ops that failed: the point is drawn hollow
}

// The chart's geometry, in SVG user units (pixels).
const (
	width, height            = 760, 460
	left, right, top, bottom = 80, 150, 64, 64
	plotW, plotH             = width - left - right, height - top - bottom
)

// The looks of the lines: colours that colour-blind readers tell apart
// (Okabe and Ito), and a dash pattern and marker each, so that no line is
// told from another by colour alone.
var (
	colours = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"}
	dashes  = []string{"", "8 4", "2 4", "8 4 2 4"}
	markers = []string{"circle", "square", "diamond", "triangle"}
)

// drawChart writes an SVG chart of ss: ops/s (y, from 0) against workers
// (x, on a log2 scale), with a title, a note under it and a legend. A point
// whose run had failed ops is drawn hollow, and the legend says so.
func drawChart(w io.Writer, title, note string, ss []series) error {
	var workers []int
	most := 0.0
	failed := false
	for _, s := range ss {
		for _, p := range s.points {
			failed = failed || p.errors > 0
			if !slices.Contains(workers, p.workers) {
				workers = append(workers, p.workers)
			}
			most = max(most, p.opsPerSec)
		}
	}
	if len(workers) == 0 {
		return fmt.Errorf("nothing to draw")
	}
	slices.Sort(workers)
	lo, hi := math.Log2(float64(workers[0])), math.Log2(float64(workers[len(workers)-1]))
	const pad = 28 // keeps the first and last points and their values off the edges
	x := func(n int) float64 {
		if hi == lo {
			return left + plotW/2
		}
		return left + pad + (math.Log2(float64(n))-lo)/(hi-lo)*(plotW-2*pad)
	}
	ymax := niceCeil(most)
	y := func(v float64) float64 { return top + plotH - v/ymax*plotH }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, "<title>%s</title>\n<desc>%s</desc>\n", esc(title), esc(describe(ss)))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="26" font-size="16" font-weight="bold">%s</text>`+"\n", left, esc(title))
	fmt.Fprintf(&b, `<text x="%d" y="46" fill="#444444">%s</text>`+"\n", left, esc(note))

	// The grid and the axes' labels.
	const ticks = 5
	for i := 0; i <= ticks; i++ {
		v := ymax * float64(i) / ticks
		stroke := "#dddddd"
		if i == 0 {
			stroke = "#000000" // the x axis
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", left, y(v), left+plotW, y(v), stroke)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, y(v)+4, esc(short(v)))
	}
	for _, n := range workers {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#dddddd"/>`+"\n", x(n), top, x(n), top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(n), top+plotH+18, n)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000000"/>`+"\n", left, top, left, top+plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">workers (requests in flight at once; log scale)</text>`+"\n",
		left+plotW/2, height-18)
	fmt.Fprintf(&b, `<text transform="translate(22 %d) rotate(-90)" text-anchor="middle">ops/s</text>`+"\n", top+plotH/2)

	// The lines, their points with their values, and the legend.
	for i, s := range ss {
		colour, dash, marker := colours[i%len(colours)], dashes[i%len(dashes)], markers[i%len(markers)]
		var pts []byte
		for _, p := range s.points {
			pts = fmt.Appendf(pts, "%.1f,%.1f ", x(p.workers), y(p.opsPerSec))
		}
		fmt.Fprintf(&b, `<g class="series" data-workload="%s">`+"\n", esc(s.name))
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s" points="%s"/>`+"\n",
			colour, dash, bytes.TrimSpace(pts))
		for _, p := range s.points {
			px, py := x(p.workers), y(p.opsPerSec)
			drawMarker(&b, marker, colour, px, py, p.errors > 0)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="%s">%s</text>`+"\n",
				px, py-9, colour, esc(short(p.opsPerSec)))
		}
		ly := float64(top + 12 + 22*i)
		lx := float64(left + plotW + 16)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`+"\n",
			lx, ly, lx+36, ly, colour, dash)
		drawMarker(&b, marker, colour, lx+18, ly, false)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+44, ly+4, esc(s.name))
		b.WriteString("</g>\n")
	}
	if failed {
		ly := float64(top + 12 + 22*len(ss))
		lx := float64(left + plotW + 16)
		drawMarker(&b, "circle", "#444444", lx+18, ly, true)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10">hollow: some ops</text>`+"\n", lx+30, ly+4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10">of the run failed</text>`+"\n", lx+30, ly+16)
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// drawMarker draws a marker of kind at x, y: filled, or hollow.
func drawMarker(b *bytes.Buffer, kind, colour string, x, y float64, hollow bool) {
	paint := fmt.Sprintf(`fill="%s"`, colour)
	if hollow {
		paint = fmt.Sprintf(`fill="#ffffff" stroke="%s" stroke-width="1.5"`, colour)
	}
	switch kind {
	case "square":
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="8" height="8" %s/>`+"\n", x-4, y-4, paint)
	case "diamond":
		fmt.Fprintf(b, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" %s/>`+"\n",
			x, y-5, x+5, y, x, y+5, x-5, y, paint)
	case "triangle":
		fmt.Fprintf(b, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" %s/>`+"\n", x, y-5, x+5, y+4, x-5, y+4, paint)
	default:
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4" %s/>`+"\n", x, y, paint)
	}
}

// niceCeil is the least of 1, 2, 2.5 or 5 times a power of ten that is at
// least v: the top of the y axis.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// short prints an ops/s figure: 950, 12.5k, 1.2M.
func short(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(math.Round(v/1e5)/10, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(math.Round(v/1e2)/10, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
}

// describe says in words what the chart shows, for its <desc>.
func describe(ss []series) string {
	var b []byte
	for _, s := range ss {
		b = fmt.Appendf(b, "%s:", s.name)
		for _, p := range s.points {
			b = fmt.Appendf(b, " %d workers %.0f ops/s;", p.workers, p.opsPerSec)
		}
		b = append(b, ' ')
	}
	return string(bytes.TrimSpace(b))
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
