// Package svgchart is the tree's one SVG writer: the simulator's figures
// (cmd/simnet), the benchmark report's (cmd/bench) and the primitives under
// `relay demo`'s tightening diagram (cmd/relay). It draws line charts
// (series of points on linear or log axes, optionally with min-max bars and
// labelled reference lines), CDFs of durations (a log time axis against a
// quantile axis that stretches the tail) and grouped bar charts, as
// standalone SVG documents. It has no dependencies and no state; a chart is a
// value, Render returns its bytes. Writer and Escape are the primitives, for
// a specialised drawing.
//
// The layout is fixed: a Width × Height canvas, a plot area inset by the
// margins, "nice" axis ticks (1, 2 or 5 times a power of ten), a legend at the
// top right of the plot area. Colours come from a fixed palette that stays
// distinguishable in greyscale and for common colour blindness.
package svgchart

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strings"
	"time"
)

const (
	// Width and Height are the canvas size in pixels.
	Width  = 720
	Height = 400
	// The plot area's margins: room for the title, tick labels and axis
	// labels.
	marginLeft   = 72
	marginRight  = 24
	marginTop    = 40
	marginBottom = 56
	// targetTicks is about how many ticks an axis gets.
	targetTicks = 6
	fontSize    = 12
)

// palette is the series colours, in order (Okabe–Ito).
func palette(i int) string {
	p := [...]string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"}
	return p[i%len(p)]
}

// dashes gives every other cycle of the palette a dash pattern.
func dashes(i int) string {
	if (i/8)%2 == 1 {
		return ` stroke-dasharray="6 3"`
	}
	return ""
}

// Series is one line of a LineChart.
type Series struct {
	Name string
	X, Y []float64
	// Labels, if set, annotate the points (one per point).
	Labels []string
	// Lo and Hi, if set, draw a bar from Lo[i] to Hi[i] at each point (a
	// range, such as the min-max of repeated measurements).
	Lo, Hi []float64
}

// LineChart plots series of points joined by lines.
type LineChart struct {
	Title, XLabel, YLabel string
	Series                []Series
	// YMin and XMin default to 0 (axes start at zero unless a value is
	// negative); set FitY to fit the Y axis to the data instead.
	FitY bool
	// Steps draws each series as a step function (for CDFs).
	Steps bool
	// LogY puts the Y axis on a log scale (decades); values <= 0 are not
	// drawn.
	LogY bool
	// LegendBottom puts the legend at the bottom right of the plot area
	// instead of the top right.
	LegendBottom bool
	// XTicks, if set, replace the X axis's numeric ticks (for categories
	// placed at 0, 1, 2, ...).
	XTicks []Tick
	// Refs are horizontal reference lines, grey, named at their right end.
	Refs []Ref
}

// Tick is a labelled position on an axis.
type Tick struct {
	At    float64
	Label string
}

// Ref is a horizontal reference line of a LineChart.
type Ref struct {
	Y      float64
	Name   string
	Dashed bool
}

// BarChart plots grouped bars: one group per category, one bar per series.
type BarChart struct {
	Title, YLabel string
	// Categories name the groups; '\n' breaks a name into lines.
	Categories []string
	Series     []BarSeries
}

// BarSeries is one bar of every group.
type BarSeries struct {
	Name   string
	Values []float64 // one per category; NaN leaves a gap
}

// Writer accumulates an SVG document. Its zero value is empty.
type Writer struct{ b bytes.Buffer }

// F appends format, formatted with a as by fmt.Fprintf. Text from outside
// goes through Escape first.
func (w *Writer) F(format string, a ...any) { fmt.Fprintf(&w.b, format, a...) }

// Bytes returns the document so far.
func (w *Writer) Bytes() []byte { return w.b.Bytes() }

// Escape escapes s for SVG text and attribute values.
func Escape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

type canvas struct{ Writer }

func (c *canvas) f(format string, a ...any) { c.F(format, a...) }

func (c *canvas) open(title string) {
	c.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="%d">`+"\n",
		Width, Height, Width, Height, fontSize)
	c.f(`<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", Width, Height)
	c.f(`<text x="%d" y="24" text-anchor="middle" font-size="%d" font-weight="bold">%s</text>`+"\n", Width/2, fontSize+2, esc(title))
}

