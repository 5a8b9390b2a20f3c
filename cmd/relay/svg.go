package main

import (
	"strings"

	"github.com/urbit-relay/relay/internal/svgchart"
)

// The route-tightening diagram (docs/tightening.svg), a specialised drawing
// on internal/svgchart's primitives: one column per node
// in chain order (requester, relays, publisher), one row per round. In each
// round an arrow goes from the requester to each lane the request was sent
// on (solid to the tightest, dashed to the known-good one beside it), a thin
// line continues from the tightest target down the chain to the publisher
// (the relays forwarding), and a caption gives the answer's next-hop. The
// output depends only on the rounds' names, so the committed file can be
// checked against a fresh run.

// Diagram geometry, in SVG user units.
const (
	svgColWidth   = 190 // distance between node columns
	svgLeft       = 130 // x of the first column (room for round labels)
	svgHeadY      = 36  // baseline of the column names
	svgTopY       = 80  // y of the first round's arrow
	svgRowHeight  = 78  // distance between rounds
	svgDualOffset = 16  // the dashed second arrow sits this far below the first
	svgFont       = "font-family:ui-monospace,Menlo,Consolas,monospace"
)

// svgColumn is one node of the diagram.
type svgColumn struct {
	name string // @p
	what string // e.g. "galaxy relay"
}

// tighteningSVG draws rounds over cols. Round targets, via and next name
// columns; a name not among cols is left out of the drawing.
func tighteningSVG(cols []svgColumn, rounds []demoRound) []byte {
	col := map[string]int{}
	for i, c := range cols {
		col[c.name] = i
	}
	x := func(i int) int { return svgLeft + i*svgColWidth }
	width := x(len(cols)-1) + svgLeft
	legendY := svgTopY + len(rounds)*svgRowHeight
	height := legendY + 70

	var w svgchart.Writer
	p := w.F
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" style="%s;font-size:13px">`+"\n", width, height, width, height, svgFont)
	p(`<title>Route tightening: each round trip moves the request one hop closer to the publisher</title>` + "\n")
	p(`<defs>` +
		`<marker id="head" viewBox="0 0 10 10" refX="10" refY="5" markerUnits="userSpaceOnUse" markerWidth="10" markerHeight="10" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#1f5fbf"/></marker>` +
		`<marker id="headgray" viewBox="0 0 10 10" refX="10" refY="5" markerUnits="userSpaceOnUse" markerWidth="10" markerHeight="10" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#888"/></marker>` +
		`</defs>` + "\n")
	p(`<rect width="100%%" height="100%%" fill="#fff"/>` + "\n")
	for i, c := range cols {
		p(`<text x="%d" y="%d" text-anchor="middle" font-weight="bold">%s</text>`+"\n", x(i), svgHeadY, svgchart.Escape(c.name))
		p(`<text x="%d" y="%d" text-anchor="middle" fill="#555" font-size="11">%s</text>`+"\n", x(i), svgHeadY+16, svgchart.Escape(c.what))
		p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd" stroke-width="1"/>`+"\n", x(i), svgHeadY+26, x(i), legendY-20)
	}
	last := len(cols) - 1
	for r, rd := range rounds {
		y := svgTopY + r*svgRowHeight
		p(`<text x="12" y="%d" font-weight="bold">round %d</text>`+"\n", y+4, r+1)
		for t, name := range rd.targets {
			ti, ok := col[name]
			if !ok || ti == 0 {
				continue
			}
			if t == 0 {
				p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#1f5fbf" stroke-width="2.5" marker-end="url(#head)"/>`+"\n", x(0), y, x(ti)-4, y)
				if ti < last {
					p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#1f5fbf" stroke-width="1" stroke-opacity="0.6" marker-end="url(#head)"/>`+"\n", x(ti), y, x(last)-4, y)
					for k := ti + 1; k < last; k++ {
						p(`<circle cx="%d" cy="%d" r="3" fill="#1f5fbf" fill-opacity="0.6"/>`+"\n", x(k), y)
					}
				}
				p(`<circle cx="%d" cy="%d" r="4" fill="#1f5fbf"/>`+"\n", x(ti), y)
				continue
			}
			yy := y + svgDualOffset
			p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888" stroke-width="1.5" stroke-dasharray="6,4" marker-end="url(#headgray)"/>`+"\n", x(0), yy, x(ti)-4, yy)
		}
		p(`<circle cx="%d" cy="%d" r="4" fill="#222"/>`+"\n", x(0), y)
		p(`<text x="%d" y="%d" fill="#333" font-size="12">%s</text>`+"\n", x(0)+8, y+svgDualOffset+22, svgchart.Escape(roundCaption(rd, cols[last].name)))
	}
	ly := legendY
	p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#1f5fbf" stroke-width="2.5" marker-end="url(#head)"/>`+"\n", 12, ly, 52, ly)
	p(`<text x="60" y="%d" font-size="12">request on the tightest route tried</text>`+"\n", ly+4)
	p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888" stroke-width="1.5" stroke-dasharray="6,4" marker-end="url(#headgray)"/>`+"\n", 330, ly, 370, ly)
	p(`<text x="378" y="%d" font-size="12">the same request on the known-good route, until the tighter one answers</text>`+"\n", ly+4)
	p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#1f5fbf" stroke-width="1" stroke-opacity="0.6" marker-end="url(#head)"/>`+"\n", 12, ly+24, 52, ly+24)
	p(`<text x="60" y="%d" font-size="12">forwarded down the sponsorship chain by the relays; the answer returns the same way</text>`+"\n", ly+28)
	p("</svg>\n")
	return w.Bytes()
}

// roundCaption describes a round's answer.
func roundCaption(rd demoRound, publisher string) string {
	var s strings.Builder
	if rd.via == publisher {
		s.WriteString("answered directly")
	} else {
		s.WriteString("answered via " + rd.via)
	}
	if rd.next != "" {
		s.WriteString("; next-hop " + rd.next + " (tried next round)")
	} else {
		s.WriteString("; no next-hop: the route is direct")
	}
	return s.String()
}
