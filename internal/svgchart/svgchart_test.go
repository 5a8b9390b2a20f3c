package svgchart

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
)

// wellFormed fails the test unless b is well-formed XML with an <svg> root.
func wellFormed(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, b)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q", root)
	}
}

func TestLineChartRenders(t *testing.T) {
	c := LineChart{Title: "a < b & c", XLabel: "x", YLabel: "y", Series: []Series{
		{Name: "one", X: []float64{0, 1, 2}, Y: []float64{1, 3, math.NaN()}, Labels: []string{"p<1>", "", ""}},
		{Name: "two", X: []float64{0, 2}, Y: []float64{2, 0.5}},
	}}
	b := c.Render()
	wellFormed(t, b)
	for _, want := range []string{"a &lt; b &amp; c", "p&lt;1&gt;", ">one<", ">two<"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("missing %q", want)
		}
	}
	if n := strings.Count(string(b), "<polyline"); n != 2 {
		t.Errorf("%d lines, want 2", n)
	}
	// The NaN point is left out: two circles for "one", two for "two".
	if n := strings.Count(string(b), "<circle"); n != 4 {
		t.Errorf("%d points, want 4", n)
	}
}

func TestLogAxisTicksDecades(t *testing.T) {
	a := newLogAxis(70, 40000, 300, 0)
	want := []float64{10, 100, 1000, 10000, 100000}
	if len(a.ticks) != len(want) {
		t.Fatalf("ticks %v, want %v", a.ticks, want)
	}
	for i := range want {
		if math.Abs(a.ticks[i]-want[i]) > 1e-9 {
			t.Fatalf("ticks %v, want %v", a.ticks, want)
		}
	}
	if p := a.pos(1000); math.Abs(p-150) > 1e-9 {
		t.Errorf("1000 at %v, want the middle (150)", p)
	}
	if a.drawable(0) || a.drawable(-1) || !a.drawable(1) {
		t.Error("a log axis must not draw values <= 0")
	}
	wellFormed(t, LineChart{LogY: true, Series: []Series{{Name: "s", X: []float64{1, 2}, Y: []float64{0, 50}}}}.Render())
}

func TestNiceStep(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{{0.7, 1}, {1.2, 2}, {3, 5}, {7, 10}, {45, 50}, {0.013, 0.02}} {
		if got := niceStep(c.in); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("niceStep(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestBarChartRenders(t *testing.T) {
	c := BarChart{Title: "t", YLabel: "y", Categories: []string{"a\nb", "c"},
		Series: []BarSeries{{Name: "s1", Values: []float64{1, math.NaN()}}, {Name: "s2", Values: []float64{2, 3}}}}
	b := c.Render()
	wellFormed(t, b)
	// Three bars (one NaN gap) plus the legend's two swatches and its box.
	if n := strings.Count(string(b), "<rect"); n != 1+3+2+1 {
		t.Errorf("%d rects, want 7 (background, 3 bars, legend box, 2 swatches)", n)
	}
	if !bytes.Contains(b, []byte(">a<")) || !bytes.Contains(b, []byte(">b<")) {
		t.Error("a category name's lines are not split")
	}
	wellFormed(t, BarChart{}.Render())
}

func TestCDFChartRenders(t *testing.T) {
	c := CDFChart{Title: "t & u", Series: []CDFSeries{
		{Name: "a", Points: []CDFPoint{{D: 50, Q: 0}, {D: 2000, Q: 0.5}, {D: 90000, Q: 0.9999}}},
		{Name: "empty"},
	}}
	b := c.Render()
	wellFormed(t, b)
	if n := strings.Count(string(b), "<polyline"); n != 1 {
		t.Errorf("%d polylines, want 1 (an empty series draws none)", n)
	}
	// 100 ns is the axis's floor, 0.999 its top: the first point sits at
	// the left edge, the last at the top.
	x0, _, _, y1 := plotArea()
	if !strings.Contains(string(b), fmt.Sprintf(`points="%.1f,`, x0)) || !strings.Contains(string(b), fmt.Sprintf(`,%.1f"`, y1)) {
		t.Errorf("the CDF does not span the axes:\n%s", b)
	}
	wellFormed(t, CDFChart{Title: "none"}.Render())
}

func TestLineChartTicksRefsRanges(t *testing.T) {
	c := LineChart{Title: "x", XTicks: []Tick{{0, "zero"}, {1, "1M"}}, Refs: []Ref{{Y: 10, Name: "limit"}, {Y: 8, Name: "85%", Dashed: true}},
		Series: []Series{{Name: "s", X: []float64{0, 1}, Y: []float64{5, 6}, Lo: []float64{4, 5}, Hi: []float64{12, 7}}}}
	b := string(c.Render())
	wellFormed(t, []byte(b))
	for _, s := range []string{">zero<", ">1M<", ">limit<", ">85%<", `stroke-dasharray="5 4"`} {
		if !strings.Contains(b, s) {
			t.Errorf("lacks %q", s)
		}
	}
	// The Y axis reaches the highest Hi (12), not only the highest Y or
	// reference (10).
	if !strings.Contains(b, `text-anchor="end">15<`) {
		t.Errorf("Y axis does not reach the range bars:\n%s", b)
	}
}

func TestWriterEscape(t *testing.T) {
	var w Writer
	w.F(`<text>%s</text>`, Escape(`a<b & "c"`))
	if got := string(w.Bytes()); got != `<text>a&lt;b &amp; &#34;c&#34;</text>` {
		t.Errorf("got %s", got)
	}
}