func (c *canvas) close() []byte {
	c.f("</svg>\n")
	return c.Bytes()
}

func esc(s string) string { return Escape(s) }

// axis maps data values to pixels along one dimension.
type axis struct {
	lo, hi     float64 // data range (after rounding to ticks); log10 of it when log
	p0, p1     float64 // pixel range
	ticks      []float64
	tickFormat string
	log        bool
}

// newLogAxis is a log-scale axis from the decade below lo to the one above
// hi (both > 0), a tick per decade.
func newLogAxis(lo, hi, p0, p1 float64) axis {
	if !(lo > 0) || math.IsInf(hi, 0) || !(hi > 0) {
		lo, hi = 1, 10
	}
	a := axis{lo: math.Floor(math.Log10(lo)), hi: math.Ceil(math.Log10(hi)), p0: p0, p1: p1, log: true, tickFormat: "%.0f"}
	if a.lo < 0 {
		a.tickFormat = "%g"
	}
	if a.hi <= a.lo {
		a.hi = a.lo + 1
	}
	for e := a.lo; e <= a.hi; e++ {
		a.ticks = append(a.ticks, math.Pow(10, e))
	}
	return a
}

func newAxis(lo, hi, p0, p1 float64) axis {
	if math.IsInf(lo, 0) || math.IsNaN(lo) || math.IsInf(hi, 0) || math.IsNaN(hi) {
		lo, hi = 0, 1
	}
	if hi <= lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / targetTicks)
	lo = math.Floor(lo/step) * step
	hi = math.Ceil(hi/step) * step
	a := axis{lo: lo, hi: hi, p0: p0, p1: p1}
	for v := lo; v <= hi+step/2; v += step {
		a.ticks = append(a.ticks, v)
	}
	digits := max(0, -int(math.Floor(math.Log10(step))))
	a.tickFormat = fmt.Sprintf("%%.%df", digits)
	return a
}

// niceStep returns 1, 2 or 5 times a power of ten, at least x.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func (a axis) pos(v float64) float64 {
	if a.log {
		v = math.Log10(v)
	}
	return a.p0 + (v-a.lo)/(a.hi-a.lo)*(a.p1-a.p0)
}

// drawable reports whether v can be placed on the axis.
func (a axis) drawable(v float64) bool { return !math.IsNaN(v) && (!a.log || v > 0) }

func (a axis) label(v float64) string { return fmt.Sprintf(a.tickFormat, v) }

func plotArea() (x0, x1, y0, y1 float64) {
	return marginLeft, Width - marginRight, Height - marginBottom, marginTop
}

// frame draws the axes, grid, ticks and axis labels.
func (c *canvas) frame(xa, ya axis, xlabel, ylabel string, xTicks bool) {
	x0, x1, y0, y1 := plotArea()
	for _, v := range ya.ticks {
		y := ya.pos(v)
		c.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", x0, y, x1, y)
		c.f(`<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-6, y+4, ya.label(v))
	}
	if xTicks {
		for _, v := range xa.ticks {
			x := xa.pos(v)
			c.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", x, y0, x, y1)
			c.f(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+16, xa.label(v))
		}
	}
	c.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000"/>`+"\n", x0, y0, x1, y0)
	c.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000"/>`+"\n", x0, y0, x0, y1)
	c.f(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, Height-12, esc(xlabel))
	c.f(`<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (y0+y1)/2, esc(ylabel))
}

// legend draws the series names at the top right of the plot area, or at
// the bottom right.
func (c *canvas) legend(names []string, bars, bottom bool) {
	_, x1, y0, y1 := plotArea()
	if bottom {
		y1 = y0 - float64(len(names)*16) - 12
	}
	w := 0
	for _, n := range names {
		w = max(w, len(n))
	}
	lx := x1 - float64(w*7) - 36
	c.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="#ffffff" fill-opacity="0.85" stroke="#cccccc"/>`+"\n",
		lx-6, y1+1, x1-lx+2, len(names)*16+6)
	for i, n := range names {
		y := y1 + 8 + float64(i)*16
		if bars {
			c.f(`<rect x="%.1f" y="%.1f" width="18" height="10" fill="%s"/>`+"\n", lx, y-4, palette(i))
		} else {
			c.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, y+1, lx+18, y+1, palette(i), dashes(i))
		}
		c.f(`<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+24, y+5, esc(n))
	}
}

// Render returns the chart as an SVG document.
func (l LineChart) Render() []byte {
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range l.Series {
		for i := range s.X {
			if i >= len(s.Y) || math.IsNaN(s.Y[i]) || (l.LogY && s.Y[i] <= 0) {
				continue
			}
			xmin, xmax = math.Min(xmin, s.X[i]), math.Max(xmax, s.X[i])
			ymin, ymax = math.Min(ymin, s.Y[i]), math.Max(ymax, s.Y[i])
			if i < len(s.Hi) {
				ymax = math.Max(ymax, s.Hi[i])
			}
			if i < len(s.Lo) {
				ymin = math.Min(ymin, s.Lo[i])
			}
		}
	}
	for _, r := range l.Refs {
		ymin, ymax = math.Min(ymin, r.Y), math.Max(ymax, r.Y)
	}
	if len(l.XTicks) > 0 {
		// Categories: half a step of room either side.
		xmin, xmax = -0.5, float64(len(l.XTicks))-0.5
	}
	if !l.FitY && !l.LogY {
		ymin = math.Min(ymin, 0)
	}
	xmin = math.Min(xmin, 0)
	x0, x1, y0, y1 := plotArea()
	xa := newAxis(xmin, xmax, x0, x1)
	if len(l.XTicks) > 0 {
		xa = axis{lo: xmin, hi: xmax, p0: x0, p1: x1}
	}
	ya := newAxis(ymin, ymax*1.05, y0, y1)
	if l.LogY {
		ya = newLogAxis(ymin, ymax, y0, y1)
	}
	var c canvas
	c.open(l.Title)
	c.frame(xa, ya, l.XLabel, l.YLabel, len(l.XTicks) == 0)
	for _, t := range l.XTicks {
		c.f(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", xa.pos(t.At), y0+16, esc(t.Label))
	}
	for _, r := range l.Refs {
		dash := ""
		if r.Dashed {
			dash = ` stroke-dasharray="5 4"`
		}
		y := ya.pos(r.Y)
		c.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999" stroke-width="2"%s/>`+"\n", x0, y, x1, y, dash)
		c.f(`<text x="%.1f" y="%.1f" text-anchor="end" fill="#666">%s</text>`+"\n", x1-4, y-5, esc(r.Name))
	}
	names := make([]string, len(l.Series))
	for i, s := range l.Series {
		names[i] = s.Name
		var pts []string
		py := 0.0
		for j := range s.X {
			if j >= len(s.Y) || !ya.drawable(s.Y[j]) {
				continue
			}
			x, y := xa.pos(s.X[j]), ya.pos(s.Y[j])
			if l.Steps && len(pts) > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, py))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			py = y
		}
		if len(pts) > 0 {
			c.f(`<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", palette(i), dashes(i), strings.Join(pts, " "))
		}
		if !l.Steps {
			for j := range s.X {
				if j >= len(s.Y) || !ya.drawable(s.Y[j]) {
					continue
				}
				x, y := xa.pos(s.X[j]), ya.pos(s.Y[j])
				if j < len(s.Lo) && j < len(s.Hi) && ya.drawable(s.Lo[j]) && ya.drawable(s.Hi[j]) {
					c.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x, ya.pos(s.Lo[j]), x, ya.pos(s.Hi[j]), palette(i))
				}
				c.f(`<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x, y, palette(i))
				if j < len(s.Labels) && s.Labels[j] != "" {
					c.f(`<text x="%.1f" y="%.1f" font-size="%d">%s</text>`+"\n", x+5, y-6, fontSize-2, esc(s.Labels[j]))
				}
			}
		}
	}
	c.legend(names, false, l.LegendBottom)
	return c.close()
}

// Render returns the chart as an SVG document.
func (b BarChart) Render() []byte {
	ymax := 0.0
	for _, s := range b.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				ymax = math.Max(ymax, v)
			}
		}
	}
	x0, x1, y0, y1 := plotArea()
	ya := newAxis(0, ymax*1.15, y0, y1)
	var c canvas
	c.open(b.Title)
	c.frame(axis{}, ya, "", b.YLabel, false)
	ng, ns := len(b.Categories), len(b.Series)
	if ng == 0 || ns == 0 {
		return c.close()
	}
	gw := (x1 - x0) / float64(ng)
	bw := gw * 0.8 / float64(ns)
	for g, cat := range b.Categories {
		gx := x0 + float64(g)*gw + gw*0.1
		for s, ser := range b.Series {
			if g >= len(ser.Values) || math.IsNaN(ser.Values[g]) {
				continue
			}
			v := ser.Values[g]
			y := ya.pos(v)
			c.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`+"\n",
				gx+float64(s)*bw, y, bw*0.92, y0-y, palette(s), esc(ser.Name), esc(fmt.Sprintf("%.4g", v)))
		}
		// A category name's lines (split at '\n') go under its group.
		for i, line := range strings.Split(cat, "\n") {
			c.f(`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="%d">%s</text>`+"\n", gx+gw*0.4, y0+14+float64(i*12), fontSize-2, esc(line))
		}
	}
	names := make([]string, ns)
	for i, s := range b.Series {
		names[i] = s.Name
	}
	c.legend(names, true, false)
	return c.close()
}

// CDFPoint is one point of a CDF: a fraction Q of the samples took at most
// D.
type CDFPoint struct {
	D time.Duration
	Q float64
}

// CDFSeries is one line of a CDFChart, points in increasing order.
type CDFSeries struct {
	Name   string
	Points []CDFPoint
}

// CDFChart plots CDFs of durations: time on a log axis (from 100 ns at the
// least), the quantile on a -log10(1-q) axis, so that the tail (0.99, 0.999)
// gets as much room as the body.
type CDFChart struct {
	Title  string
	Series []CDFSeries
}

// cdfTailDecades is how many nines the quantile axis shows: it ends at
// 0.999, where everything above is drawn.
const cdfTailDecades = 3

// Render returns the chart as an SVG document.
func (ch CDFChart) Render() []byte {
	lo, hi := math.Inf(1), 0.0
	for _, s := range ch.Series {
		for _, p := range s.Points {
			lo = math.Min(lo, float64(p.D))
			hi = math.Max(hi, float64(p.D))
		}
	}
	var c canvas
	c.open(ch.Title)
	if hi <= lo {
		return c.close()
	}
	x0, x1, y0, y1 := plotArea()
	lo, hi = math.Log10(math.Max(lo, 100)), math.Log10(hi)
	px := func(d time.Duration) float64 {
		return x0 + (math.Log10(math.Max(float64(d), 100))-lo)/(hi-lo)*(x1-x0)
	}
	py := func(q float64) float64 {
		t := math.Min(-math.Log10(math.Max(1-q, math.Pow(10, -cdfTailDecades))), cdfTailDecades)
		return y0 + t/cdfTailDecades*(y1-y0)
	}
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999} {
		c.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", x0, py(q), x1, py(q))
		c.f(`<text x="%.1f" y="%.1f" text-anchor="end">%g</text>`+"\n", x0-6, py(q)+4, q)
	}
	// Time ticks at 1, 2 and 5 times each power of ten in range.
	for e := math.Floor(lo); e <= hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := math.Log10(m) + e
			if v < lo || v > hi {
				continue
			}
			x := x0 + (v-lo)/(hi-lo)*(x1-x0)
			c.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", x, y0, x, y1)
			c.f(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+16, time.Duration(math.Pow(10, v)).Round(time.Microsecond))
		}
	}
	c.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000"/>`+"\n", x0, y0, x1, y0)
	c.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000"/>`+"\n", x0, y0, x0, y1)
	c.f(`<text x="%.1f" y="%d" text-anchor="middle">time (log scale)</text>`+"\n", (x0+x1)/2, Height-12)
	c.f(`<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">quantile</text>`+"\n", (y0+y1)/2)
	names := make([]string, len(ch.Series))
	for i, s := range ch.Series {
		names[i] = s.Name
		if len(s.Points) == 0 {
			continue
		}
		pts := make([]string, len(s.Points))
		for j, p := range s.Points {
			pts[j] = fmt.Sprintf("%.1f,%.1f", px(p.D), py(p.Q))
		}
		c.f(`<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", palette(i), dashes(i), strings.Join(pts, " "))
	}
	c.legend(names, false, true)
	return c.close()
}
